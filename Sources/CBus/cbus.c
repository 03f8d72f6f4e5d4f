#define _GNU_SOURCE
#include "cbus.h"
#include "clinux.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "sdbus.h"

XIL_BUS_FUNCTIONS(XIL_BUS_DEFINE)
const unsigned *xil_vtable_format;

int xil_bus_load(char *error, size_t size) {
    static int loaded;
    if (loaded) return 0;
    void *lib;
    if (XIL_LOAD_LIST("libsystemd.so.0", XIL_BUS_FUNCTIONS, &lib, error, size) != 0) return -1;
    const unsigned *format = dlsym(lib, "sd_bus_object_vtable_format");
    if (!format) {
        snprintf(error, size, "libsystemd.so.0 has no sd_bus_object_vtable_format (too old)");
        return -1;
    }
    xil_vtable_format = format;
    loaded = 1;
    return 0;
}

static void say(const struct xil_desktop_callbacks *cb, int level, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static void say(const struct xil_desktop_callbacks *cb, int level, const char *format, ...) {
    if (!cb || !cb->log) return;
    char text[512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    cb->log(cb->context, level, text);
}

/* MARK: The connection */

sd_bus *xil_bus_connect(int user, int *err) {
    sd_bus *bus = NULL;
    /* Connects the socket (a missing one fails here) and queues the authentication and
     * Hello; nothing waits for the bus's answer. */
    int r = user ? p_sd_bus_open_user(&bus) : p_sd_bus_open_system(&bus);
    if (r < 0) {
        *err = r;
        return NULL;
    }
    p_sd_bus_set_method_call_timeout(bus, 2 * 1000000ULL);
    *err = 0;
    return bus;
}

int xil_bus_ready(sd_bus *bus) { return p_sd_bus_is_ready(bus) > 0; }

sd_bus *xil_bus_open(int user, int *err) {
    sd_bus *bus = xil_bus_connect(user, err);
    if (!bus) return NULL;
    /* Waits for the handshake (sd-bus's own bound), so that "no bus" shows at once. */
    const char *name = NULL;
    int r = p_sd_bus_get_unique_name(bus, &name);
    if (r < 0) {
        p_sd_bus_close_unref(bus);
        *err = r;
        return NULL;
    }
    return bus;
}

/* Never flushed: a bus that reads nothing must not hold the caller here. */
void xil_bus_close(sd_bus *bus) { if (bus) p_sd_bus_close_unref(bus); }
int xil_bus_fd(sd_bus *bus) { return p_sd_bus_get_fd(bus); }
int xil_bus_events(sd_bus *bus) { int e = p_sd_bus_get_events(bus); return e < 0 ? POLLIN : e; }

uint64_t xil_bus_timeout(sd_bus *bus) {
    uint64_t usec = UINT64_MAX;
    if (p_sd_bus_get_timeout(bus, &usec) < 0) return UINT64_MAX;
    return usec;
}

uint64_t xil_bus_queued_writes(sd_bus *bus) {
    uint64_t n = 0;
    return p_sd_bus_get_n_queued_write(bus, &n) < 0 ? 0 : n;
}

int xil_bus_process(sd_bus *bus, int budget) {
    for (int i = 0; i < budget; i++) {
        int r = p_sd_bus_process(bus, NULL);
        if (r <= 0) return r;
    }
    return 1;
}



/* MARK: logind */

#define LOGIN1 "org.freedesktop.login1"
#define MANAGER_PATH "/org/freedesktop/login1"
#define MANAGER LOGIN1 ".Manager"
#define SESSION LOGIN1 ".Session"

static int read_object_path(sd_bus_message *reply, char *path, size_t size) {
    const char *p = NULL;
    int r = p_sd_bus_message_read(reply, "o", &p);
    if (r < 0) return r;
    snprintf(path, size, "%s", p);
    return 0;
}

/* The agent's session on its bus connection, asked without waiting: GetSession for
 * XDG_SESSION_ID, or (a systemd user unit runs outside any session) the user's
 * display session, as logind names it (User.Display). One lookup per connection;
 * its calls go with the connection. */
static const struct xil_desktop_callbacks *session_lookup;

static int session_not_found(sd_bus_message *reply, int r, const char *why) {
    char text[256];
    const sd_bus_error *e = reply && p_sd_bus_message_is_method_error(reply, NULL) ? p_sd_bus_message_get_error(reply) : NULL;
    snprintf(text, sizeof text, "%s", why ? why : e && e->message ? e->message : strerror(-r));
    session_lookup->session_found(session_lookup->context, NULL, text);
    return 0;
}

static int session_path_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)userdata; (void)error;
    char path[256];
    if (!xil_answered_on_open_bus(reply)) return 0;
    if (p_sd_bus_message_is_method_error(reply, NULL)) return session_not_found(reply, -EIO, NULL);
    int r = read_object_path(reply, path, sizeof path);
    if (r < 0) return session_not_found(NULL, r, NULL);
    session_lookup->session_found(session_lookup->context, path, NULL);
    return 0;
}

static int display_session_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)userdata; (void)error;
    const char *id = NULL, *path = NULL;
    if (!xil_answered_on_open_bus(reply)) return 0;
    if (p_sd_bus_message_is_method_error(reply, NULL)) return session_not_found(reply, -EIO, NULL);
    int r = p_sd_bus_message_enter_container(reply, 'v', "(so)");
    if (r >= 0) r = p_sd_bus_message_read(reply, "(so)", &id, &path);
    if (r < 0) return session_not_found(NULL, r, NULL);
    if (!id || !*id) return session_not_found(NULL, -ENOENT, "the user has no display session");
    session_lookup->session_found(session_lookup->context, path, NULL);
    return 0;
}

