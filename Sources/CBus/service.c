#define _GNU_SOURCE
#include "cservice.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdbus.h"

/* The table's limits are declared in cservice.h, where the Swift side reads them. */
#define PATHS_MAX XIL_SERVICE_PATHS_MAX
#define NAMES_MAX XIL_SERVICE_NAMES_MAX
#define METHODS_MAX XIL_SERVICE_METHODS_MAX
#define SIGNALS_MAX XIL_SERVICE_SIGNALS_MAX
#define ARGS_MAX XIL_SERVICE_ARGS_MAX
/* Per service: the callers whose pid it knows or asks, and the calls waiting for it
 * (as many as the agent lets one client hold: a browser that opens its tabs at
 * once is never refused for asking early). */
#define CALLERS_MAX 512
#define CALLER_WAITING_MAX 32

struct method {
    char *name, *in, *out;
    int needs_caller;
};

/* A client of the service, by its unique name. Its pid is asked of the bus once,
 * without waiting (a round trip inside a handler would let a flood pile up in
 * sd-bus's queue): calls that come before the answer wait for it. This is no hold
 * bookkeeping: which holds it has, and whether it may have more, the agent's core
 * decides. */
struct caller {
    char *name;
    uint32_t pid;
    int pid_known;
    sd_bus_slot *lookup;
    sd_bus_message *waiting[CALLER_WAITING_MAX];
    int waiting_method[CALLER_WAITING_MAX];
    int waiting_count;
    struct xil_service *service;
    struct caller *next;
};

/* Which name of which service an answer is for. */
struct name_asked {
    struct xil_service *service;
    int name;
    int owned;   /* the bus said it is ours (its answer, or NameAcquired) */
};

struct xil_service {
    char *interface;
    char *names[NAMES_MAX];
    int name_count;
    char *paths[PATHS_MAX];
    int path_count;
    struct method methods[METHODS_MAX];
    int method_count;
    struct { char *name, *signature; } signals[SIGNALS_MAX];
    int signal_count;
    sd_bus_vtable *vtable;
    struct name_asked asked[NAMES_MAX];
    const struct xil_service_callbacks *cb;
    sd_bus *bus;
    struct caller *callers;
    int caller_count;
};

struct xil_call {
    sd_bus_message *m;
    const struct method *method;
    const char *sender;
    uint32_t pid;
    struct {
        const char *text;
        uint32_t number;
    } args[ARGS_MAX];
    int answered;
};

struct xil_service *xil_service_new(const char *interface, const struct xil_service_callbacks *callbacks) {
    struct xil_service *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->interface = strdup(interface);
    s->cb = callbacks;
    if (!s->interface) {
        free(s);
        return NULL;
    }
    return s;
}

int xil_service_add_name(struct xil_service *s, const char *name) {
    if (s->vtable || s->name_count >= NAMES_MAX) return -E2BIG;
    if (!(s->names[s->name_count] = strdup(name))) return -ENOMEM;
    return s->name_count++;
}

int xil_service_add_path(struct xil_service *s, const char *path) {
    if (s->vtable || s->path_count >= PATHS_MAX) return -E2BIG;
    if (!(s->paths[s->path_count] = strdup(path))) return -ENOMEM;
    return s->path_count++;
}

static int basic_types(const char *signature, size_t max) {
    return strlen(signature) <= max && strspn(signature, XIL_SERVICE_BASIC_TYPES) == strlen(signature);
}

int xil_service_add_method(struct xil_service *s, const char *name, const char *in, const char *out, int needs_caller) {
    if (s->vtable || s->method_count >= METHODS_MAX) return -E2BIG;
    if (!basic_types(in, ARGS_MAX) || !basic_types(out, XIL_SERVICE_VALUES_MAX)) return -EINVAL;
    struct method *m = &s->methods[s->method_count];
    m->name = strdup(name);
    m->in = strdup(in);
    m->out = strdup(out);
    m->needs_caller = needs_caller;
    if (!m->name || !m->in || !m->out) return -ENOMEM;
    return s->method_count++;
}

