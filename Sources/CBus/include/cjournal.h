#ifndef XIDLELOCK_CJOURNAL_H
#define XIDLELOCK_CJOURNAL_H
/* The systemd journal's structured entries (sd_journal_sendv), loaded at run time
 * from libsystemd.so.0 like sd-bus: the binary runs where it is missing. */

#include <stdint.h>

/* Loads the library. 0, or -1 when it or sd_journal_sendv is missing. */
int xil_journal_load(void);

/* Entries are sent by a writer thread of their own: sd_journal_sendv blocks in
 * sendmsg while journald does not read, and the loop must never wait there. At
 * most XIL_JOURNAL_QUEUE entries wait, are in flight or have results not yet
 * collected. */
#define XIL_JOURNAL_QUEUE 64

/* Loads the library and starts the writer. An eventfd, readable when results wait
 * to be collected, or -errno (-ENOSYS: no libsystemd). */
int xil_journal_start(void);
/* Hands over one entry of `count` "FIELD=value" strings (copied), named `id`. 0, or
 * -EAGAIN when XIL_JOURNAL_QUEUE entries wait already. Values may hold newlines:
 * sd_journal_sendv sends them whole. */
int xil_journal_submit(uint64_t id, const char *const *fields, int count);
/* Takes up to `max` results: each entry's id and 0, or -errno (-ENOENT: no journald
 * listens). Returns how many. */
int xil_journal_collect(uint64_t *ids, int *results, int max);
/* The entry being sent now: its id, and since when (CLOCK_MONOTONIC, ns); -1 if none. */
int64_t xil_journal_in_flight(uint64_t *id);
/* Takes back up to `max` entries not yet sent (not the one in flight); their ids. */
int xil_journal_cancel(uint64_t *ids, int max);

/* Tells systemd the service is ready (Type=notify: READY=1 and a STATUS line), and
 * removes NOTIFY_SOCKET from the environment so that no hook or locker inherits it.
 * Does nothing (0) without NOTIFY_SOCKET; 1 when sent; -errno on failure. */
int xil_notify_ready(const char *status);
#endif