static int user_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)userdata; (void)error;
    char path[256];
    if (!xil_answered_on_open_bus(reply)) return 0;
    if (p_sd_bus_message_is_method_error(reply, NULL)) return session_not_found(reply, -EIO, NULL);
    int r = read_object_path(reply, path, sizeof path);
    if (r >= 0)
        r = p_sd_bus_call_method_async(p_sd_bus_message_get_bus(reply), NULL, LOGIN1, path, "org.freedesktop.DBus.Properties",
                                       "Get", display_session_answered, NULL, "ss", LOGIN1 ".User", "Display");
    return r < 0 ? session_not_found(NULL, r, NULL) : 0;
}

int xil_logind_find_session(sd_bus *bus, const struct xil_desktop_callbacks *cb, const char *session_id) {
    session_lookup = cb;
    if (session_id && *session_id)
        return p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "GetSession", session_path_answered, NULL,
                                          "s", session_id);
    return p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "GetUser", user_answered, NULL,
                                      "u", (uint32_t)getuid());
}

/* logind's signals count only from the connection that owns org.freedesktop.login1
 * now. Debian's system bus lets any local user send a signal to any connection, and
 * a match rule that names logind's well-known name does not help: sd-bus cannot
 * check a well-known sender on a dbus-daemon bus (it lets every unique name through),
 * and a unicast signal never meets the daemon's match rules. The owner is asked once
 * at start and then followed through NameOwnerChanged, which only the bus itself
 * sends (the daemon stamps every other sender's own unique name). */
/* A well-known name on the system bus and the unique name that owns it now, for
 * taking a service's signals only from the service (logind, UPower). */
struct followed_name {
    const char *name;
    char owner[256];                       /* "" while nobody owns the name (or not known yet) */
    void (*changed)(struct followed_name *followed);   /* after a change of owner, or NULL */
    const struct xil_desktop_callbacks *cb;
    const char *unowned;                   /* said (a warning, or info for an optional service) when the */
    int unowned_level;                     /* first answer is that nobody owns the name; NULL: nothing */
};

static int on_name_owner(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct followed_name *followed = userdata;
    const char *sender = p_sd_bus_message_get_sender(m);
    if (!sender || strcmp(sender, "org.freedesktop.DBus") != 0) return 0;
    const char *name = NULL, *old = NULL, *new_owner = NULL;
    if (p_sd_bus_message_read(m, "sss", &name, &old, &new_owner) < 0 || strcmp(name, followed->name) != 0) return 0;
    snprintf(followed->owner, sizeof followed->owner, "%s", new_owner ? new_owner : "");
    say(followed->cb, 1, "%s is now %s", followed->name, followed->owner[0] ? followed->owner : "owned by nobody");
    if (followed->changed) followed->changed(followed);
    return 0;
}

/* The bus's answer to GetNameOwner (an error: nobody owns it). The bus sends a
 * NameOwnerChanged of before the question ahead of this answer, one of after it
 * behind: the answer is never stale. */
static int name_owner_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    struct followed_name *followed = userdata;
    const char *owner = NULL;
    if (!xil_answered_on_open_bus(reply)) return 0;
    if (!p_sd_bus_message_is_method_error(reply, NULL) && p_sd_bus_message_read(reply, "s", &owner) >= 0 && owner)
        snprintf(followed->owner, sizeof followed->owner, "%s", owner);
    else
        followed->owner[0] = 0;
    if (!followed->owner[0] && followed->unowned) say(followed->cb, followed->unowned_level, "%s", followed->unowned);
    if (followed->changed) followed->changed(followed);
    return 0;
}

/* Follows who owns `followed->name`: the match first, then the question (the bus
 * takes them in order), so that no change of owner falls in between. Nothing
 * waits: until the answer the name counts as owned by nobody. 0 or -errno. */
static int follow_name(sd_bus *bus, struct followed_name *followed) {
    char match[512];
    snprintf(match, sizeof match,
             "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
             "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='%s'", followed->name);
    followed->owner[0] = 0;
    int r = p_sd_bus_add_match_async(bus, NULL, match, on_name_owner, NULL, followed);
    if (r < 0) return r;
    r = p_sd_bus_call_method_async(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   "GetNameOwner", name_owner_answered, followed, "s", followed->name);
    return r < 0 ? r : 0;
}

/* Whether `m` came from the name's owner; if not, it is counted as forged. */
static int from_owner(struct followed_name *followed, sd_bus_message *m, const char *what) {
    const char *sender = p_sd_bus_message_get_sender(m);
    if (sender && followed->owner[0] && strcmp(sender, followed->owner) == 0) return 1;
    followed->cb->forged(followed->cb->context, sender ? sender : "?", what);
    return 0;
}

static struct {
    struct followed_name login1;
    char *session;                         /* the session's object path, or NULL */
    sd_bus_slot *session_matches[3];       /* its Lock, Unlock, PropertiesChanged */
    const struct xil_desktop_callbacks *cb;
    sd_bus_slot *listing;                  /* a ListInhibitors in flight */
    int list_again;                        /* a change came while it was in flight */
} logind;

