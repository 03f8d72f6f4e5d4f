/* See cxlib.h. One list of the functions used: the slots, the names looked up and
 * the forwarding definitions are all made from it. Each slot has the type of the
 * library's own declaration (__typeof__, as systemd's DLSYM_PROTOTYPE), and each
 * forwarding definition must match that declaration, or the build fails. */
#include "cxlib.h"
#include <X11/Xlib.h>
#include <X11/extensions/XInput2.h>
#include <X11/extensions/XRes.h>
#include <X11/extensions/Xrandr.h>
#include <X11/extensions/dpms.h>
#include <X11/extensions/scrnsaver.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xcb/xcb.h>
#include <xcb/screensaver.h>
#include "clinux.h"

/* libX11-xcb's two functions (its header is in libx11-xcb-dev, not needed to build). */
enum XEventQueueOwner { XlibOwnsEventQueue = 0, XCBOwnsEventQueue };
xcb_connection_t *XGetXCBConnection(Display *d);
void XSetEventQueueOwner(Display *d, enum XEventQueueOwner owner);

/* F(library, return type, name, parameters, arguments) */
#define XIL_XLIB_FUNCTIONS(F) \
    F(X11, Display *, XOpenDisplay, (_Xconst char *name), (name)) \
    F(X11, int, XCloseDisplay, (Display *d), (d)) \
    F(X11, int, XConnectionNumber, (Display *d), (d)) \
    F(X11, int, XDefaultScreen, (Display *d), (d)) \
    F(X11, Window, XDefaultRootWindow, (Display *d), (d)) \
    F(X11, int, XDisplayWidth, (Display *d, int screen), (d, screen)) \
    F(X11, int, XDisplayHeight, (Display *d, int screen), (d, screen)) \
    F(X11, XErrorHandler, XSetErrorHandler, (XErrorHandler handler), (handler)) \
    F(X11, XIOErrorHandler, XSetIOErrorHandler, (XIOErrorHandler handler), (handler)) \
    F(X11, int, XFlush, (Display *d), (d)) \
    F(X11, int, XSync, (Display *d, Bool discard), (d, discard)) \
    F(X11, int, XPending, (Display *d), (d)) \
    F(X11, int, XNextEvent, (Display *d, XEvent *event), (d, event)) \
    F(X11, Bool, XGetEventData, (Display *d, XGenericEventCookie *cookie), (d, cookie)) \
    F(X11, int, XFree, (void *data), (data)) \
    F(X11, Bool, XQueryExtension, (Display *d, _Xconst char *name, int *opcode, int *event, int *error), \
      (d, name, opcode, event, error)) \
    F(X11, Atom, XInternAtom, (Display *d, _Xconst char *name, Bool onlyIfExists), (d, name, onlyIfExists)) \
    F(X11, int, XGetWindowProperty, (Display *d, Window w, Atom property, long offset, long length, Bool delete, \
      Atom type, Atom *actualType, int *format, unsigned long *count, unsigned long *after, unsigned char **data), \
      (d, w, property, offset, length, delete, type, actualType, format, count, after, data)) \
    F(X11, int, XChangeProperty, (Display *d, Window w, Atom property, Atom type, int format, int mode, \
      _Xconst unsigned char *data, int count), (d, w, property, type, format, mode, data, count)) \
    F(X11, int, XSelectInput, (Display *d, Window w, long mask), (d, w, mask)) \
    F(X11, Status, XQueryTree, (Display *d, Window w, Window *root, Window *parent, Window **children, \
      unsigned int *count), (d, w, root, parent, children, count)) \
    F(X11, Status, XGetWindowAttributes, (Display *d, Window w, XWindowAttributes *attributes), (d, w, attributes)) \
    F(X11, int, XGrabKeyboard, (Display *d, Window w, Bool ownerEvents, int pointerMode, int keyboardMode, Time time), \
      (d, w, ownerEvents, pointerMode, keyboardMode, time)) \
    F(X11, int, XUngrabKeyboard, (Display *d, Time time), (d, time)) \
    F(X11, int, XGrabPointer, (Display *d, Window w, Bool ownerEvents, unsigned int eventMask, int pointerMode, \
      int keyboardMode, Window confineTo, Cursor cursor, Time time), \
      (d, w, ownerEvents, eventMask, pointerMode, keyboardMode, confineTo, cursor, time)) \
    F(X11, int, XUngrabPointer, (Display *d, Time time), (d, time)) \
    F(X11, Bool, XQueryPointer, (Display *d, Window w, Window *root, Window *child, int *rootX, int *rootY, \
      int *winX, int *winY, unsigned int *mask), (d, w, root, child, rootX, rootY, winX, winY, mask)) \
    F(X11, int, XGetScreenSaver, (Display *d, int *timeout, int *interval, int *preferBlanking, int *allowExposures), \
      (d, timeout, interval, preferBlanking, allowExposures)) \
    F(X11, int, XSetScreenSaver, (Display *d, int timeout, int interval, int preferBlanking, int allowExposures), \
      (d, timeout, interval, preferBlanking, allowExposures)) \
    F(Xss, Bool, XScreenSaverQueryExtension, (Display *d, int *event, int *error), (d, event, error)) \
    F(Xss, XScreenSaverInfo *, XScreenSaverAllocInfo, (void), ()) \
    F(Xss, Status, XScreenSaverQueryInfo, (Display *d, Drawable drawable, XScreenSaverInfo *info), (d, drawable, info)) \
    F(Xi, Status, XIQueryVersion, (Display *d, int *major, int *minor), (d, major, minor)) \
    F(Xi, int, XISelectEvents, (Display *d, Window w, XIEventMask *masks, int count), (d, w, masks, count)) \
    F(Xi, XIDeviceInfo *, XIQueryDevice, (Display *d, int deviceid, int *count), (d, deviceid, count)) \
    F(Xi, Status, XIGetProperty, (Display *d, int deviceid, Atom property, long offset, long length, Bool delete, \
      Atom type, Atom *actualType, int *format, unsigned long *count, unsigned long *after, unsigned char **data), \
      (d, deviceid, property, offset, length, delete, type, actualType, format, count, after, data)) \
    F(Xrandr, Status, XRRQueryVersion, (Display *d, int *major, int *minor), (d, major, minor)) \
    F(Xrandr, XRRMonitorInfo *, XRRGetMonitors, (Display *d, Window w, Bool active, int *count), (d, w, active, count)) \
    F(XRes, Bool, XResQueryExtension, (Display *d, int *event, int *error), (d, event, error)) \
    F(XRes, Status, XResQueryVersion, (Display *d, int *major, int *minor), (d, major, minor)) \
    F(XRes, Status, XResQueryClients, (Display *d, int *count, XResClient **clients), (d, count, clients)) \
    F(XRes, Status, XResQueryClientIds, (Display *d, long specCount, XResClientIdSpec *specs, long *idCount, \
      XResClientIdValue **ids), (d, specCount, specs, idCount, ids)) \
    F(XRes, pid_t, XResGetClientPid, (XResClientIdValue *value), (value)) \
    F(XRes, Status, XResQueryClientResources, (Display *d, XID xid, int *count, XResType **types), (d, xid, count, types)) \
    F(Xext, Bool, DPMSQueryExtension, (Display *d, int *event, int *error), (d, event, error)) \
    F(Xext, Bool, DPMSCapable, (Display *d), (d)) \
    F(Xext, Status, DPMSInfo, (Display *d, CARD16 *level, BOOL *enabled), (d, level, enabled)) \
    F(Xext, Status, DPMSEnable, (Display *d), (d)) \
    F(Xext, Status, DPMSDisable, (Display *d), (d)) \
    F(Xext, Status, DPMSForceLevel, (Display *d, CARD16 level), (d, level)) \
    F(X11xcb, xcb_connection_t *, XGetXCBConnection, (Display *d), (d))