int xil_service_add_signal(struct xil_service *s, const char *name, const char *signature) {
    if (s->vtable || s->signal_count >= SIGNALS_MAX) return -E2BIG;
    if (!basic_types(signature, XIL_SERVICE_VALUES_MAX)) return -EINVAL;
    if (!(s->signals[s->signal_count].name = strdup(name)) || !(s->signals[s->signal_count].signature = strdup(signature)))
        return -ENOMEM;
    return s->signal_count++;
}

int xil_service_callers(const struct xil_service *s) { return s->caller_count; }

/* MARK: Callers */

static void caller_free(struct xil_service *s, struct caller *c) {
    for (struct caller **p = &s->callers; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            s->caller_count--;
            break;
        }
    }
    if (c->lookup) p_sd_bus_slot_unref(c->lookup);
    for (int i = 0; i < c->waiting_count; i++) p_sd_bus_message_unref(c->waiting[i]);
    free(c->name);
    free(c);
}

/* The caller left the bus: what it held ends. */
static void caller_gone(struct xil_service *s, struct caller *c) {
    char *name = strdup(c->name);
    caller_free(s, c);
    if (name) s->cb->caller_gone(s->cb->context, name);
    free(name);
}

void xil_service_forget(struct xil_service *s) {
    while (s->callers) caller_free(s, s->callers);
    s->bus = NULL;
}

int xil_service_free(struct xil_service *s) {
    if (s->vtable) return -EBUSY;
    for (int i = 0; i < s->name_count; i++) free(s->names[i]);
    for (int i = 0; i < s->path_count; i++) free(s->paths[i]);
    for (int i = 0; i < METHODS_MAX; i++) {
        free(s->methods[i].name);
        free(s->methods[i].in);
        free(s->methods[i].out);
    }
    for (int i = 0; i < SIGNALS_MAX; i++) {
        free(s->signals[i].name);
        free(s->signals[i].signature);
    }
    free(s->interface);
    free(s);
    return 0;
}

static struct caller *caller_find(struct xil_service *s, const char *name) {
    for (struct caller *c = s->callers; c; c = c->next)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

/* MARK: Calls */

static int reply_error(sd_bus_message *m, const char *error, const char *message) {
    return p_sd_bus_reply_method_errorf(m, error, "%s", message);
}

static int dispatch(struct xil_service *s, int k, sd_bus_message *m, const struct caller *c) {
    const struct method *method = &s->methods[k];
    struct xil_call call = {.m = m, .method = method, .sender = p_sd_bus_message_get_sender(m)};
    if (!call.sender) call.sender = "?";
    if (c && c->pid_known) call.pid = c->pid;
    for (int i = 0; method->in[i]; i++) {
        char type = method->in[i];
        int r;
        if (type == 's' || type == 'o') {
            r = p_sd_bus_message_read_basic(m, type, &call.args[i].text);
        } else {
            /* u, i and b are all 32 bits on the wire. */
            r = p_sd_bus_message_read_basic(m, type, &call.args[i].number);
        }
        if (r <= 0) {
            char why[96];
            snprintf(why, sizeof why, "%s takes (%s)", method->name, method->in);
            return reply_error(m, "org.freedesktop.DBus.Error.InvalidArgs", why);
        }
    }
    s->cb->call(s->cb->context, k, &call);
    if (!call.answered) return reply_error(m, "org.freedesktop.DBus.Error.Failed", "not answered");
    return 1;
}

/* The bus told the caller's pid (or that it is gone already): the calls waiting go on. */
static int pid_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    struct caller *c = userdata;
    struct xil_service *s = c->service;
    c->lookup = p_sd_bus_slot_unref(c->lookup);
    if (p_sd_bus_message_is_method_error(reply, "org.freedesktop.DBus.Error.NameHasNoOwner")) {
        /* Gone before it was asked: its departure may have come before it was a caller. */
        caller_gone(s, c);
        return 0;
    }
    uint32_t pid = 0;
    if (!p_sd_bus_message_is_method_error(reply, NULL)) p_sd_bus_message_read(reply, "u", &pid);
    c->pid = pid;
    c->pid_known = 1;
    int count = c->waiting_count;
    c->waiting_count = 0;
    for (int i = 0; i < count; i++) {
        sd_bus_message *m = c->waiting[i];
        c->waiting[i] = NULL;
        dispatch(s, c->waiting_method[i], m, c);
        p_sd_bus_message_unref(m);
    }
    return 0;
}

