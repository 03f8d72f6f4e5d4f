#define _GNU_SOURCE
/* Our entries carry no CODE_FILE/CODE_LINE: sd_journal_sendv is the function, not
 * the header's macro around it. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include "cjournal.h"
#include "clinux.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

/* Each with the type libsystemd's header gives it, loaded as sd-bus is (cbus.c). */
#define XIL_JOURNAL_FUNCTIONS(X) X(sd_journal_sendv)
#define XIL_NOTIFY_FUNCTIONS(X) X(sd_notify)
XIL_JOURNAL_FUNCTIONS(XIL_DLSYM_POINTER)
XIL_NOTIFY_FUNCTIONS(XIL_DLSYM_POINTER)

int xil_journal_load(void) {
    if (p_sd_journal_sendv) return 0;
    char error[256];
    return XIL_LOAD_LIST("libsystemd.so.0", XIL_JOURNAL_FUNCTIONS, NULL, error, sizeof error);
}

int xil_journal_send(const char *const *fields, int count) {
    if (!p_sd_journal_sendv) return -ENOSYS;
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
    return p_sd_journal_sendv(iov, count);
}

int xil_notify_ready(const char *status) {
    if (!getenv("NOTIFY_SOCKET")) return 0;
    char error[256];
    if (XIL_LOAD_LIST("libsystemd.so.0", XIL_NOTIFY_FUNCTIONS, NULL, error, sizeof error) != 0) {
        /* No libsystemd: still no hook may inherit the variable. */
        unsetenv("NOTIFY_SOCKET");
        return -ENOSYS;
    }
    char state[512];
    snprintf(state, sizeof state, "READY=1\nSTATUS=%s", status);
    return p_sd_notify(1, state);
}
