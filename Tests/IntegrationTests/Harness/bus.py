"""D-Bus calls for the integration tests (run with Debian's /usr/bin/python3, which has
the `dbus` module). The buses are the test's own: DBUS_SESSION_BUS_ADDRESS and
DBUS_SYSTEM_BUS_ADDRESS, the system one served by python3-dbusmock's logind template.

    bus.py setup SESSION_ID UID NAME        wait for logind (with a deadline), add a session
    bus.py emit-sleep true|false            PrepareForSleep from the mock
    bus.py sleep-cycle [--pids FILE] [--window] [--timeout S]
                                            PrepareForSleep(true), then report (JSON) when the
                                            locker came up and when the sleep delay went
    bus.py inhibitors                       ListInhibitors, one JSON array per inhibitor
    bus.py session METHOD                   Lock, Unlock on the test's session
    bus.py locked-hint                      the session's LockedHint: true or false
    bus.py session-active true|false        the session's Active (PropertiesChanged)
    bus.py block-inhibited VALUE            the manager's BlockInhibited (PropertiesChanged)
    bus.py idle-inhibit WHO WHY --until FILE
                                            holds a logind idle block inhibitor until FILE exists
    bus.py ss PATH METHOD [ARGS...]         a call on org.freedesktop.ScreenSaver; prints the answer
    bus.py ss-inhibit PATH APP REASON --until FILE [--uninhibit]
                                            Inhibit, print the cookie, stay on the bus until FILE
                                            exists, then UnInhibit (or just leave) and exit
    bus.py own-screensaver --until FILE     own org.freedesktop.ScreenSaver until FILE exists
    bus.py watch-active                     print every ActiveChanged signal (both paths)

Waits poll with a deadline; each exits non-zero with a message when it passes.
Processes that stay append their pid to `bus.pids` in the working directory (the
sandbox's clean-up ends them).
"""
import ctypes
import json
import os
import sys
import time

import dbus

LOGIN1 = 'org.freedesktop.login1'
MANAGER_PATH = '/org/freedesktop/login1'
MANAGER = 'org.freedesktop.login1.Manager'
SESSION = 'org.freedesktop.login1.Session'
MOCK = 'org.freedesktop.DBus.Mock'
PROPERTIES = 'org.freedesktop.DBus.Properties'
SCREENSAVER = 'org.freedesktop.ScreenSaver'


def fail(message):
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def record_pid():
    with open('bus.pids', 'a') as f:
        f.write(f'{os.getpid()}\n')


def wait_for_file(path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            fail(f'{path} did not appear within {timeout} s')
        time.sleep(0.01)


def manager(bus):
    return bus.get_object(LOGIN1, MANAGER_PATH, introspect=False)


def session_object(bus):
    session_id = os.environ.get('XDG_SESSION_ID') or fail('no XDG_SESSION_ID')
    return bus.get_object(LOGIN1, f'{MANAGER_PATH}/session/{session_id}', introspect=False)


def sleep_inhibitors(bus):
    return [i for i in manager(bus).ListInhibitors(dbus_interface=MANAGER) if 'sleep' in str(i[0]).split(':')]


class X:
    """libX11 through ctypes, for what the test sees on the screen."""

    class WindowAttributes(ctypes.Structure):
        _fields_ = [('x', ctypes.c_int), ('y', ctypes.c_int), ('width', ctypes.c_int), ('height', ctypes.c_int),
                    ('border_width', ctypes.c_int), ('depth', ctypes.c_int), ('visual', ctypes.c_void_p),
                    ('root', ctypes.c_ulong), ('c_class', ctypes.c_int), ('bit_gravity', ctypes.c_int),
                    ('win_gravity', ctypes.c_int), ('backing_store', ctypes.c_int),
                    ('backing_planes', ctypes.c_ulong), ('backing_pixel', ctypes.c_ulong),
                    ('save_under', ctypes.c_int), ('colormap', ctypes.c_ulong), ('map_installed', ctypes.c_int),
                    ('map_state', ctypes.c_int), ('all_event_masks', ctypes.c_long),
                    ('your_event_mask', ctypes.c_long), ('do_not_propagate_mask', ctypes.c_long),
                    ('override_redirect', ctypes.c_int), ('screen', ctypes.c_void_p)]

    def __init__(self):
        lib = ctypes.CDLL('libX11.so.6')
        lib.XOpenDisplay.restype = ctypes.c_void_p
        lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
        lib.XDefaultRootWindow.restype = ctypes.c_ulong
        lib.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        lib.XQueryTree.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong),
                                   ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.POINTER(ctypes.c_ulong)),
                                   ctypes.POINTER(ctypes.c_uint)]
        lib.XGetWindowAttributes.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(X.WindowAttributes)]
        lib.XFree.argtypes = [ctypes.c_void_p]
        lib.XGrabKeyboard.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_ulong]
        lib.XUngrabKeyboard.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
        lib.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.lib = lib
        self.display = lib.XOpenDisplay(None) or fail('cannot open the display')
        self.root = lib.XDefaultRootWindow(self.display)

    def window_mapped(self):
        """Whether a top-level window is viewable (a locker's; the test's server has no other)."""
        root, parent = ctypes.c_ulong(), ctypes.c_ulong()
        children, count = ctypes.POINTER(ctypes.c_ulong)(), ctypes.c_uint()
        if not self.lib.XQueryTree(self.display, self.root, ctypes.byref(root), ctypes.byref(parent),
                                   ctypes.byref(children), ctypes.byref(count)):
            return False
        try:
            for k in range(count.value):
                attributes = X.WindowAttributes()
                if self.lib.XGetWindowAttributes(self.display, children[k], ctypes.byref(attributes)) \
                        and attributes.map_state == 2:  # IsViewable
                    return True
            return False
        finally:
            if children:
                self.lib.XFree(children)

    def keyboard_grabbed_by_other(self):
        """The grab probe: AlreadyGrabbed means another client holds the keyboard. It takes
        the grab for a moment when the keyboard is free, so it is used only once the agent
        has decided (a probe before would make the agent's own probe see a grab)."""
        r = self.lib.XGrabKeyboard(self.display, self.root, 1, 1, 1, 0)
        if r == 0:  # GrabSuccess: no one held it
            self.lib.XUngrabKeyboard(self.display, 0)
            self.lib.XSync(self.display, 0)
            return False
        return r == 1  # AlreadyGrabbed