static struct caller *caller_for(struct xil_service *s, sd_bus_message *m) {
    const char *sender = p_sd_bus_message_get_sender(m);
    if (!sender) return NULL;
    struct caller *c = caller_find(s, sender);
    if (c || s->caller_count >= CALLERS_MAX) return c;
    c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->name = strdup(sender);
    c->service = s;
    /* The watch on departures was asked for when the service began, so before this: an
     * answer with a pid proves that this caller's departure will be seen. */
    if (!c->name || p_sd_bus_call_method_async(p_sd_bus_message_get_bus(m), &c->lookup, "org.freedesktop.DBus",
                                               "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixProcessID",
                                               pid_answered, c, "s", sender) < 0) {
        free(c->name);
        free(c);
        return NULL;
    }
    c->next = s->callers;
    s->callers = c;
    s->caller_count++;
    return c;
}

static int method_called(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct xil_service *s = userdata;
    const char *member = p_sd_bus_message_get_member(m);
    int k = 0;
    while (k < s->method_count && (!member || strcmp(s->methods[k].name, member) != 0)) k++;
    if (k == s->method_count) return reply_error(m, "org.freedesktop.DBus.Error.UnknownMethod", "no such method");
    const char *sender = p_sd_bus_message_get_sender(m);
    if (!s->methods[k].needs_caller) return dispatch(s, k, m, sender ? caller_find(s, sender) : NULL);
    struct caller *c = caller_for(s, m);
    if (!c) return reply_error(m, "org.freedesktop.DBus.Error.LimitsExceeded", "too many clients");
    if (c->pid_known) return dispatch(s, k, m, c);
    if (c->waiting_count >= CALLER_WAITING_MAX)
        return reply_error(m, "org.freedesktop.DBus.Error.LimitsExceeded", "too many calls waiting");
    /* Answered once the pid is known. */
    c->waiting_method[c->waiting_count] = k;
    c->waiting[c->waiting_count++] = p_sd_bus_message_ref(m);
    return 1;
}

const char *xil_call_sender(const struct xil_call *call) { return call->sender; }
uint32_t xil_call_pid(const struct xil_call *call) { return call->pid; }

const char *xil_call_string(const struct xil_call *call, int i) {
    if (i < 0 || i >= ARGS_MAX || !call->args[i].text) return "";
    return call->args[i].text;
}

uint32_t xil_call_uint(const struct xil_call *call, int i) {
    if (i < 0 || i >= ARGS_MAX) return 0;
    return call->args[i].number;
}

int xil_call_return(struct xil_call *call, uint32_t value) {
    if (call->answered) return -EALREADY;
    call->answered = 1;
    const char *out = call->method->out;
    if (!*out) return p_sd_bus_reply_method_return(call->m, "");
    if (*out == 's' || *out == 'o') return reply_error(call->m, "org.freedesktop.DBus.Error.Failed", "no value");
    return p_sd_bus_reply_method_return(call->m, out, value);
}

int xil_call_return_string(struct xil_call *call, const char *value) {
    if (call->answered) return -EALREADY;
    call->answered = 1;
    const char *out = call->method->out;
    if (*out != 's' && *out != 'o') return reply_error(call->m, "org.freedesktop.DBus.Error.Failed", "no value");
    return p_sd_bus_reply_method_return(call->m, out, value);
}

/* A call answered later: the message kept (and the method's return type), the call
 * itself counted as answered. */
struct xil_deferred {
    sd_bus_message *m;
    char out[XIL_SERVICE_VALUES_MAX + 1];
};

