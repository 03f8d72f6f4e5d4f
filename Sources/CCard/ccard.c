#define _GNU_SOURCE
#include "ccard.h"
#include "clinux.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* MARK: PC/SC, as pcsc-lite declares it on Linux
 *
 * Our own declarations of the few types and functions used (pcsc-lite's
 * <winscard.h> is not needed to build): on Linux DWORD is unsigned long, LONG
 * long, and SCARD_READERSTATE is not packed. Called through pointers of these
 * types, filled by dlopen. */

typedef long LONG;
typedef unsigned long DWORD;
typedef LONG SCARDCONTEXT;

#define XIL_MAX_ATR_SIZE 33
typedef struct {
    const char *szReader;
    void *pvUserData;
    DWORD dwCurrentState;
    DWORD dwEventState;
    DWORD cbAtr;
    unsigned char rgbAtr[XIL_MAX_ATR_SIZE];
} SCARD_READERSTATE;

LONG SCardEstablishContext(DWORD scope, const void *reserved1, const void *reserved2, SCARDCONTEXT *context);
LONG SCardReleaseContext(SCARDCONTEXT context);
LONG SCardListReaders(SCARDCONTEXT context, const char *groups, char *readers, DWORD *length);
LONG SCardGetStatusChange(SCARDCONTEXT context, DWORD timeout, SCARD_READERSTATE *states, DWORD count);
LONG SCardCancel(SCARDCONTEXT context);

#define SCARD_SCOPE_SYSTEM 0x0002
#define XIL_INFINITE 0xFFFFFFFFUL
#define SCARD_STATE_UNAWARE 0x0000
#define SCARD_STATE_IGNORE 0x0001
#define SCARD_STATE_CHANGED 0x0002
#define SCARD_STATE_UNKNOWN 0x0004
#define SCARD_STATE_PRESENT 0x0020
#define SCARD_S_SUCCESS 0
#define SCARD_E_CANCELLED ((LONG)0x80100002)
#define SCARD_E_INVALID_HANDLE ((LONG)0x80100003)
#define SCARD_E_UNKNOWN_READER ((LONG)0x80100009)
#define SCARD_E_TIMEOUT ((LONG)0x8010000A)
#define SCARD_E_READER_UNAVAILABLE ((LONG)0x80100017)
#define SCARD_E_NO_SERVICE ((LONG)0x8010001D)
#define SCARD_E_SERVICE_STOPPED ((LONG)0x8010001E)
#define SCARD_E_NO_READERS_AVAILABLE ((LONG)0x8010002E)

#define XIL_PCSC_FUNCTIONS(X) \
    X(SCardEstablishContext) X(SCardReleaseContext) X(SCardListReaders) X(SCardGetStatusChange) X(SCardCancel)

XIL_PCSC_FUNCTIONS(XIL_DLSYM_POINTER)

int xil_card_load(char *error, size_t size) {
    /* The last pointer is set only once every one before it is. */
    if (p_SCardCancel) return 0;
    return XIL_LOAD_LIST("libpcsclite.so.1", XIL_PCSC_FUNCTIONS, NULL, error, size);
}

/* MARK: The watching thread */

#define XIL_MAX_READERS 16
/* While pcscd is away: try again after 250 ms, doubling to 4 s. */
#define XIL_RETRY_FIRST_MS 250
#define XIL_RETRY_LAST_MS 4000

static pthread_mutex_t card_lock = PTHREAD_MUTEX_INITIALIZER;
/* On CLOCK_MONOTONIC (set in xil_card_start): a wall-clock jump never stretches a pause. */
static pthread_cond_t card_wake;
static SCARDCONTEXT card_context;
static int card_has_context;
static int card_stopping;
static int card_pipe = -1;

static void send_text(const char *text, size_t length) {
    while (length > 0) {
        ssize_t n = write(card_pipe, text, length);
        if (n < 0) {
            if (errno == EINTR) continue;
            return; /* the loop closed its end: the agent is going */
        }
        text += n;
        length -= (size_t)n;
    }
}

