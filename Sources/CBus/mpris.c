#define _GNU_SOURCE
#include "cmpris.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdbus.h"

/* The players, as the bus and they tell it. A name is followed from the bus's
 * NameOwnerChanged (only the bus sends it: the daemon stamps every other sender's
 * own unique name) or from ListNames and GetNameOwner at the start; the matches are
 * asked for first, so that no change falls between. A player is the connection
 * that owns one or more names: its signals are taken from that unique name only,
 * and its PlaybackStatus, Identity and pid are asked of it (of the bus) once it
 * comes. Nothing waits for an answer; the answers and signals are applied in the
 * order they arrive, which is the bus's order. */

#define MPRIS_PREFIX "org.mpris.MediaPlayer2."
#define MPRIS_PATH "/org/mpris/MediaPlayer2"
#define PLAYER_INTERFACE "org.mpris.MediaPlayer2.Player"
#define IDENTITY_MAX 128

struct player {
    char *owner;                  /* NULL: a free place */
    char *identity;               /* NULL until answered; "" when it tells none */
    uint32_t pid;
    int pid_known;
    int status;                   /* -1 not known yet, 0 not playing, 1 playing */
    sd_bus_slot *status_call, *identity_call, *pid_call;
};

struct name {
    char *name;                   /* NULL: a free place */
    struct player *player;        /* NULL while its owner is asked (owner_call) */
    sd_bus_slot *owner_call;
};

static struct {
    sd_bus *bus;
    const struct xil_mpris_callbacks *cb;
    struct player players[XIL_MPRIS_NAMES_MAX];
    struct name names[XIL_MPRIS_NAMES_MAX];
    sd_bus_slot *list_call;
    int listed;                   /* ListNames answered */
    int settled;                  /* everything asked at the start answered: reported since */
    int said_full;
} w;

static void say(int level, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void say(int level, const char *format, ...) {
    if (!w.cb || !w.cb->log) return;
    char text[512];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    w.cb->log(w.cb->context, level, text);
}

static sd_bus_slot *cancel(sd_bus_slot *slot) { return slot ? p_sd_bus_slot_unref(slot) : NULL; }

static int known(const struct player *p) { return p->status >= 0 && p->identity && p->pid_known; }

/* The shortest of the player's names, for the user (org.mpris.MediaPlayer2.vlc
 * rather than its ….vlc.instance1234). */
static const char *first_name(const struct player *p) {
    const char *first = "";
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.names[i].name && w.names[i].player == p && (!*first || strlen(w.names[i].name) < strlen(first)))
            first = w.names[i].name;
    return first;
}

static int settled_now(void) {
    if (!w.listed) return 0;
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.names[i].name && w.names[i].owner_call) return 0;
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.players[i].owner && !known(&w.players[i])) return 0;
    return 1;
}

/* Tells every player known in full, once the start's questions are answered. */
static void changed(void) {
    if (!w.settled) {
        if (!settled_now()) return;
        w.settled = 1;
    }
    struct xil_mpris_player list[XIL_MPRIS_NAMES_MAX];
    int count = 0;
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++) {
        const struct player *p = &w.players[i];
        if (!p->owner || !known(p)) continue;
        list[count++] = (struct xil_mpris_player){.owner = p->owner, .name = first_name(p), .identity = p->identity,
                                                  .pid = p->pid, .playing = p->status == 1};
    }
    w.cb->players(w.cb->context, list, count);
}

/* MARK: One player's answers */

static int playing(const char *status) { return strcmp(status, "Playing") == 0; }

static int status_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    struct player *p = userdata;
    p->status_call = cancel(p->status_call);
    if (!xil_answered_on_open_bus(reply)) return 0;
    char status[32] = "";
    /* A player that cannot tell is not playing. */
    if (p_sd_bus_message_is_method_error(reply, NULL) || xil_read_variant(reply, 's', status, sizeof status) < 0) {
        say(1, "the player %s does not tell its PlaybackStatus: taken as not playing", p->owner);
        status[0] = 0;
    }
    p->status = playing(status);
    changed();
    return 0;
}

