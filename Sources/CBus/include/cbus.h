#ifndef XIDLELOCK_CBUS_H
#define XIDLELOCK_CBUS_H
/* D-Bus through sd-bus (libsystemd), loaded at run time with dlopen: the binary
 * does not link libsystemd, so `xidlelock idle` never maps it and the agent runs
 * (without the desktop's buses) where it is missing. All message parsing is
 * here; the Swift side gets plain values through callbacks. */
#include <stddef.h>
#include <stdint.h>

#include "cjournal.h"
#include "cservice.h"

typedef struct sd_bus sd_bus;

/* What the system bus tells the agent (the session bus's services are served
 * through cservice.h). Every callback gets `context`. */
struct xil_desktop_callbacks {
    void *context;
    /* logind: only what came from the current owner of org.freedesktop.login1. */
    void (*prepare_for_sleep)(void *context, int starting);
    void (*session_lock)(void *context, int lock);             /* Lock = 1, Unlock = 0 */
    void (*session_active)(void *context, int active);
    /* The idle inhibitors in block mode, one call each, then listed (0 or -errno). */
    void (*idle_inhibitor)(void *context, const char *who, const char *why, uint32_t uid, uint32_t pid);
    void (*idle_inhibitors_listed)(void *context, int error);
    /* A signal that claimed to be logind's (or UPower's) came from another connection: dropped. */
    void (*forged)(void *context, const char *sender, const char *what);
    /* UPower's OnBattery (0 with no UPower), from UPower's own connection. */
    void (*on_battery)(void *context, int on_battery);
    /* Answers to questions asked at connection without waiting. session_found: logind's session object path, or NULL and why. session_watched:
     * the session's signals are matched (0 or -errno). sleep_delay_taken: the delay
     * inhibitor's fd (close-on-exec, now the agent's), or -errno. delay_limit:
     * InhibitDelayMaxUSec (5 s if it cannot be read). */
    void (*session_found)(void *context, const char *path, const char *why_not);
    void (*session_watched)(void *context, int error);
    void (*sleep_delay_taken)(void *context, int fd);
    void (*delay_limit)(void *context, uint64_t usec);
    /* org.freedesktop.login1 has an owner (logind started, or restarted: its state is
     * new), or none; first told once the bus answers who owns it. */
    void (*logind_owner)(void *context, int owned);
    void (*log)(void *context, int level, const char *message); /* 0 debug .. 3 error */
    /* The guard: logind's sessions came or went, or logind's owner changed; read them
     * all again with xil_logind_list_sessions_async. */
    void (*sessions_changed)(void *context);
    /* The guard: one session (its object path) changed a property the guard reads (not
     * IdleHint and its kin, which agents and logind change all the time); read that
     * session again with xil_logind_session_at_async. */
    void (*session_changed)(void *context, const char *path);
};

/* Loads libsystemd.so.0. 0, or -1 with a reason in `error`. */
int xil_bus_load(char *error, size_t size);

/* Starts connecting to the session (user != 0) or system bus, waiting for nothing:
 * the handshake (authentication, Hello) advances in xil_bus_process, and
 * xil_bus_ready says when it is done. NULL and -errno in *err when it cannot even
 * start (-ENOENT: no socket; -ENOMEDIUM: no address). Method calls time out after
 * 2 s, so that a peer that stops answering holds no answer long. */
sd_bus *xil_bus_connect(int user, int *err);
/* The handshake is done: the bus answered Hello. */
int xil_bus_ready(sd_bus *bus);
/* Connects and waits for the handshake (sd-bus's own bound): for the guard, whose
 * calls are synchronous. */
sd_bus *xil_bus_open(int user, int *err);
/* Closes without flushing: never waits on a bus that reads nothing. */
void xil_bus_close(sd_bus *bus);
int xil_bus_fd(sd_bus *bus);
/* poll events the bus wants now (POLLIN, POLLOUT). */
int xil_bus_events(sd_bus *bus);
/* Absolute CLOCK_MONOTONIC µs by which to call xil_bus_process, UINT64_MAX for none. */
uint64_t xil_bus_timeout(sd_bus *bus);
/* Processes at most `budget` messages: a flood never keeps the loop from its
 * deadlines. 0 when nothing is left, 1 when more may be pending (call again
 * without waiting), -errno when the connection is lost. */
int xil_bus_process(sd_bus *bus, int budget);
/* Messages written by the agent that the bus has not taken yet. */
uint64_t xil_bus_queued_writes(sd_bus *bus);

/* logind, on the system bus; nothing here waits for an answer. The session's
 * object path for XDG_SESSION_ID (or, with id NULL, the user's display session),
 * answered through session_found. 0 or -errno. */
int xil_logind_find_session(sd_bus *bus, const struct xil_desktop_callbacks *callbacks, const char *session_id);
/* Watches PrepareForSleep and the manager's BlockInhibited, taken only from the
 * current owner of org.freedesktop.login1 (followed through NameOwnerChanged).
 * 0 or -errno. */