static const char *reason_of(LONG rv) {
    switch (rv) {
    case SCARD_E_NO_SERVICE: return "pcscd is not running (no service)";
    case SCARD_E_SERVICE_STOPPED: return "pcscd stopped";
    case SCARD_E_INVALID_HANDLE: return "pcscd lost (the connection ended)";
    case SCARD_E_READER_UNAVAILABLE: return "a reader is unavailable";
    default: return NULL;
    }
}

/* Whether pcscd's socket accepts a connection: "no service" from a pcscd that runs
 * is a refusal (its contexts handed out to other clients), not an absent daemon. */
static int pcscd_answers(void) {
    const char *path = getenv("PCSCLITE_CSOCK_NAME");
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", path && *path ? path : "/run/pcscd/pcscd.comm");
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    int connected = connect(fd, (struct sockaddr *)&address, sizeof address) == 0;
    close(fd);
    return connected;
}

/* pcscd's answer when it will not give a context: its clients' limit reached (other
 * clients may hold all it gives), or polkit's no. */
#define SCARD_W_SECURITY_VIOLATION ((LONG)0x8010006A)

static void send_unavailable(LONG rv) {
    char line[200];
    if (rv == SCARD_W_SECURITY_VIOLATION || (rv == SCARD_E_NO_SERVICE && pcscd_answers())) {
        int n = snprintf(line, sizeof line, "U pcscd runs but refused a context (too many, or not allowed: other clients may hold all it gives)\n");
        send_text(line, (size_t)n);
        return;
    }
    const char *reason = reason_of(rv);
    int n = reason ? snprintf(line, sizeof line, "U %s\n", reason)
                   : snprintf(line, sizeof line, "U pcscd answered 0x%08lX\n", (unsigned long)rv);
    send_text(line, (size_t)n);
}

/* One report of every reader but the PnP entry (states[0]); readers pcscd calls
 * unknown or ignored are gone. */
static void send_readers(const SCARD_READERSTATE *states, int count) {
    char report[XIL_MAX_READERS * 400 + 8];
    size_t at = 0;
    for (int i = 1; i < count; i++) {
        DWORD state = states[i].dwEventState;
        if (state & (SCARD_STATE_UNKNOWN | SCARD_STATE_IGNORE)) continue;
        at += (size_t)snprintf(report + at, sizeof report - at, "R %lu ", (state >> 16) & 0xFFFF);
        if ((state & SCARD_STATE_PRESENT) && states[i].cbAtr > 0 && states[i].cbAtr <= XIL_MAX_ATR_SIZE) {
            for (DWORD k = 0; k < states[i].cbAtr; k++) at += (size_t)snprintf(report + at, sizeof report - at, "%02x", states[i].rgbAtr[k]);
        } else {
            report[at++] = '-';
        }
        report[at++] = ' ';
        for (const char *c = states[i].szReader; *c && at < sizeof report - 8; c++) {
            report[at++] = ((unsigned char)*c < 0x20 || *c == 0x7f) ? '?' : *c;
        }
        report[at++] = '\n';
    }
    report[at++] = 'E';
    report[at++] = '\n';
    send_text(report, at);
}

/* Waits `ms` unless stopped; 1 when stopped. */
static int pause_unless_stopped(int ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&card_lock);
    while (!card_stopping && pthread_cond_timedwait(&card_wake, &card_lock, &until) == 0) {}
    int stopping = card_stopping;
    pthread_mutex_unlock(&card_lock);
    return stopping;
}

static int set_context(SCARDCONTEXT context, int has) {
    pthread_mutex_lock(&card_lock);
    card_context = context;
    card_has_context = has;
    int stopping = card_stopping;
    pthread_mutex_unlock(&card_lock);
    return stopping;
}