static int from_logind(sd_bus_message *m, const char *what) { return from_owner(&logind.login1, m, what); }

static int on_prepare_for_sleep(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    int starting = 0;
    if (!from_logind(m, "PrepareForSleep")) return 0;
    if (p_sd_bus_message_read(m, "b", &starting) >= 0) cb->prepare_for_sleep(cb->context, starting);
    return 0;
}

static int on_session_lock(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    if (from_logind(m, "Lock")) cb->session_lock(cb->context, 1);
    return 0;
}

static int on_session_unlock(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    if (from_logind(m, "Unlock")) cb->session_lock(cb->context, 0);
    return 0;
}

/* Walks an a{sv} (GetAll's answer, PropertiesChanged's changed values): calls
 * `visit` with each key while the message stands at that key's variant. `visit`
 * reads the variant and returns 1, or returns 0 to have it skipped. */
typedef int (*property_visitor)(sd_bus_message *m, const char *key, void *context);

static int read_properties(sd_bus_message *m, property_visitor visit, void *context) {
    int r = p_sd_bus_message_enter_container(m, 'a', "{sv}");
    if (r < 0) return r;
    while ((r = p_sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
        const char *key = NULL;
        r = p_sd_bus_message_read(m, "s", &key);
        if (r >= 0) r = visit(m, key, context);
        if (r == 0) r = p_sd_bus_message_skip(m, "v");
        if (r < 0) return r;
        r = p_sd_bus_message_exit_container(m);
        if (r < 0) return r;
    }
    if (r < 0) return r;
    return p_sd_bus_message_exit_container(m);
}

int xil_read_variant(sd_bus_message *m, char type, void *value, size_t size) {
    char signature[2] = {type, 0};
    int r = p_sd_bus_message_enter_container(m, 'v', signature);
    if (r < 0) return r;
    if (type == 's') {
        const char *text = NULL;
        r = p_sd_bus_message_read(m, "s", &text);
        if (r >= 0) snprintf(value, size, "%s", text ? text : "");
    } else {
        r = p_sd_bus_message_read_basic(m, type, value);
    }
    if (r >= 0) r = p_sd_bus_message_exit_container(m);
    return r < 0 ? r : 1;
}

static int visit_seen(sd_bus_message *m, const char *key, void *context) {
    struct xil_property_seen *seen = context;
    if (strcmp(key, seen->name) != 0) return 0;
    int r = seen->type == 'b' ? xil_read_variant(m, 'b', &seen->boolean, 0)
                              : xil_read_variant(m, 's', seen->string, sizeof seen->string);
    if (r > 0) seen->found = 1;
    return r;
}

int xil_find_property(sd_bus_message *m, struct xil_property_seen *seen) {
    const char *interface = NULL;
    int r = p_sd_bus_message_read(m, "s", &interface);
    if (r >= 0) r = read_properties(m, visit_seen, seen);
    if (r < 0) return r;
    r = p_sd_bus_message_enter_container(m, 'a', "s");
    if (r < 0) return r;
    const char *invalidated = NULL;
    while ((r = p_sd_bus_message_read(m, "s", &invalidated)) > 0) {
        if (!seen->found && strcmp(invalidated, seen->name) == 0) seen->found = 2;
    }
    return r < 0 ? r : 0;
}

/* The answer to reading the session's Active again (it was only invalidated). */
static int active_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    int active = 1;
    if (!xil_answered_on_open_bus(reply) || p_sd_bus_message_is_method_error(reply, NULL)) return 0;
    if (p_sd_bus_message_enter_container(reply, 'v', "b") >= 0 && p_sd_bus_message_read(reply, "b", &active) >= 0)
        cb->session_active(cb->context, active);
    return 0;
}

static int on_session_properties(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    if (!from_logind(m, "PropertiesChanged")) return 0;
    struct xil_property_seen seen = {.name = "Active", .type = 'b'};
    if (xil_find_property(m, &seen) < 0 || !seen.found) return 0;
    if (seen.found == 1) {
        cb->session_active(cb->context, seen.boolean);
    } else if (logind.session) {
        /* Read again without waiting: the answer comes as its own message. */
        p_sd_bus_call_method_async(p_sd_bus_message_get_bus(m), NULL, LOGIN1, logind.session, "org.freedesktop.DBus.Properties",
                                   "Get", active_answered, (void *)cb, "ss", SESSION, "Active");
    }
    return 0;
}

static int on_manager_properties(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error; (void)userdata;
    if (!from_logind(m, "PropertiesChanged")) return 0;
    struct xil_property_seen seen = {.name = "BlockInhibited", .type = 's'};
    /* Changed or only invalidated: the list of inhibitors is read again either way. */
    if (xil_find_property(m, &seen) >= 0 && seen.found) xil_logind_list_idle_inhibitors(p_sd_bus_message_get_bus(m));
    return 0;
}

static void logind_forget_session(void) {
    for (int i = 0; i < 3; i++)
        if (logind.session_matches[i]) logind.session_matches[i] = p_sd_bus_slot_unref(logind.session_matches[i]);
    free(logind.session);
    logind.session = NULL;
}

static void logind_forget(void) {
    logind_forget_session();
    if (logind.listing) logind.listing = p_sd_bus_slot_unref(logind.listing);
    logind.list_again = 0;
    logind.login1.owner[0] = 0;
}

