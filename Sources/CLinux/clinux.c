#define _GNU_SOURCE
#include "clinux.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <grp.h>
#include <pthread.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/timerfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


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

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Marks every descriptor from `first` on close-on-exec. close_range(2) does it in
 * one call (Linux 5.11); older kernels get a bounded loop. */
static void cloexec_from(int first) {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)first, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = first; fd < max; fd++) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* Only async-signal-safe calls from here to exec: the child of a fork, or of a
 * vfork (the parent's memory and stack, the parent suspended until the exec): so
 * nothing here allocates or writes anything of the parent's but errno. */
/* The timer slack the process started with (before xil_set_timer_slack), given
 * back to every child; 0 while unchanged. */
static long inherited_timer_slack;

static void child_after_fork(const struct xil_spawn_request *r, int report) {
    if (r->new_session) setsid();
    /* The agent's own slack is its deadlines' (xil_set_timer_slack): a locker or a hook
     * runs with the one the agent was given (i3lock -n waited for ever for a keyboard
     * grab it retried with 1 ns). */
    if (inherited_timer_slack > 0) prctl(PR_SET_TIMERSLACK, (unsigned long)inherited_timer_slack, 0, 0, 0);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    /* glibc refuses its two internal signals (32, 33); nothing here ignores them,
     * and exec resets handled signals, so they start at their defaults anyway. */
    for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);

    /* Move the passed descriptors out of the way first, so that one's target
     * number cannot clobber another's source. */
    int moved[64];
    int n = r->n_fds < 64 ? r->n_fds : 64;
    for (int i = 0; i < n; i++) {
        moved[i] = fcntl(r->fds[i].from, F_DUPFD_CLOEXEC, 64);
        if (moved[i] < 0) goto fail;
    }
    if (r->stdin_null) {
        int null = open("/dev/null", O_RDONLY);
        if (null < 0) goto fail;
        if (null != 0) { dup2(null, 0); close(null); }
    }
    if (r->stdout_to_stderr) dup2(2, 1);
    cloexec_from(3);
    for (int i = 0; i < n; i++) {
        if (dup2(moved[i], r->fds[i].to) < 0) goto fail;
    }
    if (r->set_user) {
        /* Groups, then the group, then the user: each later step drops the right to the earlier. */
        if (setgroups((size_t)r->n_groups, r->groups) != 0) goto fail;
        if (setresgid(r->gid, r->gid, r->gid) != 0) goto fail;
        if (setresuid(r->uid, r->uid, r->uid) != 0) goto fail;
        if (r->directory && chdir(r->directory) != 0 && chdir("/") != 0) goto fail;
    }
    if (r->search_path) {
        execvpe(r->path, (char *const *)r->argv, (char *const *)r->envp);
    } else {
        execve(r->path, (char *const *)r->argv, (char *const *)r->envp);
    }
fail:;
    int err = errno;
    ssize_t ignored = write(report, &err, sizeof err);
    (void)ignored;
    _exit(127);
}

