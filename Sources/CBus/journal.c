#define _GNU_SOURCE
#include "cjournal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The type of sd_journal_sendv, written out: the header is not needed to build. */
typedef int (*sendv_fn)(const struct iovec *iov, int n);
static sendv_fn sendv;

int xil_journal_load(void) {
    if (sendv) return 0;
    void *lib = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return -1;
    sendv = (sendv_fn)dlsym(lib, "sd_journal_sendv");
    return sendv ? 0 : -1;
}

int xil_journal_send(const char *const *fields, int count) {
    if (!sendv) return -ENOSYS;
    /* sd_journal_sendv returns 0 when no journald listens (its socket is missing),
     * as if the entry were written: asked first, so that an audit entry is never
     * lost where there is no journal (it goes to stderr instead). */
    if (access("/run/systemd/journal/socket", F_OK) != 0) return -errno;
    if (count <= 0 || count > 64) return -EINVAL;
    struct iovec iov[64];
    for (int i = 0; i < count; i++) {
        iov[i].iov_base = (void *)fields[i];
        iov[i].iov_len = strlen(fields[i]);
    }
    return sendv(iov, count);
}

int xil_notify_ready(const char *status) {
    if (!getenv("NOTIFY_SOCKET")) return 0;
    typedef int (*notify_fn)(int unset_environment, const char *state);
    void *lib = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    notify_fn notify = lib ? (notify_fn)dlsym(lib, "sd_notify") : NULL;
    if (!notify) {
        /* No libsystemd: still no hook may inherit the variable. */
        unsetenv("NOTIFY_SOCKET");
        return -ENOSYS;
    }
    char state[512];
    snprintf(state, sizeof state, "READY=1\nSTATUS=%s", status);
    return notify(1, state);
}
