#ifndef XIDLELOCK_CXCB_SHIM_H
#define XIDLELOCK_CXCB_SHIM_H
/* `xidlelock idle` speaks to the server through libxcb, the library under Xlib:
 * it maps and relocates far less at start-up than libX11 with libXss and libXext. */
#include <xcb/xcb.h>
#include <xcb/screensaver.h>

/* The extension's id, a global of libxcb-screensaver: handed out by a function so
 * that Swift does not see a mutable global. */
static inline xcb_extension_t *xil_xcb_screensaver_extension(void) {
    return &xcb_screensaver_id;
}
#endif