struct xil_deferred *xil_call_defer(struct xil_call *call) {
    if (call->answered) return NULL;
    struct xil_deferred *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    call->answered = 1;
    d->m = p_sd_bus_message_ref(call->m);
    snprintf(d->out, sizeof d->out, "%s", call->method->out);
    return d;
}

int xil_deferred_return(struct xil_deferred *d, uint32_t value) {
    int r = !*d->out ? p_sd_bus_reply_method_return(d->m, "")
            : (*d->out == 's' || *d->out == 'o') ? reply_error(d->m, "org.freedesktop.DBus.Error.Failed", "no value")
            : p_sd_bus_reply_method_return(d->m, d->out, value);
    p_sd_bus_message_unref(d->m);
    free(d);
    return r;
}

int xil_deferred_fail(struct xil_deferred *d, const char *error, const char *message) {
    int r = reply_error(d->m, error, message);
    p_sd_bus_message_unref(d->m);
    free(d);
    return r;
}

int xil_call_fail(struct xil_call *call, const char *error, const char *message) {
    if (call->answered) return -EALREADY;
    call->answered = 1;
    return reply_error(call->m, error, message);
}

/* MARK: Serving */

/* Departures from the bus, one watch for every caller. sd_bus_track would add a match
 * per caller and ask the bus, waiting, whether the name still exists: under a flood of
 * short-lived clients each wait let sd-bus queue everything that came meanwhile, and
 * the agent's memory grew with the queue. */
static int owner_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error);
static void served(struct name_asked *asked, int result, uint32_t pid);

static int name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct xil_service *s = userdata;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (p_sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || !name || !new_owner) return 0;
    if (!*new_owner) {
        struct caller *c = caller_find(s, name);
        if (c) caller_gone(s, c);
        return 0;
    }
    /* A name of ours passed from one other program to the next in the queue (the
     * owner's session ended, a third session's agent was queued ahead of this one):
     * its new owner is said as at our request, so that its pass-ons are taken and the
     * old owner's pid, which may be reused, no longer is. */
    const char *own = NULL;
    if (!s->bus || p_sd_bus_get_unique_name(s->bus, &own) < 0 || (own && strcmp(own, new_owner) == 0)) return 0;
    for (int i = 0; i < s->name_count; i++) {
        if (strcmp(s->names[i], name) != 0 || s->asked[i].owned) continue;
        if (p_sd_bus_call_method_async(s->bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                       "GetConnectionUnixProcessID", owner_answered, &s->asked[i], "s", new_owner) < 0)
            served(&s->asked[i], 0, 0);
    }
    return 0;
}


static void served(struct name_asked *asked, int result, uint32_t pid) {
    struct xil_service *s = asked->service;
    /* Said once: the bus answers the request and also sends NameAcquired. */
    if (result == 1 && asked->owned) return;
    asked->owned = result == 1;
    s->cb->served(s->cb->context, s->names[asked->name], result, pid);
}

/* The name came to us from the queue: its owner left (another session's agent that
 * ended, the desktop's own service that quit). Only the bus itself sends NameAcquired
 * (the daemon stamps every other sender's unique name). */
static int name_acquired(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    struct xil_service *s = userdata;
    const char *sender = p_sd_bus_message_get_sender(m), *name = NULL;
    if (!sender || strcmp(sender, "org.freedesktop.DBus") != 0) return 0;
    if (p_sd_bus_message_read(m, "s", &name) < 0 || !name) return 0;
    for (int i = 0; i < s->name_count; i++)
        if (strcmp(s->names[i], name) == 0) served(&s->asked[i], 1, 0);
    return 0;
}

static int owner_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    if (!xil_answered_on_open_bus(reply)) return 0;
    uint32_t pid = 0;
    if (!p_sd_bus_message_is_method_error(reply, NULL)) p_sd_bus_message_read(reply, "u", &pid);
    served(userdata, 0, pid);
    return 0;
}