int xil_logind_watch(sd_bus *bus, const struct xil_desktop_callbacks *callbacks);
/* Watches the session's Lock/Unlock and Active (after xil_logind_watch); answered
 * through session_watched once the matches are in place. 0 or -errno. */
int xil_logind_watch_session(sd_bus *bus, const char *session_path);
/* Reads the session's Active: answered through session_active. 0 or -errno. */
int xil_logind_read_session_active(sd_bus *bus);
/* The unique name that owns org.freedesktop.login1 now ("" for none). */
const char *xil_logind_owner(void);
/* UPower, on the system bus: OnBattery read once its owner is known (answered through on_battery, AC
 * when nobody owns the name) and followed through its PropertiesChanged, taken
 * only from the owner of org.freedesktop.UPower. Never polled. 0 or -errno. */
int xil_upower_watch(sd_bus *bus, const struct xil_desktop_callbacks *callbacks);
/* Reads OnBattery again (bus NULL: the watched one). 0 or -errno. */
int xil_upower_read(sd_bus *bus);
/* The unique name that owns org.freedesktop.UPower now ("" for none). */
const char *xil_upower_owner(void);
/* Asks for a sleep delay inhibitor: answered through sleep_delay_taken. 0 or -errno. */
int xil_logind_take_sleep_delay(sd_bus *bus, const struct xil_desktop_callbacks *callbacks, const char *who, const char *why);
/* Reads InhibitDelayMaxUSec: answered through delay_limit. 0 or -errno. */
int xil_logind_read_delay_max(sd_bus *bus, const struct xil_desktop_callbacks *callbacks);
enum xil_hint { XIL_LOCKED_HINT, XIL_IDLE_HINT };
/* Calls Session.SetLockedHint or SetIdleHint(b) without waiting for the answer. */
int xil_logind_session_hint(sd_bus *bus, const struct xil_desktop_callbacks *callbacks,
                            const char *session_path, enum xil_hint which, int value);
/* Asks for the idle inhibitors without waiting: the answer comes through the
 * callbacks idle_inhibitor and idle_inhibitors_listed. 0 or -errno. */
int xil_logind_list_idle_inhibitors(sd_bus *bus);
/* MARK: The guard (`xidlelock guard`, as root, on the system bus) */
/* One logind session, as ListSessions and the session's properties give it. */
struct xil_session_info {
    char id[64];
    uint32_t uid;
    char user[64];
    char display[64];
    char type[16];           /* x11, wayland, tty, ... */
    char session_class[16];  /* user, greeter, lock-screen, ... */
    char state[16];          /* online, active, closing */
    char seat[64];
    int active;
    int remote;
    int locked_hint;         /* LockedHint: its owner may set it at will, so no evidence */
    uint32_t leader;
    char path[128];          /* its object path */
    int users_display;       /* the process is in no session: this is its user's display session */
};
/* The guard asks logind without waiting: each question is answered once, from the
 * bus's processing, with 0 and the session, or -errno and why (the session is gone,
 * logind does not answer); the functions return 0, or -errno and then never answer. */
typedef void (*xil_session_answer)(void *userdata, int error, const struct xil_session_info *info, const char *why);
typedef void (*xil_paths_answer)(void *userdata, int error, const char *const *paths, int count);
typedef void (*xil_call_answer)(void *userdata, int error, const char *why);
/* The session of a process of `uid`: logind's GetSessionByPID, or for a process in no
 * session (a systemd user unit) the user's display session; then its properties. */
int xil_logind_session_of_pid_async(sd_bus *bus, uint32_t pid, uint32_t uid, xil_session_answer answer, void *userdata);
/* One session's properties, by its object path. */
int xil_logind_session_at_async(sd_bus *bus, const char *path, xil_session_answer answer, void *userdata);
/* Every session's object path (ListSessions). */
int xil_logind_list_sessions_async(sd_bus *bus, xil_paths_answer answer, void *userdata);
/* logind's TerminateSession; the session's SetLockedHint(false), as root (a hint its
 * user set while the screen is not locked), by its object path. */
int xil_logind_terminate_session_async(sd_bus *bus, const char *id, xil_call_answer answer, void *userdata);
int xil_logind_clear_locked_hint_async(sd_bus *bus, const char *path, xil_call_answer answer, void *userdata);
/* Follows logind's sessions: SessionNew, SessionRemoved and a change of logind's
 * owner call sessions_changed, a session's PropertiesChanged session_changed; each
 * taken only from logind's own connection. 0 or -errno. */
int xil_guard_watch_logind(sd_bus *bus, const struct xil_desktop_callbacks *callbacks);
/* The session of the agent's own process, on a system-bus connection of its own that
 * is closed again: every step asynchronous, bounded by `timeout_usec` altogether
 * (a bus that accepts and never answers costs no more). 0 or -errno, why in `error`. */
int xil_logind_own_session(uint32_t pid, uint32_t uid, uint64_t timeout_usec, struct xil_session_info *info,
                           char *error, size_t error_size);
/* `--not-when-playing`: the MPRIS players (mpris.c). */
#include "cmpris.h"
#endif