def pids_in(path):
    try:
        with open(path) as f:
            return [int(line) for line in f.read().split('\n')[:-1] if line.strip()]
    except FileNotFoundError:
        return []


def sleep_cycle(args):
    """PrepareForSleep(true), then polls (every 2 ms) until the sleep delay inhibitor is gone:
    when the locker came up (its pid in --pids FILE, or with --window a mapped window) and when
    the delay was released, in ms after the signal, and whether the locker held the keyboard
    (and was up) when the release was seen."""
    pids_file, window, timeout = None, False, 15.0
    while args:
        flag = args.pop(0)
        if flag == '--pids':
            pids_file = args.pop(0)
        elif flag == '--window':
            window = True
        elif flag == '--timeout':
            timeout = float(args.pop(0))
        else:
            fail(f'sleep-cycle: unknown argument {flag}')
    bus = dbus.SystemBus()
    x = X() if window else None
    if not sleep_inhibitors(bus):
        fail('no sleep delay inhibitor is held before PrepareForSleep')
    before = pids_in(pids_file) if pids_file else []
    start = time.monotonic()
    manager(bus).EmitSignal(MANAGER, 'PrepareForSleep', 'b', [True], dbus_interface=MOCK)
    locker_up = None
    released = None
    up_at_release = False
    while released is None:
        now = time.monotonic()
        if now - start > timeout:
            break
        # The release first, then the locker: a locker seen up after the release was
        # seen may still have come up first, but one not up then came up after it.
        if not sleep_inhibitors(bus):
            released = (time.monotonic() - start) * 1000
        up = (pids_file and len(pids_in(pids_file)) > len(before)) or (x and x.window_mapped())
        if up and locker_up is None:
            locker_up = (time.monotonic() - start) * 1000
        if released is not None:
            up_at_release = bool(up)
            break
        time.sleep(0.002)
    grabbed = X().keyboard_grabbed_by_other() if released is not None and os.environ.get('DISPLAY') else None
    if released is not None and pids_file and not up_at_release:
        # A locker that grabbed the keyboard writes its pid just after; on a loaded
        # machine it can be preempted in between. The grab, seen at the release, is
        # what covers the screen; the pid then comes within moments.
        up_at_release = bool(grabbed)
        settle = time.monotonic() + 2.0
        while locker_up is None and time.monotonic() < settle:
            if len(pids_in(pids_file)) > len(before):
                locker_up = (time.monotonic() - start) * 1000
            time.sleep(0.002)
    print(json.dumps({'locker_up_ms': locker_up, 'released_ms': released, 'up_at_release': up_at_release,
                      'keyboard_grabbed_at_release': grabbed}), flush=True)


def convert(method, args):
    if method == 'UnInhibit':
        return [dbus.UInt32(int(args[0]))]
    return [dbus.String(a) for a in args]