static int name_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    struct name_asked *asked = userdata;
    if (!xil_answered_on_open_bus(reply)) return 0;
    if (p_sd_bus_message_is_method_error(reply, NULL)) {
        served(asked, xil_answer_errno(reply), 0);
        return 0;
    }
    uint32_t result = 0;
    int r = p_sd_bus_message_read(reply, "u", &result);
    if (r < 0) {
        served(asked, r, 0);
    } else if (result == 1 || result == 4) {   /* the primary owner now, or already */
        served(asked, 1, 0);
    } else {
        /* Another program owns it: who, asked without waiting too. */
        r = p_sd_bus_call_method_async(p_sd_bus_message_get_bus(reply), NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                       "org.freedesktop.DBus", "GetConnectionUnixProcessID", owner_answered, asked, "s",
                                       asked->service->names[asked->name]);
        if (r < 0) served(asked, 0, 0);
    }
    return 0;
}

/* SD_BUS_VTABLE_START would name libsystemd's sd_bus_object_vtable_format at link
 * time; it comes from dlsym (xil_vtable_format). */
static int build_vtable(struct xil_service *s) {
    sd_bus_vtable *v = calloc((size_t)(s->method_count + s->signal_count + 2), sizeof *v);
    if (!v) return -ENOMEM;
    int n = 0;
    v[n++] = (sd_bus_vtable){.type = _SD_BUS_VTABLE_START, .flags = 0,
                             .x = {.start = {.element_size = sizeof(sd_bus_vtable), .features = _SD_BUS_VTABLE_PARAM_NAMES,
                                             .vtable_format_reference = xil_vtable_format}}};
    for (int i = 0; i < s->method_count; i++)
        v[n++] = (sd_bus_vtable)SD_BUS_METHOD(s->methods[i].name, s->methods[i].in, s->methods[i].out, method_called,
                                              SD_BUS_VTABLE_UNPRIVILEGED);
    for (int i = 0; i < s->signal_count; i++)
        v[n++] = (sd_bus_vtable)SD_BUS_SIGNAL(s->signals[i].name, s->signals[i].signature, 0);
    v[n++] = (sd_bus_vtable)SD_BUS_VTABLE_END;
    s->vtable = v;
    return 0;
}

int xil_service_serve(struct xil_service *s, sd_bus *bus) {
    if (!s->vtable) {
        int r = build_vtable(s);
        if (r < 0) return r;
    }
    /* Floating: the objects and the watch last as long as the connection. */
    for (int i = 0; i < s->path_count; i++) {
        int r = p_sd_bus_add_object_vtable(bus, NULL, s->paths[i], s->interface, s->vtable, s);
        if (r < 0) return r;
    }
    /* Before any caller is asked for its pid (see caller_for). */
    int r = p_sd_bus_match_signal_async(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                        "NameOwnerChanged", name_owner_changed, NULL, s);
    if (r < 0) return r;
    s->bus = bus;
    r = p_sd_bus_match_signal_async(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                    "NameAcquired", name_acquired, NULL, s);
    if (r < 0) return r;
    /* Queued, never taken: another owner is said, and the name is ours once it leaves
     * (one user's sessions share one session bus: the agent of the session that stays
     * takes over from the one that ended). */
    for (int i = 0; i < s->name_count; i++) {
        s->asked[i] = (struct name_asked){s, i, 0};
        r = p_sd_bus_request_name_async(bus, NULL, s->names[i], SD_BUS_NAME_QUEUE, name_answered, &s->asked[i]);
        if (r < 0) return r;
    }
    return 0;
}

int xil_service_emit(struct xil_service *s, int signal, uint32_t value) {
    if (!s->bus || signal < 0 || signal >= s->signal_count) return -EINVAL;
    int result = 0;
    for (int i = 0; i < s->path_count; i++) {
        const char *sig = s->signals[signal].signature;
        int r = *sig ? p_sd_bus_emit_signal(s->bus, s->paths[i], s->interface, s->signals[signal].name, sig, value)
                     : p_sd_bus_emit_signal(s->bus, s->paths[i], s->interface, s->signals[signal].name, NULL);
        if (r < 0) result = r;
    }
    return result;
}
