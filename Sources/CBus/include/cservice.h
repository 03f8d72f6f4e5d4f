#ifndef XIDLELOCK_CSERVICE_H
#define XIDLELOCK_CSERVICE_H
/* A D-Bus object served from a table: its methods, signals, paths and well-known
 * name are declared by the caller (a Swift file per service), and every method
 * call is handed to one function with its arguments read. The caller's pid is
 * asked of the bus once per caller, without waiting, where a method needs it; a
 * caller that leaves the bus is told of. Nothing here decides anything. */
#include <stddef.h>
#include <stdint.h>

/* The table's limits, one place for both sides: the Swift side checks every
 * declaration against them (BusService.Declaration.limitsBroken) before it is added
 * here, where going past one is refused. */
#define XIL_SERVICE_NAMES_MAX 2
#define XIL_SERVICE_PATHS_MAX 4
#define XIL_SERVICE_METHODS_MAX 16
#define XIL_SERVICE_SIGNALS_MAX 4
/* A method's arguments; its return value, and a signal's, is one at most. */
#define XIL_SERVICE_ARGS_MAX 8
#define XIL_SERVICE_VALUES_MAX 1
/* The basic types a signature may hold: string, object path, uint32, int32, boolean. */
#define XIL_SERVICE_BASIC_TYPES "souib"

typedef struct sd_bus sd_bus;
struct xil_service;
/* One method call, valid only while it is handed over. */
struct xil_call;

struct xil_service_callbacks {
    void *context;
    /* A method call (its index in the order added): answered with xil_call_return*
     * or xil_call_fail before returning; one not answered gets an error. */
    void (*call)(void *context, int method, struct xil_call *call);
    /* A caller left the bus (or its pid could not be known: it was gone). */
    void (*caller_gone)(void *context, const char *sender);
    /* The bus's answer to asking for a name: 1 ours, 0 another program owns it
     * (its pid, or 0), or -errno. */
    void (*served)(void *context, const char *name, int result, uint32_t owner_pid);
};

/* A service of `interface`; NULL without memory. `callbacks` must outlive it. */
struct xil_service *xil_service_new(const char *interface, const struct xil_service_callbacks *callbacks);
/* A well-known name it asks for (at most XIL_SERVICE_NAMES_MAX). Its index, or -errno. */
int xil_service_add_name(struct xil_service *service, const char *name);
int xil_service_add_path(struct xil_service *service, const char *path);
/* `in`: basic types only, at most XIL_SERVICE_ARGS_MAX; `out`: "" or one basic type.
 * needs_caller: the call waits for the caller's pid. Its index, or -errno. */
int xil_service_add_method(struct xil_service *service, const char *name, const char *in, const char *out, int needs_caller);
/* `signature`: "" or one basic type. Its index, or -errno. */
int xil_service_add_signal(struct xil_service *service, const char *name, const char *signature);
/* Serves it on `bus` (at every path) and asks for its names without waiting
 * (answered through `served`). 0 or -errno. */
int xil_service_serve(struct xil_service *service, sd_bus *bus);
/* The bus is gone: its callers are forgotten, and the service can be served again. */
void xil_service_forget(struct xil_service *service);
/* Frees a service that was never served (0); one served stays for the process's life,
 * since the bus holds its table (-EBUSY, nothing freed). */
int xil_service_free(struct xil_service *service);
/* Emits a signal on every path, with its one value (ignored for ""). */
int xil_service_emit(struct xil_service *service, int signal, uint32_t value);
/* How many callers it follows now. */
int xil_service_callers(const struct xil_service *service);

const char *xil_call_sender(const struct xil_call *call);
/* The caller's pid as the bus told it; 0 when unknown. */
uint32_t xil_call_pid(const struct xil_call *call);
/* Argument i: a string ("" when it is not one), or a number (u, i, b). */
const char *xil_call_string(const struct xil_call *call, int i);
uint32_t xil_call_uint(const struct xil_call *call, int i);
/* Answers with the method's one value (ignored when it returns nothing). */
int xil_call_return(struct xil_call *call, uint32_t value);
int xil_call_return_string(struct xil_call *call, const char *value);
int xil_call_fail(struct xil_call *call, const char *error, const char *message);
/* A call to answer later (the answer waits on another question): it counts as
 * answered now, and is answered, and freed, by exactly one of the two below. NULL
 * without memory or when answered already. The bus that carried it must still be open
 * (a reply on a closed bus fails, harmlessly). */
struct xil_deferred;
struct xil_deferred *xil_call_defer(struct xil_call *call);
int xil_deferred_return(struct xil_deferred *deferred, uint32_t value);
int xil_deferred_fail(struct xil_deferred *deferred, const char *error, const char *message);
#endif
