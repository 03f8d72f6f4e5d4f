#ifndef XIDLELOCK_SDBUS_H
#define XIDLELOCK_SDBUS_H
/* Inside CBus only: the functions of libsystemd, found with dlsym by xil_bus_load
 * (cbus.c) and shared by every file of the module. The header gives their types;
 * nothing here is linked against the library. */
#include <errno.h>
#include <systemd/sd-bus.h>

#define XIL_BUS_FUNCTIONS(X) \
    X(sd_bus_open_user) X(sd_bus_open_system) X(sd_bus_close_unref) X(sd_bus_get_fd) \
    X(sd_bus_get_events) X(sd_bus_get_timeout) X(sd_bus_process) X(sd_bus_get_unique_name) \
    X(sd_bus_is_open) X(sd_bus_is_ready) \
    X(sd_bus_set_method_call_timeout) X(sd_bus_add_object_vtable) X(sd_bus_request_name_async) \
    X(sd_bus_emit_signal) X(sd_bus_reply_method_return) X(sd_bus_reply_method_errorf) \
    X(sd_bus_message_read) X(sd_bus_message_get_sender) X(sd_bus_message_get_errno) \
    X(sd_bus_creds_get_pid) X(sd_bus_creds_unref) X(sd_bus_match_signal_async) \
    X(sd_bus_call_method) X(sd_bus_call_method_async) X(sd_bus_message_unref) \
    X(sd_bus_error_free) X(sd_bus_message_enter_container) \
    X(sd_bus_message_exit_container) X(sd_bus_message_skip) X(sd_bus_message_read_basic) \
    X(sd_bus_message_is_method_error) X(sd_bus_message_get_error) \
    X(sd_bus_message_get_bus) X(sd_bus_add_match_async) X(sd_bus_slot_unref) \
    X(sd_bus_message_ref) X(sd_bus_get_n_queued_write) X(sd_bus_message_get_member) \
    X(sd_bus_message_get_path)


/* Each `p_f` has the type of `f` in sd-bus.h, so the compiler checks every call. */
#define XIL_BUS_DECLARE(name) extern __typeof__(name) *p_##name;
#define XIL_BUS_DEFINE(name) __typeof__(name) *p_##name;
XIL_BUS_FUNCTIONS(XIL_BUS_DECLARE)
/* libsystemd's sd_bus_object_vtable_format, for the start of a vtable. */
extern const unsigned *xil_vtable_format;

/* Whether an answer came over a connection still open: a bus that closes answers
 * every call still waiting with an error of its own making, which is no answer. */
static inline int xil_answered_on_open_bus(sd_bus_message *reply) {
    return p_sd_bus_is_open(p_sd_bus_message_get_bus(reply)) > 0;
}

/* The -errno of an error answer (-EIO when it names none). */
static inline int xil_answer_errno(sd_bus_message *reply) {
    int e = p_sd_bus_message_get_errno(reply);
    return e > 0 ? -e : -EIO;
}
/* Reads a variant holding one basic value of `type` ('b', 'u' or 's'; a string is
 * copied into `value`, `size` bytes). Returns 1 when read, or -errno. */
int xil_read_variant(sd_bus_message *m, char type, void *value, size_t size);

/* PropertiesChanged(s interface, a{sv} changed, as invalidated): finds `name`
 * among the changed values (a boolean or a string), or in the invalidated list. */
struct xil_property_seen {
    const char *name;
    char type;          /* 'b' or 's' */
    int found;          /* 1: value read; 2: invalidated (read it again) */
    int boolean;
    char string[256];
};
int xil_find_property(sd_bus_message *m, struct xil_property_seen *seen);
#endif
