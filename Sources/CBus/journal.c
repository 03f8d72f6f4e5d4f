#define _GNU_SOURCE
/* Our entries carry no CODE_FILE/CODE_LINE: sd_journal_sendv is the function, not
 * the header's macro around it. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include "cjournal.h"
#include "clinux.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
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

/* One entry, sent from the writer thread. A send error is -errno; -ENOENT where no
 * journald listens. */
static int journal_send(struct iovec *iov, int count) {
    if (!p_sd_journal_sendv) return -ENOSYS;
    /* sd_journal_sendv returns 0 when no journald listens (its socket is missing),
     * as if the entry were written: asked first, so that an audit entry is never
     * lost where there is no journal (it goes to stderr instead). */
    if (access("/run/systemd/journal/socket", F_OK) != 0) return -errno;
    return p_sd_journal_sendv(iov, count);
}

/* The writer. sd_journal_sendv blocks in sendmsg while journald does not read its
 * socket (its queue of datagrams is full): only this thread ever waits there. The
 * loop hands entries over and collects their results; nothing it does waits on this
 * thread but a lock held for a few instructions. */
#define XIL_JOURNAL_MAX_FIELDS 64

struct journal_entry {
    uint64_t id;
    int count;
    struct iovec iov[XIL_JOURNAL_MAX_FIELDS];
    char *data;
};

static pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t journal_wake = PTHREAD_COND_INITIALIZER;
static struct journal_entry *journal_queue[XIL_JOURNAL_QUEUE];
static int journal_head, journal_queued;
static struct journal_entry *journal_in_flight;
static int64_t journal_in_flight_since;
static struct { uint64_t id; int result; } journal_done[XIL_JOURNAL_QUEUE];
static int journal_done_count;
static int journal_notify = -1;

static int64_t monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static void *journal_writer(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&journal_lock);
        while (journal_queued == 0) pthread_cond_wait(&journal_wake, &journal_lock);
        struct journal_entry *entry = journal_queue[journal_head];
        journal_head = (journal_head + 1) % XIL_JOURNAL_QUEUE;
        journal_queued--;
        journal_in_flight = entry;
        journal_in_flight_since = monotonic_ns();
        pthread_mutex_unlock(&journal_lock);

        int result = journal_send(entry->iov, entry->count);

        pthread_mutex_lock(&journal_lock);
        journal_in_flight = NULL;
        /* Room is certain: submit counts results not yet collected. */
        journal_done[journal_done_count].id = entry->id;
        journal_done[journal_done_count].result = result;
        journal_done_count++;
        pthread_mutex_unlock(&journal_lock);
        free(entry->data);
        free(entry);
        uint64_t one = 1;
        (void)!write(journal_notify, &one, sizeof one);
    }
    return NULL;
}

int xil_journal_start(void) {
    if (journal_notify >= 0) return journal_notify;
    if (xil_journal_load() != 0) return -ENOSYS;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return -errno;
    /* Every signal blocked in the writer: the loop takes them through a signalfd,
     * which sees only signals that no thread would take. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t thread;
    int error = pthread_create(&thread, &attr, journal_writer, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (error != 0) {
        close(fd);
        return -error;
    }
    journal_notify = fd;
    return fd;
}

int xil_journal_submit(uint64_t id, const char *const *fields, int count) {
    if (journal_notify < 0) return -ENOSYS;
    if (count <= 0 || count > XIL_JOURNAL_MAX_FIELDS) return -EINVAL;
    size_t total = 0;
    for (int i = 0; i < count; i++) total += strlen(fields[i]);
    struct journal_entry *entry = calloc(1, sizeof *entry);
    char *data = malloc(total ? total : 1);
    if (!entry || !data) {
        free(entry);
        free(data);
        return -ENOMEM;
    }
    entry->id = id;
    entry->count = count;
    entry->data = data;
    for (int i = 0; i < count; i++) {
        size_t n = strlen(fields[i]);
        memcpy(data, fields[i], n);
        entry->iov[i].iov_base = data;
        entry->iov[i].iov_len = n;
        data += n;
    }
    pthread_mutex_lock(&journal_lock);
    int waiting = journal_queued + journal_done_count + (journal_in_flight ? 1 : 0);
    if (waiting >= XIL_JOURNAL_QUEUE) {
        pthread_mutex_unlock(&journal_lock);
        free(entry->data);
        free(entry);
        return -EAGAIN;
    }
    journal_queue[(journal_head + journal_queued) % XIL_JOURNAL_QUEUE] = entry;
    journal_queued++;
    pthread_cond_signal(&journal_wake);
    pthread_mutex_unlock(&journal_lock);
    return 0;
}

int xil_journal_collect(uint64_t *ids, int *results, int max) {
    uint64_t count;
    (void)!read(journal_notify, &count, sizeof count);
    pthread_mutex_lock(&journal_lock);
    int n = journal_done_count < max ? journal_done_count : max;
    for (int i = 0; i < n; i++) {
        ids[i] = journal_done[i].id;
        results[i] = journal_done[i].result;
    }
    memmove(journal_done, journal_done + n, (size_t)(journal_done_count - n) * sizeof journal_done[0]);
    journal_done_count -= n;
    pthread_mutex_unlock(&journal_lock);
    if (journal_done_count > 0) {
        uint64_t one = 1;
        (void)!write(journal_notify, &one, sizeof one);
    }
    return n;
}

int64_t xil_journal_in_flight(uint64_t *id) {
    pthread_mutex_lock(&journal_lock);
    int64_t since = -1;
    if (journal_in_flight) {
        *id = journal_in_flight->id;
        since = journal_in_flight_since;
    }
    pthread_mutex_unlock(&journal_lock);
    return since;
}

int xil_journal_cancel(uint64_t *ids, int max) {
    pthread_mutex_lock(&journal_lock);
    int n = 0;
    while (journal_queued > 0 && n < max) {
        struct journal_entry *entry = journal_queue[journal_head];
        journal_head = (journal_head + 1) % XIL_JOURNAL_QUEUE;
        journal_queued--;
        ids[n++] = entry->id;
        free(entry->data);
        free(entry);
    }
    pthread_mutex_unlock(&journal_lock);
    return n;
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
