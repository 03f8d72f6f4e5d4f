/* Tests/IntegrationTests/Harness/i3lock-preload.c: preloaded into a real i3lock by
 * SessionsOfOneUserTests (built there with cc), so that a test can unlock it by typing
 * and can put the agent's look between its let-go and its exit, as a slow machine does
 * (i3lock let go of the keyboard 319 ms before its exit 0 on a VM).
 *
 * - pam_authenticate and pam_setcred succeed: any password typed unlocks (the test's
 *   user has no password to type).
 * - xcb_ungrab_keyboard (i3lock calls it after the right password, before it exits,
 *   when it had taken the focus from a window): the ungrab is made and waited for, its
 *   time appended to $I3LOCK_PRELOAD_LOG ("let-go MS", CLOCK_MONOTONIC); then the
 *   agent's grab probe is waited for (its grab of the root window shows as focus events
 *   of mode NotifyUngrab), "probed MS" appended, and i3lock goes on to its exit
 *   $I3LOCK_PRELOAD_EXIT_AFTER_MS later. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xcb/xcb.h>

int pam_authenticate(void *handle, int flags) { (void)handle; (void)flags; return 0; }
int pam_setcred(void *handle, int flags) { (void)handle; (void)flags; return 0; }

static long long milliseconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void note(const char *what, long long ms) {
    const char *path = getenv("I3LOCK_PRELOAD_LOG");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    dprintf(fd, "%s %lld\n", what, ms);
    close(fd);
}

static void wait_for_probe(xcb_connection_t *c) {
    xcb_screen_t *screen = xcb_setup_roots_iterator(xcb_get_setup(c)).data;
    uint32_t mask = XCB_EVENT_MASK_FOCUS_CHANGE;
    xcb_change_window_attributes(c, screen->root, XCB_CW_EVENT_MASK, &mask);
    xcb_flush(c);
    long long deadline = milliseconds() + 20000;
    while (milliseconds() < deadline) {
        xcb_generic_event_t *event;
        while ((event = xcb_poll_for_event(c))) {
            int type = event->response_type & 0x7f;
            int ungrab = (type == XCB_FOCUS_IN || type == XCB_FOCUS_OUT) &&
                         ((xcb_focus_in_event_t *)event)->mode == XCB_NOTIFY_MODE_UNGRAB;
            free(event);
            if (ungrab) return;
        }
        usleep(2000);
    }
}

xcb_void_cookie_t xcb_ungrab_keyboard(xcb_connection_t *c, xcb_timestamp_t time) {
    xcb_void_cookie_t (*real)(xcb_connection_t *, xcb_timestamp_t) =
        (xcb_void_cookie_t (*)(xcb_connection_t *, xcb_timestamp_t))dlsym(RTLD_NEXT, "xcb_ungrab_keyboard");
    xcb_void_cookie_t cookie = real(c, time);
    /* A round trip: the server has let go once it answers. */
    free(xcb_get_input_focus_reply(c, xcb_get_input_focus(c), NULL));
    note("let-go", milliseconds());
    wait_for_probe(c);
    note("probed", milliseconds());
    const char *after = getenv("I3LOCK_PRELOAD_EXIT_AFTER_MS");
    if (after) usleep((useconds_t)atoi(after) * 1000);
    return cookie;
}
