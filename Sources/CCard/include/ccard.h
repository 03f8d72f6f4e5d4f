#ifndef XIDLELOCK_CCARD_H
#define XIDLELOCK_CCARD_H
/* Smart card readers through PC/SC (pcscd), for --lock-on-card-removal.
 * libpcsclite is loaded at run time with dlopen, and only when card removal is
 * on: the binary neither links nor needs it, and `xidlelock idle` never loads it.
 *
 * SCardGetStatusChange blocks until a reader or card changes: a thread of its
 * own waits there (and in the reconnect delay while pcscd is away), and writes
 * each report to a pipe the agent's loop polls. The loop never waits on pcscd.
 *
 * A report is text, one line each:
 *   R <events> <atr hex, or -> <reader name>   one per reader, then
 *   E                                         the end of the list;
 *   U <reason>                                pcscd cannot be watched.
 * <events> is pcscd's count of card events of the reader (the upper 16 bits of
 * its event state). Reader names have control characters replaced by '?'. */
#include <stddef.h>

/* Loads libpcsclite.so.1. 0, or -1 with a reason in `error`. */
int xil_card_load(char *error, size_t size);

/* Starts the watching thread; returns the pipe's read end (non-blocking,
 * close-on-exec), or -errno. Once per process. */
int xil_card_start(void);

/* Stops the thread's wait (SCardCancel): at the agent's exit. */
void xil_card_stop(void);
#endif
