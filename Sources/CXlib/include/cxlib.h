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

#endif
