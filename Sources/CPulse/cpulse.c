#define _GNU_SOURCE
#include "cpulse.h"
#include "clinux.h"

#include <errno.h>
#include <pulse/pulseaudio.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* MARK: libpulse's functions
 *
 * Declared by libpulse's own header; called through pointers of the same types
 * (nothing here is linked against the library). The event structs are ours: to
 * libpulse they are opaque handles of the main loop it is given. */

#define XIL_PULSE_FUNCTIONS(X) \
    X(pa_context_new) X(pa_context_unref) X(pa_context_set_state_callback) X(pa_context_get_state) \
    X(pa_context_errno) X(pa_context_connect) X(pa_context_disconnect) X(pa_context_get_server) \
    X(pa_context_set_subscribe_callback) X(pa_context_subscribe) X(pa_context_get_sink_info_list) \
    X(pa_context_get_sink_input_info_list) X(pa_operation_unref) X(pa_proplist_gets) X(pa_strerror)

XIL_PULSE_FUNCTIONS(XIL_DLSYM_POINTER)

int xil_pulse_load(char *error, size_t size) {
    static int loaded;
    if (loaded) return 0;
    if (XIL_LOAD_LIST("libpulse.so.0", XIL_PULSE_FUNCTIONS, NULL, error, size) != 0) return -1;
    loaded = 1;
    return 0;
}

/* MARK: The main loop
 *
 * libpulse's io events are in one epoll set, whose descriptor the agent polls.
 * Time events and deferred calls are not descriptors: the agent asks for the
 * next deadline before every wait (0 while a deferred call is enabled), as it
 * does of sd-bus, so they cost neither a descriptor nor a system call. */

struct pa_io_event {
    struct xil_pulse *loop;
    int fd;
    pa_io_event_flags_t events;
    int in_epoll;
    int dead;
    pa_io_event_cb_t callback;
    void *userdata;
    pa_io_event_destroy_cb_t destroy;
    struct pa_io_event *next;
};

struct pa_time_event {
    struct xil_pulse *loop;
    int enabled;
    uint64_t due;          /* CLOCK_MONOTONIC µs */
    struct timeval asked;  /* as libpulse gave it, handed back to its callback */
    int dead;
    pa_time_event_cb_t callback;
    void *userdata;
    pa_time_event_destroy_cb_t destroy;
    struct pa_time_event *next;
};

struct pa_defer_event {
    struct xil_pulse *loop;
    int enabled;
    int dead;
    pa_defer_event_cb_t callback;
    void *userdata;
    pa_defer_event_destroy_cb_t destroy;
    struct pa_defer_event *next;
};

/* A sink input's strings, copied out of libpulse's reply. */
struct stream_copy {
    struct xil_audio_stream stream;
    uint32_t sink;
};

struct sink_state {
    uint32_t index;
    int silent;
};

struct xil_pulse {
    pa_mainloop_api api;
    int epoll;
    const struct xil_pulse_callbacks *cb;
    pa_io_event *ios;
    pa_time_event *times;
    pa_defer_event *defers;
    int enabled_defers;
    /* Events are freed only outside dispatching, so a callback may free any event
     * (its own, or one whose readiness epoll reported in the same batch). */
    int dispatching;
    int has_dead;

    pa_context *context;
    int ready;
    int closing; /* failed or terminated: closed once libpulse's call stack is left */
    int refreshing;
    int refresh_again;
    struct sink_state *sinks;
    size_t n_sinks, cap_sinks;
    struct stream_copy *streams;
    size_t n_streams, cap_streams;
};

