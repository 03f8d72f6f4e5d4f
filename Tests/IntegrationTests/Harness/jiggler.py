"""A software mouse jiggler through the XTEST devices of one master pointer (and its
keyboard): `jiggler.py MASTER_ID INTERVAL SECONDS` moves the pointer by one pixel and
taps Shift every INTERVAL seconds, as xdotool does, but through that master's XTEST
slaves (XTEST picks the devices of the client's ClientPointer). Prints "started" after
the first jiggle. Only libX11, libXi and libXtst through ctypes: no python3-xlib."""
import ctypes
import sys
import time

x11 = ctypes.CDLL("libX11.so.6")
xi = ctypes.CDLL("libXi.so.6")
xtst = ctypes.CDLL("libXtst.so.6")
x11.XOpenDisplay.restype = ctypes.c_void_p
display = ctypes.c_void_p(x11.XOpenDisplay(None))
if not display:
    sys.exit("jiggler: cannot open the display")
master, interval, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
if xi.XISetClientPointer(display, ctypes.c_ulong(0), master) != 0:
    sys.exit(f"jiggler: cannot make {master} the client pointer")
shift = x11.XKeysymToKeycode(display, ctypes.c_ulong(0xFFE1))  # XK_Shift_L
end = time.monotonic() + seconds
n = 0
while time.monotonic() < end:
    xtst.XTestFakeRelativeMotionEvent(display, 1, 0, ctypes.c_ulong(0))
    xtst.XTestFakeKeyEvent(display, shift, 1, ctypes.c_ulong(0))
    xtst.XTestFakeKeyEvent(display, shift, 0, ctypes.c_ulong(0))
    x11.XSync(display, 0)
    n += 1
    if n == 1:
        print("started", flush=True)
    time.sleep(interval)
print(f"runs {n}", flush=True)