static void logind_owner_changed(struct followed_name *followed) {
    followed->cb->logind_owner(followed->cb->context, followed->owner[0] != 0);
}

/* Matches are installed without waiting; one the bus refuses closes the connection
 * (sd-bus's rule without an install callback), and the agent connects again. */
int xil_logind_watch(sd_bus *bus, const struct xil_desktop_callbacks *cb) {
    void *ud = (void *)cb;
    /* A connection before this one (a bus lost and found again) is gone with its matches. */
    logind_forget();
    logind.cb = cb;
    logind.login1 = (struct followed_name){
        .name = LOGIN1, .cb = cb, .changed = logind_owner_changed, .unowned_level = 1,
        .unowned = "nobody owns org.freedesktop.login1 on the system bus (yet): followed once logind starts; "
                   "until then no signal claiming to be logind's is taken"};
    int r = follow_name(bus, &logind.login1);
    if (r < 0) return r;
    r = p_sd_bus_match_signal_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "PrepareForSleep", on_prepare_for_sleep, NULL, ud);
    if (r < 0) return r;
    r = p_sd_bus_match_signal_async(bus, NULL, LOGIN1, MANAGER_PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                                    on_manager_properties, NULL, ud);
    return r < 0 ? r : 0;
}

/* The last of the session's matches is in place: so are those before it (the bus
 * takes them in order). */
static int session_matched(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    if (!xil_answered_on_open_bus(reply)) return 0;
    cb->session_watched(cb->context, p_sd_bus_message_is_method_error(reply, NULL) ? xil_answer_errno(reply) : 0);
    return 0;
}

int xil_logind_watch_session(sd_bus *bus, const char *session_path) {
    void *ud = (void *)logind.cb;
    /* Another owner of logind's name (a restart) is followed anew: one match of each. */
    logind_forget_session();
    logind.session = strdup(session_path);
    if (!logind.session) return -ENOMEM;
    sd_bus_slot **slots = logind.session_matches;
    int r = p_sd_bus_match_signal_async(bus, &slots[0], LOGIN1, session_path, SESSION, "Lock", on_session_lock, NULL, ud);
    if (r >= 0) r = p_sd_bus_match_signal_async(bus, &slots[1], LOGIN1, session_path, SESSION, "Unlock", on_session_unlock, NULL, ud);
    if (r >= 0) r = p_sd_bus_match_signal_async(bus, &slots[2], LOGIN1, session_path, "org.freedesktop.DBus.Properties",
                                                "PropertiesChanged", on_session_properties, session_matched, ud);
    return r < 0 ? r : 0;
}

int xil_logind_read_session_active(sd_bus *bus) {
    if (!logind.session) return -ENOENT;
    return p_sd_bus_call_method_async(bus, NULL, LOGIN1, logind.session, "org.freedesktop.DBus.Properties", "Get",
                                      active_answered, (void *)logind.cb, "ss", SESSION, "Active");
}

const char *xil_logind_owner(void) { return logind.login1.owner; }

/* UPower's OnBattery, taken only from UPower's own connection; read again when
 * UPower (re)starts, and AC when nobody owns the name. */
#define UPOWER "org.freedesktop.UPower"
#define UPOWER_PATH "/org/freedesktop/UPower"
static struct followed_name upower;

static int on_battery_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error; (void)userdata;
    int on_battery = 0;
    if (!xil_answered_on_open_bus(reply)) return 0;
    if (p_sd_bus_message_is_method_error(reply, NULL)) {
        say(upower.cb, 2, "cannot read UPower's OnBattery: %s", p_sd_bus_message_get_error(reply)->message);
    } else if (p_sd_bus_message_enter_container(reply, 'v', "b") >= 0) {
        p_sd_bus_message_read(reply, "b", &on_battery);
    }
    upower.cb->on_battery(upower.cb->context, on_battery != 0);
    return 0;
}

static void upower_owner_changed(struct followed_name *followed) {
    (void)followed;
    if (!upower.owner[0]) {
        upower.cb->on_battery(upower.cb->context, 0);
        return;
    }
    xil_upower_read(NULL);
}

static sd_bus *upower_bus;

int xil_upower_read(sd_bus *bus) {
    if (bus) upower_bus = bus;
    if (!upower.owner[0]) {
        upower.cb->on_battery(upower.cb->context, 0);
        return 0;
    }
    return p_sd_bus_call_method_async(upower_bus, NULL, UPOWER, UPOWER_PATH, "org.freedesktop.DBus.Properties", "Get",
                                      on_battery_answered, NULL, "ss", UPOWER, "OnBattery");
}

static int on_upower_properties(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error; (void)userdata;
    if (!from_owner(&upower, m, "UPower's PropertiesChanged")) return 0;
    struct xil_property_seen seen = {.name = "OnBattery", .type = 'b'};
    if (xil_find_property(m, &seen) < 0 || !seen.found) return 0;
    if (seen.found == 1) {
        upower.cb->on_battery(upower.cb->context, seen.boolean);
    } else {
        xil_upower_read(NULL);
    }
    return 0;
}

int xil_upower_watch(sd_bus *bus, const struct xil_desktop_callbacks *cb) {
    upower = (struct followed_name){.name = UPOWER, .changed = upower_owner_changed, .cb = cb, .unowned_level = 1,
                                    .unowned = "no UPower on the system bus: the times on AC are in force"};
    upower_bus = bus;
    /* Read once the owner is known (upower_owner_changed). */
    int r = follow_name(bus, &upower);
    if (r < 0) return r;
    r = p_sd_bus_match_signal_async(bus, NULL, UPOWER, UPOWER_PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged",
                                    on_upower_properties, NULL, NULL);
    return r < 0 ? r : 0;
}

