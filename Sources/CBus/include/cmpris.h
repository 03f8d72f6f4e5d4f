#ifndef XIDLELOCK_CMPRIS_H
#define XIDLELOCK_CMPRIS_H
/* `--not-when-playing`: the MPRIS players on the session bus (org.mpris.MediaPlayer2.*)
 * and whether each says it is playing, followed through the bus's NameOwnerChanged
 * and the players' PropertiesChanged: nothing is polled. Every call is asynchronous,
 * on a connection of the watch's own (xil_bus_connect). */
#include <stdint.h>

#include "cbus.h"

/* Names followed at most (a player owns one or more): a client that claims more
 * takes none of the others' places, it is not followed past the bound (said once). */
#define XIL_MPRIS_NAMES_MAX 64

/* One player: one connection that owns one or more org.mpris.MediaPlayer2.* names. */
struct xil_mpris_player {
    const char *owner;      /* its unique name (":1.42"), which the bus vouches for */
    const char *name;       /* the shortest of its org.mpris.MediaPlayer2.* names */
    const char *identity;   /* its Identity property, its own words; "" when it tells none */
    uint32_t pid;           /* the bus's GetConnectionUnixProcessID; 0 unknown */
    int playing;            /* its PlaybackStatus is "Playing" */
};

struct xil_mpris_callbacks {
    void *context;
    /* Every player, once all that was asked at the start is answered, and again
     * after each change of who plays (a player's PlaybackStatus, one come or gone).
     * The strings are valid during the call only. */
    void (*players)(void *context, const struct xil_mpris_player *players, int count);
    /* A PropertiesChanged of the player interface came from a connection that owns
     * no followed org.mpris.MediaPlayer2.* name: dropped. */
    void (*forged)(void *context, const char *sender);
    void (*log)(void *context, int level, const char *message); /* 0 debug .. 3 error */
};

/* Starts following the players on `bus` (ready): the matches, then ListNames, and
 * for each player its PlaybackStatus, Identity and pid. 0 or -errno. `callbacks`
 * must outlive the watch. One watch at a time. */
int xil_mpris_watch(sd_bus *bus, const struct xil_mpris_callbacks *callbacks);
/* Forgets every player and every call in flight (the bus is lost or closed). */
void xil_mpris_forget(void);
#endif