static void say(struct xil_pulse *x, int level, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void say(struct xil_pulse *x, int level, const char *format, ...) {
    if (!x->cb || !x->cb->log) return;
    char text[512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    x->cb->log(x->cb->context, level, text);
}

static uint64_t now_usec(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

/* libpulse gives a foreign main loop wall-clock times (only its own loop gets
 * monotonic ones, marked by this bit in tv_usec): kept on the monotonic clock,
 * so that a change of the wall clock moves no deadline. */
#define XIL_TIMEVAL_RTCLOCK (1LL << 30)

static uint64_t monotonic_due(const struct timeval *tv) {
    if (tv->tv_usec & XIL_TIMEVAL_RTCLOCK) {
        return (uint64_t)tv->tv_sec * 1000000ULL + (uint64_t)(tv->tv_usec & ~XIL_TIMEVAL_RTCLOCK);
    }
    int64_t asked = (int64_t)tv->tv_sec * 1000000LL + (int64_t)tv->tv_usec;
    int64_t in = asked - (int64_t)now_usec(CLOCK_REALTIME);
    int64_t mono = (int64_t)now_usec(CLOCK_MONOTONIC);
    return in <= -mono ? 0 : (uint64_t)(mono + in);
}

static void cleanup(struct xil_pulse *x) {
    if (x->dispatching || !x->has_dead) return;
    x->has_dead = 0;
    for (pa_io_event **p = &x->ios; *p;) {
        pa_io_event *e = *p;
        if (e->dead) { *p = e->next; free(e); } else p = &e->next;
    }
    for (pa_time_event **p = &x->times; *p;) {
        pa_time_event *e = *p;
        if (e->dead) { *p = e->next; free(e); } else p = &e->next;
    }
    for (pa_defer_event **p = &x->defers; *p;) {
        pa_defer_event *e = *p;
        if (e->dead) { *p = e->next; free(e); } else p = &e->next;
    }
}

static void io_enable(pa_io_event *e, pa_io_event_flags_t events) {
    struct xil_pulse *x = e->loop;
    e->events = events;
    if (events == PA_IO_EVENT_NULL) {
        /* Out of the set: epoll reports a hang-up even for an empty mask, and
         * libpulse asked for nothing. */
        if (e->in_epoll) epoll_ctl(x->epoll, EPOLL_CTL_DEL, e->fd, NULL);
        e->in_epoll = 0;
        return;
    }
    struct epoll_event ev = { .events = 0, .data.ptr = e };
    if (events & PA_IO_EVENT_INPUT) ev.events |= EPOLLIN;
    if (events & PA_IO_EVENT_OUTPUT) ev.events |= EPOLLOUT;
    if (epoll_ctl(x->epoll, e->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, e->fd, &ev) < 0) {
        say(x, 3, "cannot watch the sound server's descriptor %d: %s", e->fd, strerror(errno));
        return;
    }
    e->in_epoll = 1;
}

static pa_io_event *io_new(pa_mainloop_api *a, int fd, pa_io_event_flags_t events, pa_io_event_cb_t cb, void *userdata) {
    struct xil_pulse *x = a->userdata;
    pa_io_event *e = calloc(1, sizeof *e);
    if (!e) abort();
    *e = (pa_io_event){ .loop = x, .fd = fd, .callback = cb, .userdata = userdata, .next = x->ios };
    x->ios = e;
    io_enable(e, events);
    return e;
}

static void io_free(pa_io_event *e) {
    struct xil_pulse *x = e->loop;
    /* Now: libpulse closes the descriptor right after. */
    if (e->in_epoll) epoll_ctl(x->epoll, EPOLL_CTL_DEL, e->fd, NULL);
    e->in_epoll = 0;
    e->dead = 1;
    x->has_dead = 1;
    if (e->destroy) e->destroy(&x->api, e, e->userdata);
    e->destroy = NULL;
    cleanup(x);
}

static void io_set_destroy(pa_io_event *e, pa_io_event_destroy_cb_t cb) { e->destroy = cb; }

static void time_restart(pa_time_event *e, const struct timeval *tv) {
    e->enabled = tv != NULL;
    if (tv) {
        e->asked = *tv;
        e->due = monotonic_due(tv);
    }
}

static pa_time_event *time_new(pa_mainloop_api *a, const struct timeval *tv, pa_time_event_cb_t cb, void *userdata) {
    struct xil_pulse *x = a->userdata;
    pa_time_event *e = calloc(1, sizeof *e);
    if (!e) abort();
    *e = (pa_time_event){ .loop = x, .callback = cb, .userdata = userdata, .next = x->times };
    x->times = e;
    time_restart(e, tv);
    return e;
}

static void time_free(pa_time_event *e) {
    struct xil_pulse *x = e->loop;
    e->dead = 1;
    e->enabled = 0;
    x->has_dead = 1;
    if (e->destroy) e->destroy(&x->api, e, e->userdata);
    e->destroy = NULL;
    cleanup(x);
}

static void time_set_destroy(pa_time_event *e, pa_time_event_destroy_cb_t cb) { e->destroy = cb; }

static void defer_enable(pa_defer_event *e, int b) {
    b = !!b;
    if (e->enabled == b) return;
    e->enabled = b;
    e->loop->enabled_defers += b ? 1 : -1;
}

/* Enabled when made, as in libpulse's own loop. */
static pa_defer_event *defer_new(pa_mainloop_api *a, pa_defer_event_cb_t cb, void *userdata) {
    struct xil_pulse *x = a->userdata;
    pa_defer_event *e = calloc(1, sizeof *e);
    if (!e) abort();
    *e = (pa_defer_event){ .loop = x, .callback = cb, .userdata = userdata, .next = x->defers };
    x->defers = e;
    defer_enable(e, 1);
    return e;
}

static void defer_free(pa_defer_event *e) {
    struct xil_pulse *x = e->loop;
    defer_enable(e, 0);
    e->dead = 1;
    x->has_dead = 1;
    if (e->destroy) e->destroy(&x->api, e, e->userdata);
    e->destroy = NULL;
    cleanup(x);
}

static void defer_set_destroy(pa_defer_event *e, pa_defer_event_destroy_cb_t cb) { e->destroy = cb; }

/* The agent's loop never stops for libpulse. */
static void quit(pa_mainloop_api *a, int retval) { (void)a; (void)retval; }

struct xil_pulse *xil_pulse_new(const struct xil_pulse_callbacks *callbacks, int *err) {
    struct xil_pulse *x = calloc(1, sizeof *x);
    if (!x) { *err = -ENOMEM; return NULL; }
    x->epoll = epoll_create1(EPOLL_CLOEXEC);
    if (x->epoll < 0) {
        *err = -errno;
        free(x);
        return NULL;
    }
    x->cb = callbacks;
    x->api = (pa_mainloop_api){
        .userdata = x,
        .io_new = io_new, .io_enable = io_enable, .io_free = io_free, .io_set_destroy = io_set_destroy,
        .time_new = time_new, .time_restart = time_restart, .time_free = time_free, .time_set_destroy = time_set_destroy,
        .defer_new = defer_new, .defer_enable = defer_enable, .defer_free = defer_free, .defer_set_destroy = defer_set_destroy,
        .quit = quit,
    };
    *err = 0;
    return x;
}

int xil_pulse_fd(const struct xil_pulse *x) { return x->epoll; }

uint64_t xil_pulse_timeout(const struct xil_pulse *x) {
    if (x->enabled_defers > 0) return 0;
    uint64_t earliest = UINT64_MAX;
    for (const pa_time_event *e = x->times; e; e = e->next) {
        if (e->enabled && !e->dead && e->due < earliest) earliest = e->due;
    }
    return earliest;
}

static void settle(struct xil_pulse *x);

void xil_pulse_dispatch(struct xil_pulse *x) {
    x->dispatching++;
    struct epoll_event ready[16];
    int n = epoll_wait(x->epoll, ready, 16, 0);
    for (int k = 0; k < n; k++) {
        pa_io_event *e = ready[k].data.ptr;
        if (e->dead || !e->in_epoll) continue;
        pa_io_event_flags_t flags = 0;
        if (ready[k].events & EPOLLIN) flags |= PA_IO_EVENT_INPUT;
        if (ready[k].events & EPOLLOUT) flags |= PA_IO_EVENT_OUTPUT;
        if (ready[k].events & EPOLLHUP) flags |= PA_IO_EVENT_HANGUP;
        if (ready[k].events & EPOLLERR) flags |= PA_IO_EVENT_ERROR;
        e->callback(&x->api, e, e->fd, flags, e->userdata);
    }
    /* One round: those enabled again (or made) now keep the deadline at 0, and
     * the agent's loop comes straight back. */
    if (x->enabled_defers > 0) {
        for (pa_defer_event *e = x->defers; e; e = e->next) {
            if (e->enabled && !e->dead) e->callback(&x->api, e, e->userdata);
        }
    }
    uint64_t now = now_usec(CLOCK_MONOTONIC);
    for (pa_time_event *e = x->times; e; e = e->next) {
        if (!e->enabled || e->dead || e->due > now) continue;
        /* Fired once; the callback may restart it. */
        e->enabled = 0;
        struct timeval asked = e->asked;
        e->callback(&x->api, e, &asked, e->userdata);
    }
    x->dispatching--;
    cleanup(x);
    settle(x);
}

/* MARK: The connection */

static void clear_lists(struct xil_pulse *x) {
    for (size_t k = 0; k < x->n_streams; k++) {
        free((char *)x->streams[k].stream.application);
        free((char *)x->streams[k].stream.binary);
        free((char *)x->streams[k].stream.role);
    }
    x->n_streams = 0;
    x->n_sinks = 0;
}

static int volume_zero(const pa_cvolume *v) {
    if (v->channels == 0) return 0;
    for (unsigned k = 0; k < v->channels && k < PA_CHANNELS_MAX; k++) {
        if (v->values[k] != 0) return 0;
    }
    return 1;
}

static char *copy(const char *s) { return s ? strdup(s) : NULL; }

static void refresh(struct xil_pulse *x);

static void sink_listed(pa_context *c, const pa_sink_info *i, int eol, void *userdata) {
    (void)c;
    struct xil_pulse *x = userdata;
    if (eol || !i) return;
    if (x->n_sinks == x->cap_sinks) {
        size_t cap = x->cap_sinks ? x->cap_sinks * 2 : 8;
        struct sink_state *grown = realloc(x->sinks, cap * sizeof *grown);
        if (!grown) return;
        x->sinks = grown;
        x->cap_sinks = cap;
    }
    /* A sink turned all the way down is as silent as a muted one. */
    x->sinks[x->n_sinks++] = (struct sink_state){ i->index, i->mute || volume_zero(&i->volume) };
}

/* The sink list was asked for first: the server answers in order, so it is
 * complete when the sink inputs' list ends. */
static void sink_input_listed(pa_context *c, const pa_sink_input_info *i, int eol, void *userdata) {
    (void)c;
    struct xil_pulse *x = userdata;
    if (!eol && i) {
        if (x->n_streams == x->cap_streams) {
            size_t cap = x->cap_streams ? x->cap_streams * 2 : 8;
            struct stream_copy *grown = realloc(x->streams, cap * sizeof *grown);
            if (!grown) return;
            x->streams = grown;
            x->cap_streams = cap;
        }
        const char *pid = p_pa_proplist_gets(i->proplist, "application.process.id");
        unsigned long parsed = 0;
        char *end = NULL;
        if (pid) {
            errno = 0;
            parsed = strtoul(pid, &end, 10);
            if (errno || end == pid || *end || parsed > UINT32_MAX) parsed = 0;
        }
        x->streams[x->n_streams++] = (struct stream_copy){
            .stream = {
                .index = i->index,
                .application = copy(p_pa_proplist_gets(i->proplist, "application.name")),
                .binary = copy(p_pa_proplist_gets(i->proplist, "application.process.binary")),
                .role = copy(p_pa_proplist_gets(i->proplist, "media.role")),
                .pid = (uint32_t)parsed,
                .corked = i->corked != 0,
                .muted = i->mute != 0,
                .volume_zero = i->has_volume && volume_zero(&i->volume),
            },
            .sink = i->sink,
        };
        return;
    }
    if (eol > 0) {
        struct xil_audio_stream *list = calloc(x->n_streams ? x->n_streams : 1, sizeof *list);
        if (list) {
            for (size_t k = 0; k < x->n_streams; k++) {
                list[k] = x->streams[k].stream;
                for (size_t s = 0; s < x->n_sinks; s++) {
                    if (x->sinks[s].index == x->streams[k].sink) list[k].sink_muted = x->sinks[s].silent;
                }
            }
            if (x->cb->streams) x->cb->streams(x->cb->context, list, x->n_streams);
            free(list);
        }
    }
    /* eol < 0: the connection failed, which the state callback reports. */
    clear_lists(x);
    x->refreshing = 0;
    if (x->refresh_again) {
        x->refresh_again = 0;
        refresh(x);
    }
}

/* Reads both lists again; changes while a reading is under way ask for one more
 * after it, not one each. */
static void refresh(struct xil_pulse *x) {
    if (!x->ready || x->closing) return;
    if (x->refreshing) {
        x->refresh_again = 1;
        return;
    }
    pa_operation *sinks = p_pa_context_get_sink_info_list(x->context, sink_listed, x);
    if (!sinks) return;
    p_pa_operation_unref(sinks);
    pa_operation *inputs = p_pa_context_get_sink_input_info_list(x->context, sink_input_listed, x);
    if (!inputs) return;
    p_pa_operation_unref(inputs);
    x->refreshing = 1;
}

static void changed(pa_context *c, pa_subscription_event_type_t type, uint32_t index, void *userdata) {
    (void)c; (void)type; (void)index;
    refresh(userdata);
}

static void subscribed(pa_context *c, int success, void *userdata) {
    struct xil_pulse *x = userdata;
    if (!success) say(x, 2, "the sound server refused to report changes (%s): streams are read at connection only",
                      p_pa_strerror(p_pa_context_errno(c)));
}

static void state_changed(pa_context *c, void *userdata) {
    struct xil_pulse *x = userdata;
    switch (p_pa_context_get_state(c)) {
    case PA_CONTEXT_READY: {
        x->ready = 1;
        p_pa_context_set_subscribe_callback(c, changed, x);
        pa_operation *o = p_pa_context_subscribe(c, PA_SUBSCRIPTION_MASK_SINK | PA_SUBSCRIPTION_MASK_SINK_INPUT, subscribed, x);
        if (o) p_pa_operation_unref(o);
        const char *server = p_pa_context_get_server(c);
        if (x->cb->connected) x->cb->connected(x->cb->context, server ? server : "?");
        refresh(x);
        break;
    }
    case PA_CONTEXT_FAILED:
    case PA_CONTEXT_TERMINATED:
        x->closing = 1;
        break;
    default:
        break;
    }
}

/* A failed context is let go outside libpulse's own calls. */
static void settle(struct xil_pulse *x) {
    if (!x->context || !x->closing) return;
    pa_context *c = x->context;
    char reason[256];
    snprintf(reason, sizeof reason, "%s", p_pa_strerror(p_pa_context_errno(c)));
    x->context = NULL;
    x->ready = 0;
    x->closing = 0;
    x->refreshing = 0;
    x->refresh_again = 0;
    clear_lists(x);
    p_pa_context_set_state_callback(c, NULL, NULL);
    p_pa_context_set_subscribe_callback(c, NULL, NULL);
    p_pa_context_disconnect(c);
    p_pa_context_unref(c);
    cleanup(x);
    if (x->cb->disconnected) x->cb->disconnected(x->cb->context, reason);
}

int xil_pulse_connect(struct xil_pulse *x) {
    if (x->context) return 0;
    x->context = p_pa_context_new(&x->api, "xidlelock");
    if (!x->context) {
        if (x->cb->disconnected) x->cb->disconnected(x->cb->context, "libpulse could not make a context");
        return -1;
    }
    p_pa_context_set_state_callback(x->context, state_changed, x);
    /* NULL: the default server, found as every libpulse client finds it.
     * NOAUTOSPAWN: watching must never start a sound server. */
    if (p_pa_context_connect(x->context, NULL, PA_CONTEXT_NOAUTOSPAWN, NULL) < 0) x->closing = 1;
    int failed = x->closing;
    settle(x);
    return failed ? -1 : 0;
}