def main():
    argv = sys.argv[1:]
    if not argv:
        fail(__doc__)
    command, args = argv[0], argv[1:]
    if command == 'setup':
        session_id, uid, name = args
        bus = dbus.SystemBus()
        deadline = time.monotonic() + 20
        while not bus.name_has_owner(LOGIN1):
            if time.monotonic() > deadline:
                fail('org.freedesktop.login1 did not appear on the test system bus within 20 s')
            time.sleep(0.02)
        print(manager(bus).AddSession(session_id, 'seat0', dbus.UInt32(int(uid)), name, True, dbus_interface=MOCK))
    elif command == 'emit-sleep':
        bus = dbus.SystemBus()
        manager(bus).EmitSignal(MANAGER, 'PrepareForSleep', 'b', [args[0] == 'true'], dbus_interface=MOCK)
    elif command == 'sleep-cycle':
        sleep_cycle(args)
    elif command == 'inhibitors':
        for i in manager(dbus.SystemBus()).ListInhibitors(dbus_interface=MANAGER):
            print(json.dumps([str(i[0]), str(i[1]), str(i[2]), str(i[3]), int(i[4]), int(i[5])]))
    elif command == 'session':
        getattr(session_object(dbus.SystemBus()), args[0])(dbus_interface=SESSION)
    elif command == 'locked-hint':
        hint = session_object(dbus.SystemBus()).Get(SESSION, 'LockedHint', dbus_interface=PROPERTIES)
        print('true' if hint else 'false')
    elif command == 'session-active':
        session_object(dbus.SystemBus()).UpdateProperties(SESSION, {'Active': dbus.Boolean(args[0] == 'true')},
                                                          dbus_interface=MOCK)
    elif command == 'block-inhibited':
        # The template's manager has no BlockInhibited: added on first use.
        m = manager(dbus.SystemBus())
        try:
            m.Get(MANAGER, 'BlockInhibited', dbus_interface=PROPERTIES)
        except dbus.exceptions.DBusException:
            m.AddProperty(MANAGER, 'BlockInhibited', dbus.String(''), dbus_interface=MOCK)
        m.UpdateProperties(MANAGER, {'BlockInhibited': dbus.String(args[0])}, dbus_interface=MOCK)
    elif command == 'idle-inhibit':
        who, why, flag, until = args
        assert flag == '--until'
        record_pid()
        fd = manager(dbus.SystemBus()).Inhibit('idle', who, why, 'block', dbus_interface=MANAGER)
        held = fd.take()
        print('held', flush=True)
        wait_for_file(until)
        os.close(held)
    elif command == 'ss':
        path, method = args[0], args[1]
        obj = dbus.SessionBus().get_object(SCREENSAVER, path, introspect=False)
        try:
            answer = getattr(obj, method)(*convert(method, args[2:]), dbus_interface=SCREENSAVER)
        except dbus.exceptions.DBusException as e:
            fail(f'{e.get_dbus_name()}: {e.get_dbus_message()}')
        if answer is not None:
            print(json.dumps(bool(answer) if isinstance(answer, dbus.Boolean) else int(answer)))
    elif command == 'ss-inhibit':
        path, app, reason = args[0], args[1], args[2]
        until = args[args.index('--until') + 1]
        record_pid()
        obj = dbus.SessionBus().get_object(SCREENSAVER, path, introspect=False)
        try:
            cookie = obj.Inhibit(app, reason, dbus_interface=SCREENSAVER)
        except dbus.exceptions.DBusException as e:
            fail(f'{e.get_dbus_name()}: {e.get_dbus_message()}')
        print(int(cookie), flush=True)
        wait_for_file(until)
        if '--uninhibit' in args:
            obj.UnInhibit(cookie, dbus_interface=SCREENSAVER)
            print('uninhibited', flush=True)
    elif command == 'own-screensaver':
        until = args[args.index('--until') + 1]
        record_pid()
        bus = dbus.SessionBus()
        if bus.request_name(SCREENSAVER, dbus.bus.NAME_FLAG_DO_NOT_QUEUE) != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
            fail('could not own org.freedesktop.ScreenSaver')
        print('owned', flush=True)
        wait_for_file(until)
    elif command == 'watch-active':
        from dbus.mainloop.glib import DBusGMainLoop
        from gi.repository import GLib
        record_pid()
        DBusGMainLoop(set_as_default=True)
        bus = dbus.SessionBus()

        def changed(active, path=None):
            print(f'ActiveChanged {"true" if active else "false"} {path}', flush=True)

        bus.add_signal_receiver(changed, 'ActiveChanged', SCREENSAVER, path_keyword='path')
        # A round trip, so that the match is in place before the test goes on.
        bus.get_object('org.freedesktop.DBus', '/org/freedesktop/DBus').GetId(dbus_interface='org.freedesktop.DBus')
        print('watching', flush=True)
        GLib.MainLoop().run()
    else:
        fail(f'unknown command {command}\n{__doc__}')


if __name__ == '__main__':
    main()