const char *xil_upower_owner(void) { return upower.owner; }

static int sleep_delay_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    if (!xil_answered_on_open_bus(reply)) return 0;
    int fd = -1;
    int failed = p_sd_bus_message_is_method_error(reply, NULL);
    /* From a logind that has gone since (restarted): the new one is asked anew. */
    const char *sender = p_sd_bus_message_get_sender(reply);
    if (!failed && (!sender || strcmp(sender, logind.login1.owner) != 0)) return 0;
    int r = failed ? xil_answer_errno(reply) : p_sd_bus_message_read(reply, "h", &fd);
    /* The message owns its descriptor: keep a copy of our own, never inherited. */
    if (r >= 0) {
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) r = -errno;
    }
    cb->sleep_delay_taken(cb->context, r < 0 ? r : fd);
    return 0;
}

int xil_logind_take_sleep_delay(sd_bus *bus, const struct xil_desktop_callbacks *cb, const char *who, const char *why) {
    return p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "Inhibit", sleep_delay_answered, (void *)cb,
                                      "ssss", "sleep", who, why, "delay");
}

static int delay_max_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    uint64_t usec = 0;
    if (!xil_answered_on_open_bus(reply)) return 0;
    if (!p_sd_bus_message_is_method_error(reply, NULL) && p_sd_bus_message_enter_container(reply, 'v', "t") >= 0)
        p_sd_bus_message_read(reply, "t", &usec);
    cb->delay_limit(cb->context, usec == 0 ? 5 * 1000000ULL : usec);
    return 0;
}

int xil_logind_read_delay_max(sd_bus *bus, const struct xil_desktop_callbacks *cb) {
    return p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, "org.freedesktop.DBus.Properties", "Get",
                                      delay_max_answered, (void *)cb, "ss", MANAGER, "InhibitDelayMaxUSec");
}

/* Each hint's refusal is said once: sessions of type tty (startx) refuse
 * SetIdleHint every time. */
struct hint {
    const char *method;
    const struct xil_desktop_callbacks *cb;
    int refused;
};
static struct hint hints[] = {[XIL_LOCKED_HINT] = {"SetLockedHint", NULL, 0}, [XIL_IDLE_HINT] = {"SetIdleHint", NULL, 0}};

static int hint_answered(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct hint *hint = userdata;
    if (!xil_answered_on_open_bus(m)) return 0;
    if (p_sd_bus_message_is_method_error(m, NULL) && !hint->refused) {
        hint->refused = 1;
        const sd_bus_error *e = p_sd_bus_message_get_error(m);
        say(hint->cb, 1, "logind refused %s (said once): %s", hint->method, e && e->message ? e->message : "?");
    }
    return 0;
}

int xil_logind_session_hint(sd_bus *bus, const struct xil_desktop_callbacks *cb, const char *session_path,
                            enum xil_hint which, int value) {
    if (which != XIL_LOCKED_HINT && which != XIL_IDLE_HINT) return -EINVAL;
    struct hint *hint = &hints[which];
    hint->cb = cb;
    return p_sd_bus_call_method_async(bus, NULL, LOGIN1, session_path, SESSION, hint->method, hint_answered, hint, "b", value);
}

/* The answer to ListInhibitors: the idle inhibitors in block mode, each told, then the end. */
static int inhibitors_listed(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    const struct xil_desktop_callbacks *cb = userdata;
    logind.listing = p_sd_bus_slot_unref(logind.listing);
    int r = p_sd_bus_message_is_method_error(reply, NULL) ? -EIO : p_sd_bus_message_enter_container(reply, 'a', "(ssssuu)");
    while (r >= 0) {
        const char *what = NULL, *who = NULL, *why = NULL, *mode = NULL;
        uint32_t uid = 0, pid = 0;
        r = p_sd_bus_message_read(reply, "(ssssuu)", &what, &who, &why, &mode, &uid, &pid);
        if (r <= 0) break;
        /* `what` is a colon-separated list: "idle", "sleep:idle". */
        char list[256];
        snprintf(list, sizeof list, ":%s:", what);
        if (strstr(list, ":idle:") && strcmp(mode, "block") == 0) cb->idle_inhibitor(cb->context, who, why, uid, pid);
    }
    cb->idle_inhibitors_listed(cb->context, r < 0 ? r : 0);
    if (logind.list_again) xil_logind_list_idle_inhibitors(p_sd_bus_message_get_bus(reply));
    return 0;
}

int xil_logind_list_idle_inhibitors(sd_bus *bus) {
    /* One in flight at a time; a change meanwhile asks again once it is answered. */
    if (logind.listing) {
        logind.list_again = 1;
        return 0;
    }
    logind.list_again = 0;
    return p_sd_bus_call_method_async(bus, &logind.listing, LOGIN1, MANAGER_PATH, MANAGER, "ListInhibitors",
                                      inhibitors_listed, (void *)logind.cb, "");
}

/* MARK: The guard's view of logind (as root) */

static struct {
    struct followed_name login1;
    const struct xil_desktop_callbacks *cb;
} guard_logind;