/* The functions of the list that return nothing. */
#define XIL_XLIB_PROCEDURES(F) \
    F(X11, void, XFreeEventData, (Display *d, XGenericEventCookie *cookie), (d, cookie)) \
    F(Xi, void, XIFreeDeviceInfo, (XIDeviceInfo *info), (info)) \
    F(Xss, void, XScreenSaverSelectInput, (Display *d, Drawable drawable, unsigned long mask), (d, drawable, mask)) \
    F(Xrandr, void, XRRFreeMonitors, (XRRMonitorInfo *monitors), (monitors)) \
    F(XRes, void, XResClientIdsDestroy, (long count, XResClientIdValue *ids), (count, ids)) \
    F(X11xcb, void, XSetEventQueueOwner, (Display *d, enum XEventQueueOwner owner), (d, owner))

#define XIL_ALL(F) XIL_XLIB_FUNCTIONS(F) XIL_XLIB_PROCEDURES(F)

#define XIL_ONE(lib, ret, name, params, args) +1
enum { function_count = 0 XIL_ALL(XIL_ONE) };

static struct {
#define XIL_SLOT(lib, ret, name, params, args) __typeof__(name) *name;
    XIL_ALL(XIL_SLOT)
} xlib;

static _Noreturn void used_before_loading(const char *name, const char *library) {
    /* No stdio: this may run where stderr is the only thing that still works. */
    static const char head[] = "xidlelock: internal error: ";
    static const char middle[] = " called before ";
    static const char tail[] = " was loaded\n";
    (void)!write(2, head, sizeof head - 1);
    for (const char *c = name; *c; c++) (void)!write(2, c, 1);
    (void)!write(2, middle, sizeof middle - 1);
    for (const char *c = library; *c; c++) (void)!write(2, c, 1);
    (void)!write(2, tail, sizeof tail - 1);
    abort();
}