static int identity_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    struct player *p = userdata;
    p->identity_call = cancel(p->identity_call);
    if (!xil_answered_on_open_bus(reply)) return 0;
    char identity[IDENTITY_MAX] = "";
    if (p_sd_bus_message_is_method_error(reply, NULL) || xil_read_variant(reply, 's', identity, sizeof identity) < 0)
        identity[0] = 0;
    free(p->identity);
    p->identity = strdup(identity);
    changed();
    return 0;
}

static int pid_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    struct player *p = userdata;
    p->pid_call = cancel(p->pid_call);
    if (!xil_answered_on_open_bus(reply)) return 0;
    uint32_t pid = 0;
    if (!p_sd_bus_message_is_method_error(reply, NULL)) p_sd_bus_message_read(reply, "u", &pid);
    p->pid = pid;
    p->pid_known = 1;
    changed();
    return 0;
}

static void ask_status(struct player *p) {
    if (p->status_call) return;
    int r = p_sd_bus_call_method_async(w.bus, &p->status_call, p->owner, MPRIS_PATH, "org.freedesktop.DBus.Properties",
                                       "Get", status_answered, p, "ss", PLAYER_INTERFACE, "PlaybackStatus");
    if (r < 0 && p->status < 0) p->status = 0;
}

/* A connection that owns its first name: asked what it is, without waiting. */
static struct player *player_add(const char *owner) {
    struct player *p = NULL;
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX && !p; i++)
        if (!w.players[i].owner) p = &w.players[i];
    if (!p || !(p->owner = strdup(owner))) return NULL;
    p->status = -1;
    ask_status(p);
    if (p_sd_bus_call_method_async(w.bus, &p->identity_call, owner, MPRIS_PATH, "org.freedesktop.DBus.Properties", "Get",
                                   identity_answered, p, "ss", "org.mpris.MediaPlayer2", "Identity") < 0)
        p->identity = strdup("");
    if (p_sd_bus_call_method_async(w.bus, &p->pid_call, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                   "org.freedesktop.DBus", "GetConnectionUnixProcessID", pid_answered, p, "s", owner) < 0)
        p->pid_known = 1;
    return p;
}

static void player_drop(struct player *p) {
    cancel(p->status_call);
    cancel(p->identity_call);
    cancel(p->pid_call);
    free(p->owner);
    free(p->identity);
    *p = (struct player){0};
}

static struct player *player_find(const char *owner) {
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.players[i].owner && strcmp(w.players[i].owner, owner) == 0) return &w.players[i];
    return NULL;
}

/* MARK: Names */

static struct name *name_find(const char *name) {
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.names[i].name && strcmp(w.names[i].name, name) == 0) return &w.names[i];
    return NULL;
}

static struct name *name_add(const char *name) {
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++) {
        struct name *n = &w.names[i];
        if (n->name) continue;
        n->name = strdup(name);
        return n->name ? n : NULL;
    }
    if (!w.said_full) {
        say(2, "more than %d MPRIS names on the session bus: %s and any further ones are not followed", XIL_MPRIS_NAMES_MAX, name);
        w.said_full = 1;
    }
    return NULL;
}

/* The player the name belonged to loses it; with no name left it is no player. */
static void name_detach(struct name *n) {
    struct player *p = n->player;
    n->player = NULL;
    n->owner_call = cancel(n->owner_call);
    if (!p) return;
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.names[i].player == p) return;
    player_drop(p);
}

static void name_drop(struct name *n) {
    name_detach(n);
    free(n->name);
    *n = (struct name){0};
}

/* `name` is owned by `owner` now ("" or NULL: by nobody): from NameOwnerChanged or
 * GetNameOwner's answer, whichever comes, in the bus's order. */
static void name_owned(const char *name, const char *owner) {
    struct name *n = name_find(name);
    if (n && n->player && owner && strcmp(n->player->owner, owner) == 0) return;
    if (n) name_detach(n);
    if (!owner || !*owner) {
        if (n) name_drop(n);
        changed();
        return;
    }
    if (!n && !(n = name_add(name))) return;
    struct player *p = player_find(owner);
    if (!p) p = player_add(owner);
    if (!p) {
        name_drop(n);
        return;
    }
    n->player = p;
    say(0, "MPRIS name %s is owned by %s", name, owner);
    changed();
}

