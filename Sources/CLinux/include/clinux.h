#ifndef XIDLELOCK_CLINUX_H
#define XIDLELOCK_CLINUX_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Loads `library` with dlopen (RTLD_NOW | RTLD_LOCAL) and finds its functions:
 * `names[i]` into `*slots[i]`, for `count` of them; the handle goes to `*handle`
 * (may be NULL). 0, or -1 with the reason in `error` (the library missing, or one
 * of the functions: a version too old). Every library the binary does not link
 * (libX11, libXss, libXi, libXrandr, libsystemd, libpulse) is loaded this way, so
 * that the binary runs where the optional ones are missing and `xidlelock idle`
 * starts without any of them. */
int xil_load_library(const char *library, const char *const *names, void **const *slots, int count,
                     void **handle, char *error, size_t size);

/* One optional library's functions, each named once in a list macro
 * (`#define LIST(X) X(f) X(g)`), as systemd's DLSYM_PROTOTYPE and DLSYM_ARG:
 * XIL_DLSYM_POINTER(f) declares `p_f` with the type of `f` in the library's own
 * header (`__typeof__`), so the compiler checks every call made through it, and
 * XIL_LOAD_LIST fills them all with xil_load_library (its result). */
#define XIL_DLSYM_POINTER(name) static __typeof__(name) *p_##name;
#define XIL_DLSYM_NAME(name) #name,
#define XIL_DLSYM_SLOT(name) (void **)&p_##name,
#define XIL_LOAD_LIST(library, LIST, handle, error, size) __extension__({ \
        static const char *const xil_names_[] = {LIST(XIL_DLSYM_NAME)}; \
        static void **const xil_slots_[] = {LIST(XIL_DLSYM_SLOT)}; \
        xil_load_library(library, xil_names_, xil_slots_, (int)(sizeof xil_names_ / sizeof *xil_names_), \
                         handle, error, size); \
    })

/* Both clocks at once, in nanoseconds. CLOCK_BOOTTIME keeps counting while the
 * machine is suspended and CLOCK_MONOTONIC does not: the growth of their
 * difference is the time spent asleep. */
void xil_clocks_now(int64_t *monotonic_ns, int64_t *boottime_ns);

/* A CLOCK_BOOTTIME timerfd (non-blocking, close-on-exec). A boottime timer
 * whose deadline passed during suspend fires right after resume, which a
 * poll() timeout (CLOCK_MONOTONIC) would not. Returns -1 and errno on error. */
int xil_boottime_timer_create(void);
/* Arms the timer at an absolute boottime; a deadline <= 0 disarms it. */
int xil_timer_arm_at(int fd, int64_t boottime_ns);

/* A resume watch: a CLOCK_REALTIME timerfd armed a century ahead with
 * TFD_TIMER_CANCEL_ON_SET. It never fires; the kernel cancels it when the wall
 * clock is set and, since Linux 5.14 (timerfd_resume), at every resume from
 * suspend, which makes it readable. No periodic wake-up is involved.
 * Returns the fd or -1 and errno. */
int xil_resume_watch_create(void);
/* Reads the watch: 1 if it was cancelled (resume or clock change; re-armed),
 * 0 if not, -1 and errno on error. */
int xil_resume_watch_check(int fd);

/* Blocks the given signals (0-terminated list) and returns a signalfd for them. */
int xil_signalfd_for(const int *signals);
/* Reads one signal from a signalfd: returns the signal number, 0 if none is
 * pending, -1 and errno on error. */
int xil_signalfd_read(int fd);

/* One descriptor handed to one child: `from` in the agent becomes `to` in the
 * child (without close-on-exec there). */
struct xil_passed_fd {
    int from;
    int to;
};

/* Everything one child needs; the caller prepares every string (nothing is
 * allocated between fork and exec). */
struct xil_spawn_request {
    const char *path;              /* executable, or a name searched in PATH */
    int search_path;               /* 1: search `path` in the PATH of envp */
    const char *const *argv;       /* NULL-terminated */
    const char *const *envp;       /* NULL-terminated, the whole environment */
    int new_session;               /* 1: setsid(), so a terminal's Ctrl-C and the
                                      agent's own exit never reach it */
    int stdin_null;                /* 1: stdin from /dev/null */
    int stdout_to_stderr;          /* 1: stdout onto the agent's stderr (the log) */
    const struct xil_passed_fd *fds; /* passed to this child alone */
    int n_fds;
    /* The guard (root) starts a locker as the session's user: 1 to take these
     * credentials (groups first, then gid, then uid) and `directory` before exec. */
    int set_user;
    uid_t uid;
    gid_t gid;
    const gid_t *groups;
    int n_groups;
    const char *directory;
};

/* vfork (fork when setting the user) + exec of one request. In the child, before exec: every signal back to
 * its default action, an empty signal mask, the session and standard streams
 * as asked, the passed descriptors at their numbers and every other descriptor
 * above 2 closed. An exec failure comes back through a close-on-exec pipe.
 * Returns 0 and the pid, or an errno value (the child, if any, is reaped). */
int xil_spawn(const struct xil_spawn_request *request, pid_t *pid);