static void guard_owner_changed(struct followed_name *followed) {
    followed->cb->sessions_changed(followed->cb->context);
}

static int on_guard_session_signal(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error; (void)userdata;
    /* What changed is read again from logind itself: a forged signal costs a re-read at most. */
    if (!from_owner(&guard_logind.login1, m, "a session signal")) return 0;
    guard_logind.cb->sessions_changed(guard_logind.cb->context);
    return 0;
}

/* The session properties no guard decision reads: agents and logind change them all the
 * time, and re-reading a session for each would make every change cost the guard work. */
static int guard_ignores(const char *name) {
    return strcmp(name, "IdleHint") == 0 || strcmp(name, "IdleSinceHint") == 0 ||
           strcmp(name, "IdleSinceHintMonotonic") == 0;
}

static int visit_guarded_change(sd_bus_message *m, const char *key, void *context) {
    (void)m;
    if (!guard_ignores(key)) *(int *)context = 1;
    return 0;
}

/* One session's PropertiesChanged: that session read again, and only when a property
 * the guard reads changed (or was invalidated). */
static int on_guard_session_properties(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error; (void)userdata;
    if (!from_owner(&guard_logind.login1, m, "a session signal")) return 0;
    const char *interface = NULL, *invalidated = NULL, *path = p_sd_bus_message_get_path(m);
    int wanted = 0;
    int r = p_sd_bus_message_read(m, "s", &interface);
    if (r >= 0) r = read_properties(m, visit_guarded_change, &wanted);
    if (r >= 0) r = p_sd_bus_message_enter_container(m, 'a', "s");
    while (r >= 0 && (r = p_sd_bus_message_read(m, "s", &invalidated)) > 0)
        if (!guard_ignores(invalidated)) wanted = 1;
    /* A message it cannot read is read again from logind: it costs one session's read. */
    if ((r < 0 || wanted) && path) guard_logind.cb->session_changed(guard_logind.cb->context, path);
    return 0;
}

int xil_guard_watch_logind(sd_bus *bus, const struct xil_desktop_callbacks *cb) {
    guard_logind.cb = cb;
    guard_logind.login1 = (struct followed_name){.name = LOGIN1, .cb = cb, .changed = guard_owner_changed};
    int r = follow_name(bus, &guard_logind.login1);
    if (r < 0) return r;
    r = p_sd_bus_match_signal_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "SessionNew", on_guard_session_signal, NULL, NULL);
    if (r >= 0)
        r = p_sd_bus_match_signal_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "SessionRemoved", on_guard_session_signal, NULL, NULL);
    if (r >= 0)
        r = p_sd_bus_add_match_async(bus, NULL,
                                     "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
                                     "path_namespace='/org/freedesktop/login1/session'",
                                     on_guard_session_properties, NULL, NULL);
    return r < 0 ? r : 0;
}

/* The session properties the guard needs, from a GetAll answer. */
static int visit_session(sd_bus_message *m, const char *key, void *context) {
    struct xil_session_info *s = context;
    if (strcmp(key, "Type") == 0) return xil_read_variant(m, 's', s->type, sizeof s->type);
    if (strcmp(key, "Class") == 0) return xil_read_variant(m, 's', s->session_class, sizeof s->session_class);
    if (strcmp(key, "State") == 0) return xil_read_variant(m, 's', s->state, sizeof s->state);
    if (strcmp(key, "Display") == 0) return xil_read_variant(m, 's', s->display, sizeof s->display);
    if (strcmp(key, "Active") == 0) return xil_read_variant(m, 'b', &s->active, 0);
    if (strcmp(key, "Remote") == 0) return xil_read_variant(m, 'b', &s->remote, 0);
    if (strcmp(key, "LockedHint") == 0) return xil_read_variant(m, 'b', &s->locked_hint, 0);
    if (strcmp(key, "Leader") == 0) return xil_read_variant(m, 'u', &s->leader, 0);
    if (strcmp(key, "Id") == 0) return xil_read_variant(m, 's', s->id, sizeof s->id);
    if (strcmp(key, "Name") == 0) return xil_read_variant(m, 's', s->user, sizeof s->user);
    if (strcmp(key, "Seat") == 0 || strcmp(key, "User") == 0) {
        /* Seat (so): the seat's id; User (uo): the uid. */
        int seat = key[1] == 'e';
        const char *text = NULL, *object = NULL;
        int r = p_sd_bus_message_enter_container(m, 'v', seat ? "(so)" : "(uo)");
        if (r >= 0) r = seat ? p_sd_bus_message_read(m, "(so)", &text, &object) : p_sd_bus_message_read(m, "(uo)", &s->uid, &object);
        if (r >= 0 && seat) snprintf(s->seat, sizeof s->seat, "%s", text ? text : "");
        if (r >= 0) r = p_sd_bus_message_exit_container(m);
        return r < 0 ? r : 1;
    }
    return 0;
}

static void copy_error(const sd_bus_error *error, char *text, size_t size) {
    if (text && size) snprintf(text, size, "%s", error->message ? error->message : error->name ? error->name : "");
}

#define NO_SESSION_FOR_PID "org.freedesktop.login1.NoSessionForPID"


/* MARK: A session asked of logind without waiting: the agent's own (on a connection of
 * its own, under a policy) and the guard's questions (nothing in its loop waits) */