/* Watches one connection to pcscd until it ends: the reason (a PC/SC error). */
static LONG watch(SCARDCONTEXT context) {
    static char names[XIL_MAX_READERS * 256];
    SCARD_READERSTATE states[XIL_MAX_READERS + 1];
    for (;;) {
        DWORD length = sizeof names;
        LONG rv = p_SCardListReaders(context, NULL, names, &length);
        int count = 1;
        memset(states, 0, sizeof states);
        states[0].szReader = "\\\\?PnP?\\Notification";
        states[0].dwCurrentState = SCARD_STATE_UNAWARE;
        if (rv == SCARD_S_SUCCESS) {
            for (const char *name = names; *name && count <= XIL_MAX_READERS; name += strlen(name) + 1) {
                states[count].szReader = name;
                states[count].dwCurrentState = SCARD_STATE_UNAWARE;
                count++;
            }
        } else if (rv != SCARD_E_NO_READERS_AVAILABLE) {
            return rv;
        }
        /* Every state unaware: the first call answers at once with what is there. */
        rv = p_SCardGetStatusChange(context, 0, states, (DWORD)count);
        if (rv != SCARD_S_SUCCESS && rv != SCARD_E_TIMEOUT) return rv;
        send_readers(states, count);
        for (;;) {
            for (int i = 0; i < count; i++) states[i].dwCurrentState = states[i].dwEventState & ~(DWORD)SCARD_STATE_CHANGED;
            rv = p_SCardGetStatusChange(context, XIL_INFINITE, states, (DWORD)count);
            if (rv == SCARD_E_TIMEOUT) continue;
            if (rv == SCARD_E_UNKNOWN_READER) break; /* a reader went between the list and the wait */
            if (rv != SCARD_S_SUCCESS) return rv;
            send_readers(states, count);
            /* A reader plugged or unplugged: list them again. */
            if (states[0].dwEventState & SCARD_STATE_CHANGED) break;
            int gone = 0;
            for (int i = 1; i < count; i++) gone |= (states[i].dwEventState & (SCARD_STATE_UNKNOWN | SCARD_STATE_IGNORE)) != 0;
            if (gone) break;
        }
    }
}

static void *card_thread(void *unused) {
    (void)unused;
    int retry = XIL_RETRY_FIRST_MS;
    LONG said = SCARD_S_SUCCESS;
    for (;;) {
        SCARDCONTEXT context;
        LONG rv = p_SCardEstablishContext(SCARD_SCOPE_SYSTEM, NULL, NULL, &context);
        if (rv == SCARD_S_SUCCESS) {
            if (set_context(context, 1)) {
                p_SCardReleaseContext(context);
                return NULL;
            }
            retry = XIL_RETRY_FIRST_MS;
            said = SCARD_S_SUCCESS;
            rv = watch(context);
            int stopping = set_context(0, 0);
            p_SCardReleaseContext(context);
            if (stopping || rv == SCARD_E_CANCELLED) return NULL;
        }
        /* Said once per outage; the loop keeps trying. */
        if (rv != said) send_unavailable(rv);
        said = rv;
        if (pause_unless_stopped(retry)) return NULL;
        retry = retry * 2 > XIL_RETRY_LAST_MS ? XIL_RETRY_LAST_MS : retry * 2;
    }
}

int xil_card_start(void) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        int err = errno;
        close(fds[0]);
        close(fds[1]);
        return -err;
    }
    card_pipe = fds[1];
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&card_wake, &attributes);
    pthread_condattr_destroy(&attributes);
    /* The thread takes no signal: the loop's signalfd must get every one. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    int err = pthread_create(&thread, NULL, card_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        close(fds[0]);
        close(fds[1]);
        card_pipe = -1;
        return -err;
    }
    pthread_detach(thread);
    return fds[0];
}

void xil_card_stop(void) {
    pthread_mutex_lock(&card_lock);
    card_stopping = 1;
    if (card_has_context) p_SCardCancel(card_context);
    pthread_cond_signal(&card_wake);
    pthread_mutex_unlock(&card_lock);
}