/* waitpid(-1, WNOHANG) decoded: returns the pid (0 if none has ended, -1 if
 * there are no children); *exit_status is the exit status or -1, *signal the
 * terminating signal or 0. */
pid_t xil_reap_one(int *exit_status, int *signal);

/* The connected peer's pid and uid (SO_PEERCRED). Returns 0 or -1 and errno. */
int xil_peer_credentials(int fd, pid_t *pid, uid_t *uid);

/* Unix stream sockets at a path, non-blocking and close-on-exec. Both return
 * the fd or -1 and errno (ENAMETOOLONG for a path that does not fit). */
int xil_unix_listen(const char *path, int backlog);
int xil_unix_connect(const char *path);
/* The same, non-blocking: a listener whose queue is full answers EAGAIN at once
 * instead of holding the caller in connect(2) until it accepts (the agent's loop
 * must never wait on the guard). */
int xil_unix_connect_nonblocking(const char *path);
int xil_unix_connect_flags(const char *path, int flags);
/* pidfd_open(2): an fd that becomes readable when the process ends, for a
 * process that is not our child. Returns the fd or -1 and errno. */
int xil_pidfd_open(pid_t pid);

/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC: the fd, or -1 and errno. */
int xil_accept(int listener);

/* 1 if the signal's disposition is SIG_IGN (inherited from whoever started us). */
int xil_signal_ignored(int signal);

/* prctl(PR_SET_DUMPABLE, 0): the process's user can no longer ptrace it or read or
 * write its memory through /proc (only root can). 0 or -1 and errno. */
int xil_set_undumpable(void);
/* prctl(PR_SET_TIMERSLACK, ns): how late the kernel may wake the process's timers
 * (50 us by default, to group wake-ups); children started by xil_spawn get the slack
 * the process had before. 0 or -1 and errno. */
int xil_set_timer_slack(unsigned long ns);
/* An inotify descriptor (non-blocking, close-on-exec) readable when a file is created
 * in or moved into `directory`; -1 and errno. */
int xil_directory_watch(const char *directory);
/* Reads every event a directory watch holds: 1 if one of them named `name` (or
 * some were lost), else 0. */
int xil_directory_watch_saw(int fd, const char *name);
/* PTRACE_SEIZE, no options (never EXITKILL: a locker outlives whoever traces it).
 * The guard follows each verified agent and its own lockers so, and the agent its
 * locker: a stop signal reaches the tracer at once, with no polling, and no other
 * tracer (the user's debugger) can attach, the kernel allowing one. 0 or -1 and errno
 * (EPERM: another tracer holds it, or this one already does). */
int xil_trace_seize(pid_t pid);
/* What one waitpid(-1, WNOHANG | __WALL) said, for the guard's children and tracees. */
enum xil_wait_kind {
    XIL_WAIT_NONE = 0,       /* nothing (more) to reap now */
    XIL_WAIT_EXITED,         /* value: exit status */
    XIL_WAIT_KILLED,         /* value: signal */
    XIL_WAIT_STOPPED,        /* a group-stop (SIGSTOP, SIGTSTP ...); value: signal; left stopped, listened to */
    XIL_WAIT_CONTINUED,      /* a tracee stopped before runs again (SIGCONT) */
    XIL_WAIT_SIGNAL,         /* a signal on its way to a tracee, which waits for xil_trace_continue; value: signal */
    XIL_WAIT_OTHER,          /* an event of no interest */
};
/* Reaps or handles one event: the pid (0 when none), its kind and value. */
pid_t xil_guard_wait(enum xil_wait_kind *kind, int *value);
/* RLIMIT_NOFILE's soft limit raised to the hard one (systemd leaves services at 1024):
 * the new soft limit, or -1 and errno. */
int xil_raise_descriptor_limit(void);
/* Lets a tracee stopped in XIL_WAIT_SIGNAL go on with `signal` delivered (0: dropped). */
int xil_trace_continue(pid_t pid, int signal);

/* SO_PASSCRED on a listening socket: each connection accepted from it inherits it
 * (accept(2)), so every write that reaches the guard carries its writer's credentials. */
int xil_pass_credentials(int listener);
/* recvmsg(2) of up to `length` bytes with the writer's credentials (SCM_CREDENTIALS):
 * the byte count (0 at the end, -1 and errno); *pid is 0 when the data carried none.
 * The kernel never joins two writers' data in one read of a socket that passes
 * credentials, so the bytes are all that process's. */
long xil_read_with_writer(int fd, void *buffer, unsigned long length, pid_t *pid, uid_t *uid);
/* The pid of the process tracing `pid` (0: none), from /proc/PID/status; -1 if unreadable. */
pid_t xil_tracer_of(pid_t pid);
/* waitpid(pid, WNOHANG) for one child the agent may trace, decoded. A stop is never
 * an end: a stop signal (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU) on its way to a tracee is
 * dropped (PTRACE_CONT with 0: the locker keeps running), and a tracee stopped before
 * the seize is let run; any other signal is passed on unchanged. Returns the kind
 * (XIL_WAIT_NONE: nothing now; call again after any other kind) and in *value the
 * exit status, the signal that killed it, or the signal stopped/passed on. */
enum xil_wait_kind xil_child_wait(pid_t pid, int *value);
#endif