/* One question, every step asynchronous: GetSessionByPID (for a process in no session,
 * a systemd user unit: the user's display session, User.Display) or a session's path,
 * then the session's properties. The agent's own loop polls `done`; the guard's
 * question (`answer` set) is answered once and freed. */
struct session_question {
    struct xil_session_info *info;
    uint32_t uid;
    int done;                  /* 0 asking, 1 answered, -errno failed */
    char *error;
    size_t error_size;
    xil_session_answer answer;
    void *userdata;
    struct xil_session_info own_info;
    char own_error[256];
};

static struct session_question *guard_question(xil_session_answer answer, void *userdata, uint32_t uid) {
    struct session_question *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->info = &q->own_info;
    q->error = q->own_error;
    q->error_size = sizeof q->own_error;
    q->uid = uid;
    q->answer = answer;
    q->userdata = userdata;
    return q;
}

/* The question's end: said to the guard (and freed), or left for the agent's loop. */
static int question_done(struct session_question *q, int done) {
    q->done = done;
    if (q->answer) {
        if (done < 0 && !*q->error) snprintf(q->error, q->error_size, "%s", strerror(-done));
        q->answer(q->userdata, done < 0 ? done : 0, done < 0 ? NULL : q->info, done < 0 ? q->error : NULL);
        free(q);
    }
    return 0;
}

static int own_failed(struct session_question *q, sd_bus_message *reply, int r) {
    if (reply && p_sd_bus_message_is_method_error(reply, NULL)) copy_error(p_sd_bus_message_get_error(reply), q->error, q->error_size);
    return question_done(q, r < 0 ? r : -ENXIO);
}

static int own_properties(sd_bus_message *reply, void *userdata, sd_bus_error *e) {
    (void)e;
    struct session_question *q = userdata;
    if (p_sd_bus_message_is_method_error(reply, NULL)) return own_failed(q, reply, -ENXIO);
    int r = read_properties(reply, visit_session, q->info);
    if (r < 0) return own_failed(q, NULL, r);
    return question_done(q, 1);
}

static int ask_own_properties(sd_bus *bus, struct session_question *q, const char *path) {
    snprintf(q->info->path, sizeof q->info->path, "%s", path);
    return p_sd_bus_call_method_async(bus, NULL, LOGIN1, path, "org.freedesktop.DBus.Properties", "GetAll",
                                      own_properties, q, "s", SESSION);
}

static int own_user_display(sd_bus_message *reply, void *userdata, sd_bus_error *e) {
    (void)e;
    struct session_question *q = userdata;
    const char *id = NULL, *path = NULL;
    if (p_sd_bus_message_is_method_error(reply, NULL)) return own_failed(q, reply, -ENXIO);
    int r = p_sd_bus_message_enter_container(reply, 'v', "(so)");
    if (r >= 0) r = p_sd_bus_message_read(reply, "(so)", &id, &path);
    if (r >= 0 && (!id || !*id)) {
        snprintf(q->error, q->error_size, "the process is in no session, and its user has no display session");
        r = -ENXIO;
    }
    if (r >= 0) {
        q->info->users_display = 1;
        r = ask_own_properties(p_sd_bus_message_get_bus(reply), q, path);
    }
    return r < 0 ? own_failed(q, NULL, r) : 0;
}

static int own_user(sd_bus_message *reply, void *userdata, sd_bus_error *e) {
    (void)e;
    struct session_question *q = userdata;
    char path[256];
    if (p_sd_bus_message_is_method_error(reply, NULL)) return own_failed(q, reply, -ENXIO);
    int r = read_object_path(reply, path, sizeof path);
    if (r >= 0)
        r = p_sd_bus_call_method_async(p_sd_bus_message_get_bus(reply), NULL, LOGIN1, path, "org.freedesktop.DBus.Properties",
                                       "Get", own_user_display, q, "ss", LOGIN1 ".User", "Display");
    return r < 0 ? own_failed(q, NULL, r) : 0;
}

static int own_session_by_pid(sd_bus_message *reply, void *userdata, sd_bus_error *e) {
    (void)e;
    struct session_question *q = userdata;
    sd_bus *bus = p_sd_bus_message_get_bus(reply);
    char path[256];
    int r;
    if (p_sd_bus_message_is_method_error(reply, NULL)) {
        const sd_bus_error *error = p_sd_bus_message_get_error(reply);
        if (!error || !error->name || strcmp(error->name, NO_SESSION_FOR_PID) != 0) return own_failed(q, reply, -ENXIO);
        /* A systemd user unit: the user's display session. */
        r = p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "GetUser", own_user, q, "u", q->uid);
    } else {
        r = read_object_path(reply, path, sizeof path);
        if (r >= 0) r = ask_own_properties(bus, q, path);
    }
    return r < 0 ? own_failed(q, NULL, r) : 0;
}

int xil_logind_session_of_pid_async(sd_bus *bus, uint32_t pid, uint32_t uid, xil_session_answer answer, void *userdata) {
    struct session_question *q = guard_question(answer, userdata, uid);
    if (!q) return -ENOMEM;
    int r = p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "GetSessionByPID", own_session_by_pid, q, "u", pid);
    if (r < 0) free(q);
    return r < 0 ? r : 0;
}

int xil_logind_session_at_async(sd_bus *bus, const char *path, xil_session_answer answer, void *userdata) {
    struct session_question *q = guard_question(answer, userdata, 0);
    if (!q) return -ENOMEM;
    int r = ask_own_properties(bus, q, path);
    if (r < 0) free(q);
    return r < 0 ? r : 0;
}

