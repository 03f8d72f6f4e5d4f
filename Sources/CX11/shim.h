#ifndef XIDLELOCK_CX11_SHIM_H
#define XIDLELOCK_CX11_SHIM_H
#include <X11/Xlib.h>
#include <X11/extensions/scrnsaver.h>
#include <X11/extensions/XInput2.h>
/* For its types only: libXrandr is loaded at run time, when hot corners are on. */
#include <X11/extensions/Xrandr.h>
/* For its types only: libXRes is loaded at run time, by the grab probe. */
#include <X11/extensions/XRes.h>
/* For its types only: libXext's DPMS is loaded at run time, for --screen-off-after-lock. */
#include <X11/extensions/dpms.h>

/* XISetMask is a function-like macro, which Swift does not import. */
static inline void xil_xi_set_mask(unsigned char *mask, int event) {
    XISetMask(mask, event);
}
#endif