#define XIL_FORWARD(lib, ret, name, params, args) \
    ret name params { \
        if (!xlib.name) used_before_loading(#name, "lib" #lib); \
        return xlib.name args; \
    }
XIL_XLIB_FUNCTIONS(XIL_FORWARD)

#define XIL_FORWARD_PROCEDURE(lib, ret, name, params, args) \
    ret name params { \
        if (!xlib.name) used_before_loading(#name, "lib" #lib); \
        xlib.name args; \
    }
XIL_XLIB_PROCEDURES(XIL_FORWARD_PROCEDURE)

/* Loads one library's share of the list, once. */
static int load_part(const char *library, const char *part, int *loaded, char *error, size_t size) {
    if (*loaded) return 0;
    const char *names[function_count];
    void **slots[function_count];
    int count = 0;
#define XIL_ENTRY(lib, ret, name, params, args) \
    if (__builtin_strcmp(#lib, part) == 0) { \
        names[count] = #name; \
        slots[count] = (void **)&xlib.name; \
        count++; \
    }
    XIL_ALL(XIL_ENTRY)
    if (xil_load_library(library, names, slots, count, NULL, error, size) != 0) return -1;
    *loaded = 1;
    return 0;
}

int xil_xlib_load(char *error, size_t size) {
    static int x11, xss;
    if (load_part("libX11.so.6", "X11", &x11, error, size) != 0) return -1;
    return load_part("libXss.so.1", "Xss", &xss, error, size);
}

int xil_xi_load(char *error, size_t size) {
    static int loaded;
    return load_part("libXi.so.6", "Xi", &loaded, error, size);
}

int xil_xrandr_load(char *error, size_t size) {
    static int loaded;
    return load_part("libXrandr.so.2", "Xrandr", &loaded, error, size);
}

int xil_xres_load(char *error, size_t size) {
    static int loaded;
    return load_part("libXRes.so.1", "XRes", &loaded, error, size);
}

int xil_xext_load(char *error, size_t size) {
    static int loaded;
    return load_part("libXext.so.6", "Xext", &loaded, error, size);
}

int xil_xcb_events_load(char *error, size_t size) {
    static int loaded;
    return load_part("libX11-xcb.so.1", "X11xcb", &loaded, error, size);
}

void xil_xcb_take_events(Display *d) { XSetEventQueueOwner(d, XCBOwnsEventQueue); }

int xil_xcb_next_event(Display *d, int reading_socket, int xinput_opcode, int saver_event, int stop_at_input,
                       unsigned long *raw_events, struct xil_x_event *out) {
    xcb_connection_t *c = XGetXCBConnection(d);
    for (;;) {
        xcb_generic_event_t *e = reading_socket ? xcb_poll_for_event(c) : xcb_poll_for_queued_event(c);
        if (!e) {
            int broken = xcb_connection_has_error(c);
            return broken ? -broken : 0;
        }
        int type = e->response_type & 0x7f;
        memset(out, 0, sizeof *out);
        if (type == XCB_GE_GENERIC && ((xcb_ge_generic_event_t *)e)->extension == xinput_opcode) {
            int evtype = ((xcb_ge_generic_event_t *)e)->event_type;
            free(e);
            if (evtype != XI_HierarchyChanged) {
                /* Raw input: counted, never queued or converted. */
                ++*raw_events;
                if (!stop_at_input) continue;
                out->kind = XIL_X_INPUT;
                return 1;
            }
            out->kind = XIL_X_HIERARCHY;
            return 1;
        }
        if (type == 0) {
            xcb_generic_error_t *error = (xcb_generic_error_t *)e;
            out->kind = XIL_X_ERROR;
            out->error_code = error->error_code;
            out->request_code = error->major_code;
            out->minor_code = error->minor_code;
        } else if (type == saver_event) {
            if (((xcb_screensaver_notify_event_t *)e)->state == XCB_SCREENSAVER_STATE_ON) out->kind = XIL_X_SAVER_ON;
        } else if (type == XCB_PROPERTY_NOTIFY) {
            out->kind = XIL_X_PROPERTY;
            out->window = ((xcb_property_notify_event_t *)e)->window;
            out->atom = ((xcb_property_notify_event_t *)e)->atom;
        } else if (type == XCB_DESTROY_NOTIFY) {
            out->kind = XIL_X_DESTROYED;
            out->window = ((xcb_destroy_notify_event_t *)e)->window;
        }
        free(e);
        if (out->kind != XIL_X_NONE) return 1;
    }
}
