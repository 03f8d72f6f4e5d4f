/* xbench: the benchmark harness's helper, compiled by bench/bench.py with
 *   cc -O2 -o bench/results/xbench bench/xbench.c -lX11 -lXtst
 * It does the parts whose own cost must stay tiny and known:
 *
 *   xbench motion N [SYNC_EVERY]  send N XTest relative motions (+1/-1 px, so the
 *                                 pointer stays put) as fast as the server takes
 *                                 them, XSync every SYNC_EVERY (default 256); prints
 *                                 "t_before_ns t_after_ns" (CLOCK_MONOTONIC) taken
 *                                 just before the first request and after the last
 *                                 XSync returned.
 *   xbench now FILE               append CLOCK_MONOTONIC ns to FILE (a locker command).
 *   xbench lock FILE MS           a locker that holds the screen as a real one does (a window
 *                                 over the screen, the keyboard grabbed on it): append
 *                                 the time to FILE, grab the keyboard, hold it MS ms, append
 *                                 the time to FILE.unlocked and exit 0 (an unlock).
 *   xbench spawnlat N sh|exec FILE
 *                                 start `sh -c 'xbench now FILE'` (or exec xbench now
 *                                 FILE directly) N times; prints, one a line, the ns
 *                                 from just before posix_spawn to the child's own
 *                                 timestamp: the overhead of the `now` method.
 *   xbench alt N CMD_A... -- CMD_B...
 *                                 run A and B alternately N times each (stdout to
 *                                 /dev/null), printing "a NS" / "b NS" wall time per
 *                                 call from posix_spawn to waitpid.
 */
#define _GNU_SOURCE
#include <X11/Xlib.h>
#include <X11/extensions/XTest.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int die(const char *what) {
    fprintf(stderr, "xbench: %s\n", what);
    return 2;
}

static int motion(long n, long sync_every) {
    Display *dpy = XOpenDisplay(NULL);
    if (!dpy) return die("cannot open display");
    int ev, er, maj, min;
    if (!XTestQueryExtension(dpy, &ev, &er, &maj, &min)) return die("no XTEST extension");
    XSync(dpy, False);
    int64_t before = now_ns();
    for (long i = 0; i < n; i++) {
        XTestFakeRelativeMotionEvent(dpy, (i & 1) ? -1 : 1, 0, CurrentTime);
        if (sync_every > 0 && (i + 1) % sync_every == 0) XSync(dpy, False);
    }
    XSync(dpy, False);
    int64_t after = now_ns();
    printf("%lld %lld\n", (long long)before, (long long)after);
    XCloseDisplay(dpy);
    return 0;
}

static int append_now(const char *path) {
    int64_t t = now_ns();
    char line[32];
    int len = snprintf(line, sizeof line, "%lld\n", (long long)t);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return die("cannot open the timestamp file");
    if (write(fd, line, (size_t)len) != len) return die("short write");
    close(fd);
    return 0;
}

static int hold_lock(const char *path, long ms) {
    if (append_now(path) != 0) return 1;
    Display *dpy = XOpenDisplay(NULL);
    if (!dpy) return die("cannot open the display");
    /* A window of its own that covers the screen, as real lockers map: the agent takes a
     * grab for the locker's only when a window of the locker shows (X-Resource). */
    XSetWindowAttributes attributes = {.override_redirect = True};
    int screen = DefaultScreen(dpy);
    Window cover = XCreateWindow(dpy, DefaultRootWindow(dpy), 0, 0, (unsigned)DisplayWidth(dpy, screen),
                                 (unsigned)DisplayHeight(dpy, screen), 0, CopyFromParent, InputOutput, CopyFromParent,
                                 CWOverrideRedirect, &attributes);
    XMapRaised(dpy, cover);
    XSync(dpy, False);
    int64_t until = now_ns() + 3000000000LL;
    while (XGrabKeyboard(dpy, cover, True, GrabModeAsync, GrabModeAsync, CurrentTime) != GrabSuccess) {
        if (now_ns() > until) return die("cannot grab the keyboard");
        usleep(1000);
    }
    XSync(dpy, False);
    usleep((useconds_t)ms * 1000);
    char unlocked[4096];
    snprintf(unlocked, sizeof unlocked, "%s.unlocked", path);
    return append_now(unlocked);
}

static int64_t last_stamp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1, x;
    while (fscanf(f, "%lld", &x) == 1) v = x;
    fclose(f);
    return v;
}

static int spawn_wait(char *const argv[], int quiet, int64_t *started) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (quiet) posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    *started = now_ns();
    int err = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (err != 0) return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int spawnlat(const char *self, long n, const char *how, const char *path) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s now %s", self, path);
    char *sh[] = {"/bin/sh", "-c", cmd, NULL};
    char *direct[] = {(char *)self, "now", (char *)path, NULL};
    char *const *argv = strcmp(how, "sh") == 0 ? sh : direct;
    for (long i = 0; i < n; i++) {
        int64_t started;
        if (spawn_wait(argv, 0, &started) != 0) return die("the timestamp child failed");
        printf("%lld\n", (long long)(last_stamp(path) - started));
    }
    return 0;
}

static int alternate(long n, char **a, char **b) {
    for (long i = 0; i < n; i++) {
        for (int which = 0; which < 2; which++) {
            /* Swap the order every other round so neither always runs first. */
            int first_a = (i & 1) == 0;
            char **argv = (which == 0) == first_a ? a : b;
            int64_t started;
            int rc = spawn_wait(argv, 1, &started);
            int64_t took = now_ns() - started;
            if (rc != 0) return die("a timed command failed");
            printf("%c %lld\n", argv == a ? 'a' : 'b', (long long)took);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "motion") == 0)
        return motion(atol(argv[2]), argc >= 4 ? atol(argv[3]) : 256);
    if (argc == 3 && strcmp(argv[1], "now") == 0) return append_now(argv[2]);
    if (argc == 4 && strcmp(argv[1], "lock") == 0) return hold_lock(argv[2], atol(argv[3]));
    if (argc == 5 && strcmp(argv[1], "spawnlat") == 0)
        return spawnlat(argv[0], atol(argv[2]), argv[3], argv[4]);
    if (argc >= 6 && strcmp(argv[1], "alt") == 0) {
        int sep = 0;
        for (int i = 3; i < argc; i++)
            if (strcmp(argv[i], "--") == 0) { sep = i; break; }
        if (sep == 0 || sep == 3 || sep == argc - 1) return die("usage: alt N A... -- B...");
        argv[sep] = NULL;
        return alternate(atol(argv[2]), argv + 3, argv + sep + 1);
    }
    fprintf(stderr, "usage: xbench motion N [SYNC_EVERY] | now FILE | lock FILE MS | spawnlat N sh|exec FILE | alt N A... -- B...\n");
    return 64;
}
