#ifndef XIDLELOCK_CXLIB_H
#define XIDLELOCK_CXLIB_H
#include <stddef.h>

/* libX11 and libXss, loaded at run time by the agent and `doctor`: the binary does
 * not link them, so `xidlelock idle` (which speaks to the server through libxcb)
 * starts without mapping and relocating them. This file defines the Xlib functions
 * the agent calls, each forwarding to the loaded library, so the Swift code calls
 * Xlib by its own names. 0 once loaded (again: 0 at once), or -1 with the reason
 * in `error`. Calling an Xlib function before this succeeded is a bug: it aborts. */
int xil_xlib_load(char *error, size_t size);
/* libXi (raw input: XIQueryVersion, XISelectEvents; the devices: XIQueryDevice), the same way; the agent's
 * connection loads it. */
int xil_xi_load(char *error, size_t size);
/* libXrandr (the monitors: XRRQueryVersion, XRRGetMonitors, XRRFreeMonitors), the
 * same way; only hot corners need it. */
int xil_xrandr_load(char *error, size_t size);
/* libXRes (which client owns a window, and that client's pid: XResQueryClientIds;
 * which clients suspend the saver: XResQueryClientResources), the same way; the grab
 * probe uses it to tell the locker's grab from another client's, and the X source to
 * name who holds the saver suspended. */
int xil_xres_load(char *error, size_t size);
/* libXext's DPMS (the monitor's power: DPMSInfo, DPMSEnable, DPMSForceLevel), the
 * same way; only --screen-off-after-lock needs it. */
int xil_xext_load(char *error, size_t size);

/* libX11-xcb (the agent's connection): after xil_xcb_take_events, XCB keeps the
 * connection's events, not Xlib: xil_xcb_next_event reads them one at a time, each
 * freed at once, and only counts raw input events (Xlib converted each into a queue
 * entry and a cookie, two allocations that a flood's burst grew the heap with). */
int xil_xcb_events_load(char *error, size_t size);
struct _XDisplay;
void xil_xcb_take_events(struct _XDisplay *display);

enum xil_x_event_kind {
    XIL_X_NONE = 0,
    XIL_X_INPUT,      /* raw input, with stop_at_input */
    XIL_X_HIERARCHY,  /* XI_HierarchyChanged */
    XIL_X_SAVER_ON,   /* ScreenSaverNotify, state On */
    XIL_X_PROPERTY,   /* PropertyNotify: window, atom */
    XIL_X_DESTROYED,  /* DestroyNotify: window */
    XIL_X_ERROR,      /* an error of a request that had no reply */
};

struct xil_x_event {
    int kind;
    unsigned long window;
    unsigned long atom;
    int error_code;
    int request_code;
    int minor_code;
};

/* The next event the agent acts on (1), none left (0), or a lost connection (-1);
 * raw input events before it are added to *raw_events, and with `stop_at_input`
 * the first one is returned too. `reading_socket` 0: only what XCB has read
 * already (during round trips). */
int xil_xcb_next_event(struct _XDisplay *display, int reading_socket, int xinput_opcode, int saver_event,
                       int stop_at_input, unsigned long *raw_events, struct xil_x_event *out);

#endif
