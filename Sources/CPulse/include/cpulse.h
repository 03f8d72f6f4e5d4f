#ifndef XIDLELOCK_CPULSE_H
#define XIDLELOCK_CPULSE_H
/* The sound server's streams through libpulse (PulseAudio, or PipeWire through
 * pipewire-pulse), loaded at run time with dlopen: the binary neither links nor
 * needs libpulse, and runs where it is missing. libpulse runs on a main loop of
 * ours over one epoll descriptor, so the agent's single poll loop drives it
 * (no thread). All libpulse parsing is here; Swift gets plain values. */
#include <stddef.h>
#include <stdint.h>

/* One sink input, as the sound server reports it. The strings are valid during
 * the callback only; NULL when the stream does not say. */
struct xil_audio_stream {
    uint32_t index;
    const char *application;   /* application.name */
    const char *binary;        /* application.process.binary */
    const char *role;          /* media.role ("event": a notification sound) */
    uint32_t pid;              /* application.process.id, 0 when unknown */
    int corked;                /* paused */
    int muted;
    int volume_zero;           /* every channel at 0 */
    int sink_muted;            /* its sink is muted or at volume 0 */
};

struct xil_pulse_callbacks {
    void *context;
    /* The connection is ready: `server` names it. */
    void (*connected)(void *context, const char *server);
    /* Connecting failed, or the connection ended: libpulse's reason. The
     * connection is gone when this is called; xil_pulse_connect tries again. */
    void (*disconnected)(void *context, const char *reason);
    /* Every sink input, after any change to the sink inputs or the sinks. */
    void (*streams)(void *context, const struct xil_audio_stream *streams, size_t count);
    void (*log)(void *context, int level, const char *message); /* 0 debug .. 3 error */
};

struct xil_pulse;

/* Loads libpulse.so.0. 0, or -1 with a reason in `error`. */
int xil_pulse_load(char *error, size_t size);

/* The main loop (its epoll descriptor); NULL and -errno in *err. `callbacks`
 * must outlive it. */
struct xil_pulse *xil_pulse_new(const struct xil_pulse_callbacks *callbacks, int *err);
/* Readable when libpulse has a descriptor ready. */
int xil_pulse_fd(const struct xil_pulse *pulse);
/* Absolute CLOCK_MONOTONIC µs by which to call xil_pulse_dispatch (0: at
 * once, a deferred call is pending), UINT64_MAX for none. */
uint64_t xil_pulse_timeout(const struct xil_pulse *pulse);
/* Runs what is ready or due; reports through the callbacks. */
void xil_pulse_dispatch(struct xil_pulse *pulse);

/* Connects to the default server (PULSE_SERVER, the X root window's PULSE_SERVER,
 * client.conf, $XDG_RUNTIME_DIR/pulse/native, as every libpulse client), never
 * starting one. The outcome comes through `connected` or `disconnected`. 0, or
 * -1 when it failed at once (`disconnected` was called). */
int xil_pulse_connect(struct xil_pulse *pulse);
#endif