int xil_spawn(const struct xil_spawn_request *request, pid_t *pid) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return errno;
    /* vfork, as glibc's posix_spawn: the child borrows the agent's memory until its
     * exec, where fork first copied the page tables of the whole process (measured:
     * 0.7 to 0.9 ms of the locker's start at a deadline, against about 0.1 ms). Every
     * signal is blocked around it, so that no handler of the agent's runs in the
     * child before it restores the defaults. Setting the user takes fork: glibc's
     * set*id calls reach every thread of the process they think they are in, the
     * agent's own under vfork. */
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    pid_t child = request->set_user ? fork() : vfork();
    if (child == 0) {
        close(report[0]);
        child_after_fork(request, report[1]);
    }
    int forked = errno;
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (child < 0) {
        close(report[0]);
        close(report[1]);
        return forked;
    }
    close(report[1]);
    int err = 0;
    ssize_t n;
    do {
        n = read(report[0], &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n == (ssize_t)sizeof err) {
        /* exec failed: the child is gone; reap it here so no one mistakes it
         * for a process that ran. */
        int status;
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        return err ? err : EIO;
    }
    *pid = child;
    return 0;
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

int xil_unix_connect(const char *path) { return xil_unix_connect_flags(path, 0); }

int xil_unix_connect_nonblocking(const char *path) { return xil_unix_connect_flags(path, SOCK_NONBLOCK); }

int xil_unix_connect_flags(const char *path, int flags) {
    struct sockaddr_un addr;
    if (unix_address(path, &addr) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
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

int xil_signal_ignored(int signal) {
    struct sigaction current;
    if (sigaction(signal, NULL, &current) != 0) return 0;
    return current.sa_handler == SIG_IGN;
}

int xil_load_library(const char *library, const char *const *names, void **const *slots, int count,
                     void **handle, char *error, size_t size) {
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(error, size, "%s", dlerror());
        return -1;
    }
    for (int i = 0; i < count; i++) {
        *slots[i] = dlsym(lib, names[i]);
        if (!*slots[i]) {
            snprintf(error, size, "%s has no %s (too old)", library, names[i]);
            return -1;
        }
    }
    if (handle) *handle = lib;
    return 0;
}

int xil_trace_seize(pid_t pid) {
    return ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0 ? 0 : -1;
}

pid_t xil_guard_wait(enum xil_wait_kind *kind, int *value) {
    int status = 0;
    pid_t pid;
    do {
        pid = waitpid(-1, &status, WNOHANG | __WALL);
    } while (pid < 0 && errno == EINTR);
    *kind = XIL_WAIT_NONE;
    *value = 0;
    if (pid <= 0) return 0;
    if (WIFEXITED(status)) {
        *kind = XIL_WAIT_EXITED;
        *value = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        *kind = XIL_WAIT_KILLED;
        *value = WTERMSIG(status);
    } else if (WIFSTOPPED(status)) {
        int sig = WSTOPSIG(status);
        int event = status >> 16;
        if (event == PTRACE_EVENT_STOP) {
            if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
                /* A group-stop: the agent stays stopped, and the guard hears of SIGCONT. */
                *kind = XIL_WAIT_STOPPED;
                *value = sig;
                ptrace(PTRACE_LISTEN, pid, NULL, NULL);
            } else {
                /* Woken from the listen (SIGCONT), or an interrupt: it runs on. */
                *kind = XIL_WAIT_CONTINUED;
                ptrace(PTRACE_CONT, pid, NULL, NULL);
            }
        } else {
            /* A signal on its way to the tracee: the caller decides (xil_trace_continue). */
            *kind = XIL_WAIT_SIGNAL;
            *value = sig;
        }
    } else {
        *kind = XIL_WAIT_OTHER;
    }
    return pid;
}

pid_t xil_tracer_of(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *file = fopen(path, "re");
    if (!file) return -1;
    pid_t tracer = -1;
    while (fgets(line, sizeof line, file)) {
        if (strncmp(line, "TracerPid:", 10) == 0) {
            tracer = (pid_t)strtol(line + 10, NULL, 10);
            break;
        }
    }
    fclose(file);
    return tracer;
}

static int is_stop_signal(int sig) {
    return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

enum xil_wait_kind xil_child_wait(pid_t pid, int *value) {
    int status = 0;
    pid_t got;
    do {
        got = waitpid(pid, &status, WNOHANG);
    } while (got < 0 && errno == EINTR);
    *value = 0;
    if (got != pid) return XIL_WAIT_NONE;
    if (WIFEXITED(status)) {
        *value = WEXITSTATUS(status);
        return XIL_WAIT_EXITED;
    }
    if (WIFSIGNALED(status)) {
        *value = WTERMSIG(status);
        return XIL_WAIT_KILLED;
    }
    if (!WIFSTOPPED(status)) return XIL_WAIT_OTHER;  /* WIFCONTINUED: not asked for */
    int sig = WSTOPSIG(status);
    *value = sig;
    if (status >> 16 == PTRACE_EVENT_STOP) {
        /* A group-stop (stopped before the seize, or by a stop signal that got
         * through): PTRACE_CONT ends it for the tracee. Its SIGTRAP form is no stop
         * signal but the kernel's note of a SIGCONT or an interrupt: not reported. */
        ptrace(PTRACE_CONT, pid, NULL, NULL);
        return is_stop_signal(sig) ? XIL_WAIT_STOPPED : XIL_WAIT_OTHER;
    }
    if (is_stop_signal(sig)) {
        /* A signal-delivery-stop of a stop signal: dropped. */
        ptrace(PTRACE_CONT, pid, NULL, NULL);
        return XIL_WAIT_STOPPED;
    }
    /* Any other signal: delivered as it was sent (SIGTERM still ends it). */
    ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
    return XIL_WAIT_OTHER;
}

int xil_set_undumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int xil_set_timer_slack(unsigned long ns) {
    if (inherited_timer_slack == 0) inherited_timer_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    return prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0);
}

int xil_directory_watch(const char *directory) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return -1;
    if (inotify_add_watch(fd, directory, IN_CREATE | IN_MOVED_TO) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int xil_directory_watch_saw(int fd, const char *name) {
    char buffer[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int saw = 0;
    ssize_t n;
    while ((n = read(fd, buffer, sizeof buffer)) > 0) {
        for (char *p = buffer; p < buffer + n;) {
            const struct inotify_event *event = (const struct inotify_event *)p;
            /* Events lost to an overflow may have named it. */
            if ((event->mask & IN_Q_OVERFLOW) || (event->len && strcmp(event->name, name) == 0)) saw = 1;
            p += sizeof *event + event->len;
        }
    }
    return saw;
}

int xil_raise_descriptor_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    }
    return (int)(limit.rlim_cur > 0x7fffffff ? 0x7fffffff : limit.rlim_cur);
}

int xil_trace_continue(pid_t pid, int signal) {
    return ptrace(PTRACE_CONT, pid, NULL, (void *)(long)signal) == 0 ? 0 : -1;
}

int xil_pass_credentials(int listener) {
    int on = 1;
    return setsockopt(listener, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
}

long xil_read_with_writer(int fd, void *buffer, unsigned long length, pid_t *pid, uid_t *uid) {
    union {
        struct cmsghdr header;
        char room[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    struct iovec io = { .iov_base = buffer, .iov_len = length };
    struct msghdr message = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control };
    ssize_t n;
    do {
        n = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    *pid = 0;
    *uid = (uid_t)-1;
    if (n <= 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred cred;
            memcpy(&cred, CMSG_DATA(c), sizeof cred);
            *pid = cred.pid;
            *uid = cred.uid;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            /* Descriptors nobody asked for: closed, never kept. */
            int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < count; i++) {
                int passed;
                memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
                close(passed);
            }
        }
    }
    return n;
}
