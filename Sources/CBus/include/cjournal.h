#ifndef XIDLELOCK_CJOURNAL_H
#define XIDLELOCK_CJOURNAL_H
/* The systemd journal's structured entries (sd_journal_sendv), loaded at run time
 * from libsystemd.so.0 like sd-bus: the binary runs where it is missing. */

/* Loads the library. 0, or -1 when it or sd_journal_sendv is missing. */
int xil_journal_load(void);
/* Sends one entry of `count` "FIELD=value" strings. 0, or -errno (-ENOENT: no
 * journald listens). Values may hold newlines: sd_journal_sendv sends them whole. */
int xil_journal_send(const char *const *fields, int count);

/* Tells systemd the service is ready (Type=notify: READY=1 and a STATUS line), and
 * removes NOTIFY_SOCKET from the environment so that no hook or locker inherits it.
 * Does nothing (0) without NOTIFY_SOCKET; 1 when sent; -errno on failure. */
int xil_notify_ready(const char *status);
#endif