static int is_player_name(const char *name) {
    return name && strncmp(name, MPRIS_PREFIX, strlen(MPRIS_PREFIX)) == 0 && name[strlen(MPRIS_PREFIX)];
}

static int owner_answered(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)error;
    struct name *n = userdata;
    n->owner_call = cancel(n->owner_call);
    if (!xil_answered_on_open_bus(reply)) return 0;
    const char *owner = NULL;
    if (p_sd_bus_message_is_method_error(reply, NULL) || p_sd_bus_message_read(reply, "s", &owner) < 0) owner = NULL;
    char *name = strdup(n->name);
    if (name) name_owned(name, owner);
    free(name);
    return 0;
}

static int names_listed(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    w.list_call = cancel(w.list_call);
    if (!xil_answered_on_open_bus(reply)) return 0;
    int r = p_sd_bus_message_is_method_error(reply, NULL) ? -EIO : p_sd_bus_message_enter_container(reply, 'a', "s");
    const char *name = NULL;
    while (r >= 0 && (r = p_sd_bus_message_read(reply, "s", &name)) > 0) {
        /* A name seen in a NameOwnerChanged already is known newer than this list. */
        if (!is_player_name(name) || name_find(name)) continue;
        struct name *n = name_add(name);
        if (n && p_sd_bus_call_method_async(w.bus, &n->owner_call, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                            "org.freedesktop.DBus", "GetNameOwner", owner_answered, n, "s", name) < 0)
            name_drop(n);
    }
    if (r < 0) say(2, "cannot list the names on the session bus: %s", strerror(-r));
    w.listed = 1;
    changed();
    return 0;
}

/* MARK: Signals */

static int on_name_owner(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    const char *sender = p_sd_bus_message_get_sender(m);
    if (!sender || strcmp(sender, "org.freedesktop.DBus") != 0) return 0;
    const char *name = NULL, *old = NULL, *owner = NULL;
    if (p_sd_bus_message_read(m, "sss", &name, &old, &owner) < 0 || !is_player_name(name)) return 0;
    name_owned(name, owner);
    return 0;
}

static int on_properties(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    const char *sender = p_sd_bus_message_get_sender(m);
    struct player *p = sender ? player_find(sender) : NULL;
    if (!p) {
        w.cb->forged(w.cb->context, sender ? sender : "?");
        return 0;
    }
    struct xil_property_seen seen = {.name = "PlaybackStatus", .type = 's'};
    if (xil_find_property(m, &seen) < 0) {
        say(1, "the player %s sent a PropertiesChanged that cannot be read: ignored", p->owner);
        return 0;
    }
    if (seen.found == 2) ask_status(p);
    if (seen.found != 1 || p->status == playing(seen.string)) return 0;
    p->status = playing(seen.string);
    changed();
    return 0;
}

/* MARK: The watch */

void xil_mpris_forget(void) {
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.names[i].name) name_drop(&w.names[i]);
    for (int i = 0; i < XIL_MPRIS_NAMES_MAX; i++)
        if (w.players[i].owner) player_drop(&w.players[i]);
    cancel(w.list_call);
    const struct xil_mpris_callbacks *cb = w.cb;
    w = (__typeof__(w)){0};
    w.cb = cb;
}

int xil_mpris_watch(sd_bus *bus, const struct xil_mpris_callbacks *callbacks) {
    xil_mpris_forget();
    w.bus = bus;
    w.cb = callbacks;
    /* The matches first, then the question: the bus takes them in order. */
    int r = p_sd_bus_add_match_async(bus, NULL,
                                     "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                     "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
                                     "arg0namespace='org.mpris.MediaPlayer2'",
                                     on_name_owner, NULL, NULL);
    if (r < 0) return r;
    r = p_sd_bus_add_match_async(bus, NULL,
                                 "type='signal',path='" MPRIS_PATH "',interface='org.freedesktop.DBus.Properties',"
                                 "member='PropertiesChanged',arg0='" PLAYER_INTERFACE "'",
                                 on_properties, NULL, NULL);
    if (r < 0) return r;
    r = p_sd_bus_call_method_async(bus, &w.list_call, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                   "org.freedesktop.DBus", "ListNames", names_listed, NULL, "");
    return r < 0 ? r : 0;
}
