#ifndef XIDLELOCK_CLINUX_H
#define XIDLELOCK_CLINUX_H
#include <stdint.h>
#include <sys/types.h>

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

/* Starts `/bin/sh -c command` in a new session (so the terminal's Ctrl-C and
 * the agent's own exit never reach it), with every signal at its default
 * action and an empty signal mask, stdin from /dev/null, stdout and stderr on
 * the agent's stderr (the log), and no other inherited descriptor.
 * `extra_env` ("KEY=VALUE" strings, n_extra of them) is added to the agent's
 * environment, replacing variables of the same name.
 * Returns 0 and the pid, or an errno value. */
int xil_spawn_shell(const char *command, const char *const *extra_env,
                    int n_extra, pid_t *pid);

/* waitpid(-1, WNOHANG) decoded: returns the pid (0 if none has ended, -1 if
 * there are no children); *exit_status is the exit status or -1, *signal the
 * terminating signal or 0. */
pid_t xil_reap_one(int *exit_status, int *signal);

/* Starts argv[0] (searched in PATH) with argv, in the caller's session and
 * process group (a foreground command of `inhibit -- CMD`), every signal at its
 * default action and an empty mask, inheriting stdio. Returns 0 or an errno. */
int xil_spawn_argv(const char *const *argv, pid_t *pid);

/* The connected peer's pid and uid (SO_PEERCRED). Returns 0 or -1 and errno. */
int xil_peer_credentials(int fd, pid_t *pid, uid_t *uid);

/* Unix stream sockets at a path, non-blocking and close-on-exec. Both return
 * the fd or -1 and errno (ENAMETOOLONG for a path that does not fit). */
int xil_unix_listen(const char *path, int backlog);
int xil_unix_connect(const char *path);
/* pidfd_open(2): an fd that becomes readable when the process ends, for a
 * process that is not our child. Returns the fd or -1 and errno. */
int xil_pidfd_open(pid_t pid);

/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC: the fd, or -1 and errno. */
int xil_accept(int listener);

#endif