/* ListSessions' answer: the sessions' object paths. */
struct list_question {
    xil_paths_answer answer;
    void *userdata;
};

static int sessions_listed(sd_bus_message *reply, void *userdata, sd_bus_error *e) {
    (void)e;
    struct list_question *q = userdata;
    const char **paths = NULL;
    int count = 0, room = 0;
    int r = p_sd_bus_message_is_method_error(reply, NULL) ? xil_answer_errno(reply) : 0;
    if (r >= 0) r = p_sd_bus_message_enter_container(reply, 'a', "(susso)");
    while (r >= 0) {
        const char *id = NULL, *user = NULL, *seat = NULL, *path = NULL;
        uint32_t uid = 0;
        r = p_sd_bus_message_read(reply, "(susso)", &id, &uid, &user, &seat, &path);
        if (r <= 0) break;
        if (count == room) {
            room = room ? room * 2 : 64;
            const char **more = realloc(paths, (size_t)room * sizeof *paths);
            if (!more) { r = -ENOMEM; break; }
            paths = more;
        }
        paths[count++] = path;  /* the reply's own strings: valid until the reply goes */
    }
    q->answer(q->userdata, r < 0 ? r : 0, r < 0 ? NULL : paths, r < 0 ? 0 : count);
    free(paths);
    free(q);
    return 0;
}

int xil_logind_list_sessions_async(sd_bus *bus, xil_paths_answer answer, void *userdata) {
    struct list_question *q = calloc(1, sizeof *q);
    if (!q) return -ENOMEM;
    q->answer = answer;
    q->userdata = userdata;
    int r = p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "ListSessions", sessions_listed, q, "");
    if (r < 0) free(q);
    return r < 0 ? r : 0;
}

/* A call whose answer says only whether it worked (TerminateSession, SetLockedHint). */
struct call_question {
    xil_call_answer answer;
    void *userdata;
};

static int call_answered(sd_bus_message *reply, void *userdata, sd_bus_error *e) {
    (void)e;
    struct call_question *q = userdata;
    char why[256] = "";
    int r = 0;
    if (p_sd_bus_message_is_method_error(reply, NULL)) {
        copy_error(p_sd_bus_message_get_error(reply), why, sizeof why);
        r = xil_answer_errno(reply);
    }
    q->answer(q->userdata, r, r < 0 ? why : NULL);
    free(q);
    return 0;
}

static struct call_question *call_question(xil_call_answer answer, void *userdata) {
    struct call_question *q = calloc(1, sizeof *q);
    if (q) {
        q->answer = answer;
        q->userdata = userdata;
    }
    return q;
}

int xil_logind_terminate_session_async(sd_bus *bus, const char *id, xil_call_answer answer, void *userdata) {
    struct call_question *q = call_question(answer, userdata);
    if (!q) return -ENOMEM;
    int r = p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "TerminateSession", call_answered, q, "s", id);
    if (r < 0) free(q);
    return r < 0 ? r : 0;
}

int xil_logind_clear_locked_hint_async(sd_bus *bus, const char *path, xil_call_answer answer, void *userdata) {
    struct call_question *q = call_question(answer, userdata);
    if (!q) return -ENOMEM;
    int r = p_sd_bus_call_method_async(bus, NULL, LOGIN1, path, SESSION, "SetLockedHint", call_answered, q, "b", 0);
    if (r < 0) free(q);
    return r < 0 ? r : 0;
}

static uint64_t monotonic_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

int xil_logind_own_session(uint32_t pid, uint32_t uid, uint64_t timeout_usec, struct xil_session_info *info,
                           char *error_text, size_t error_size) {
    memset(info, 0, sizeof *info);
    if (error_text && error_size) *error_text = 0;
    sd_bus *bus = NULL;
    int r = p_sd_bus_open_system(&bus);
    if (r < 0) {
        snprintf(error_text, error_size, "no system bus (%s)", strerror(-r));
        return r;
    }
    struct session_question q = {.info = info, .uid = uid, .error = error_text, .error_size = error_size};
    r = p_sd_bus_call_method_async(bus, NULL, LOGIN1, MANAGER_PATH, MANAGER, "GetSessionByPID", own_session_by_pid, &q, "u", pid);
    uint64_t deadline = monotonic_usec() + timeout_usec;
    while (r >= 0 && q.done == 0) {
        r = p_sd_bus_process(bus, NULL);
        if (r != 0) continue;
        uint64_t now = monotonic_usec();
        if (now >= deadline) {
            snprintf(error_text, error_size, "logind did not answer within %llu ms", (unsigned long long)(timeout_usec / 1000));
            r = -ETIMEDOUT;
            break;
        }
        struct pollfd p = {.fd = p_sd_bus_get_fd(bus), .events = (short)xil_bus_events(bus)};
        uint64_t wake = deadline, bus_wake = xil_bus_timeout(bus);
        if (bus_wake < wake) wake = bus_wake;
        poll(&p, 1, wake > now ? (int)((wake - now + 999) / 1000) : 0);
    }
    if (r < 0 && error_text && !*error_text) snprintf(error_text, error_size, "%s", strerror(-r));
    /* Closed without a flush: a bus that reads nothing must not hold the agent here. */
    p_sd_bus_close_unref(bus);
    return r < 0 ? r : (q.done < 0 ? q.done : 0);
}

