#!/usr/bin/python3
"""Tests/Desktop/inhibit-player.py: scenario (l)'s player, run in the guest inside one of the
user's sessions (through its session runner). It does what Chromium or VLC does when a film
starts: org.freedesktop.ScreenSaver.Inhibit on the session bus, then it plays on, connected,
until it is killed (the hold ends when its caller leaves the bus). Prints the cookie.

  inhibit-player.py [APPLICATION [REASON]]

Through sd-bus from libsystemd by ctypes: the guest has libsystemd but no python3-dbus, and
a package would rebuild the image."""
import ctypes, os, sys, time

sd = ctypes.CDLL("libsystemd.so.0", use_errno=True)
P = ctypes.c_void_p


class BusError(ctypes.Structure):   # sd_bus_error
    _fields_ = [("name", ctypes.c_char_p), ("message", ctypes.c_char_p), ("need_free", ctypes.c_int)]


sd.sd_bus_open_user.argtypes = [ctypes.POINTER(P)]
sd.sd_bus_message_new_method_call.argtypes = [P, ctypes.POINTER(P)] + [ctypes.c_char_p] * 4
sd.sd_bus_message_append_basic.argtypes = [P, ctypes.c_char, ctypes.c_void_p]
sd.sd_bus_call.argtypes = [P, P, ctypes.c_uint64, ctypes.POINTER(BusError), ctypes.POINTER(P)]
sd.sd_bus_message_read_basic.argtypes = [P, ctypes.c_char, ctypes.c_void_p]


def check(r, what):
    if r < 0:
        sys.exit(f"inhibit-player: {what}: {os.strerror(-r)}")


def main():
    app = sys.argv[1] if len(sys.argv) > 1 else "xdl-player"
    why = sys.argv[2] if len(sys.argv) > 2 else "playing a film"
    bus, call, reply, err = P(), P(), P(), BusError()
    check(sd.sd_bus_open_user(ctypes.byref(bus)), "the session bus")
    check(sd.sd_bus_message_new_method_call(bus, ctypes.byref(call), b"org.freedesktop.ScreenSaver",
                                            b"/org/freedesktop/ScreenSaver", b"org.freedesktop.ScreenSaver",
                                            b"Inhibit"), "the call")
    for s in (app, why):
        check(sd.sd_bus_message_append_basic(call, b"s", ctypes.c_char_p(s.encode())), "its arguments")
    if sd.sd_bus_call(bus, call, 10_000_000, ctypes.byref(err), ctypes.byref(reply)) < 0:
        sys.exit(f"inhibit-player: Inhibit refused: {(err.name or b'?').decode()}: {(err.message or b'').decode()}")
    cookie = ctypes.c_uint32()
    check(sd.sd_bus_message_read_basic(reply, b"u", ctypes.byref(cookie)), "the reply")
    print(f"cookie {cookie.value}", flush=True)
    while True:   # playing; the bus connection stays open until the process ends
        time.sleep(3600)


if __name__ == "__main__":
    main()
