#define _GNU_SOURCE
#include "clinux.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/timerfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t ns_of(const struct timespec *t) {
    return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

void xil_clocks_now(int64_t *monotonic_ns, int64_t *boottime_ns) {
    struct timespec m, b;
    clock_gettime(CLOCK_MONOTONIC, &m);
    clock_gettime(CLOCK_BOOTTIME, &b);
    *monotonic_ns = ns_of(&m);
    *boottime_ns = ns_of(&b);
}

int xil_boottime_timer_create(void) {
    return timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
}

int xil_timer_arm_at(int fd, int64_t boottime_ns) {
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    if (boottime_ns > 0) {
        spec.it_value.tv_sec = boottime_ns / 1000000000LL;
        spec.it_value.tv_nsec = boottime_ns % 1000000000LL;
    }
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}

int xil_signalfd_for(const int *signals) {
    sigset_t set;
    sigemptyset(&set);
    for (const int *s = signals; *s != 0; s++) sigaddset(&set, *s);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int xil_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof info);
    if (n == (ssize_t)sizeof info) return (int)info.ssi_signo;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n >= 0) errno = EIO;
    return -1;
}

static int has_name(const char *entry, const char *const *extra, int n) {
    const char *eq = strchr(entry, '=');
    size_t len = eq ? (size_t)(eq - entry) : strlen(entry);
    for (int i = 0; i < n; i++) {
        if (strncmp(entry, extra[i], len) == 0 && extra[i][len] == '=') return 1;
    }
    return 0;
}

int xil_spawn_shell(const char *command, const char *const *extra_env,
                    int n_extra, pid_t *pid) {
    size_t count = 0;
    for (char **e = environ; *e; e++) count++;
    char **envp = calloc(count + (size_t)n_extra + 1, sizeof *envp);
    if (!envp) return ENOMEM;
    size_t k = 0;
    /* The agent's own XIDLELOCK_ variables (say it was started from a hook)
     * would describe another event: only this event's variables are passed. */
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "XIDLELOCK_", 10) != 0 && !has_name(*e, extra_env, n_extra)) envp[k++] = *e;
    for (int i = 0; i < n_extra; i++) envp[k++] = (char *)extra_env[i];
    envp[k] = NULL;

    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    int err = posix_spawnattr_init(&attr);
    if (err) { free(envp); return err; }
    err = posix_spawn_file_actions_init(&actions);
    if (err) { posix_spawnattr_destroy(&attr); free(envp); return err; }

    /* The agent blocks signals for its signalfd; a hook must not inherit
     * that mask, nor any handler, or `kill` would not stop it. */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);

    char *argv[] = {"sh", "-c", (char *)command, NULL};
    err = posix_spawn(pid, "/bin/sh", &actions, &attr, argv, envp);

    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    free(envp);
    return err;
}

pid_t xil_reap_one(int *exit_status, int *signal) {
    int status = 0;
    pid_t pid;
    do {
        pid = waitpid(-1, &status, WNOHANG);
    } while (pid < 0 && errno == EINTR);
    *exit_status = -1;
    *signal = 0;
    if (pid > 0) {
        if (WIFEXITED(status)) *exit_status = WEXITSTATUS(status);
        else if (WIFSIGNALED(status)) *signal = WTERMSIG(status);
    }
    return pid;
}

int xil_spawn_argv(const char *const *argv, pid_t *pid) {
    posix_spawnattr_t attr;
    int err = posix_spawnattr_init(&attr);
    if (err) return err;
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    err = posix_spawnp(pid, argv[0], NULL, &attr, (char *const *)argv, environ);
    posix_spawnattr_destroy(&attr);
    return err;
}

int xil_peer_credentials(int fd, pid_t *pid, uid_t *uid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    return 0;
}

static int unix_address(const char *path, struct sockaddr_un *addr) {
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(addr->sun_path, path);
    return 0;
}

int xil_unix_listen(const char *path, int backlog) {
    struct sockaddr_un addr;
    if (unix_address(path, &addr) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, backlog) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int xil_unix_connect(const char *path) {
    struct sockaddr_un addr;
    if (unix_address(path, &addr) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int xil_accept(int listener) {
    int fd;
    do {
        fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

int xil_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

static int resume_watch_arm(int fd) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct itimerspec spec;
    memset(&spec, 0, sizeof spec);
    spec.it_value.tv_sec = now.tv_sec + 100LL * 365 * 86400;
    return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &spec, NULL);
}

int xil_resume_watch_create(void) {
    int fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) return -1;
    if (resume_watch_arm(fd) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int xil_resume_watch_check(int fd) {
    uint64_t ticks;
    ssize_t n = read(fd, &ticks, sizeof ticks);
    if (n < 0 && errno == ECANCELED) return resume_watch_arm(fd) == 0 ? 1 : -1;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return n < 0 ? -1 : 0;
}
