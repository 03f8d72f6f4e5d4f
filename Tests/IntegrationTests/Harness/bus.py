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
    bus.py set-locked-hint true|false       the session's SetLockedHint (XDG_SESSION_ID's), as
                                            whoever runs it (the session's user may)
    bus.py locked-hint-calls                every SetLockedHint the session was sent, as a
                                            JSON array of true and false, oldest first
    bus.py session-active [ID] true|false   the session's Active (PropertiesChanged); ID:
                                            that session, else XDG_SESSION_ID's
    bus.py session-set ID PROPERTY VALUE    a property of session ID, with its PropertiesChanged:
                                            true|false a boolean (Remote, as pam_systemd sets it
                                            for a VNC server's session; IdleHint; LockedHint),
                                            anything else a string (State closing)
    bus.py session-add ID UID NAME DISPLAY  another x11 session of class user, not active
                                            (SessionNew)
    bus.py session-remove ID                session ID gone from logind (no signal)
    bus.py user-display UID ID              user UID's Display: session ID, as logind elects
                                            a user's display session
    bus.py sessions-add COUNT PREFIX UID NAME TYPE
                                            COUNT sessions PREFIX1.. of TYPE (tty: none the
                                            guard guards), class user, then one SessionNew
    bus.py changes-then-stall PREFIX COUNT SECONDS
                                            logind's mock says LockedHint changed for sessions
                                            PREFIX1..COUNT and then answers nothing for SECONDS
                                            (the guard's reads of them all wait at once)
    bus.py idle-stream SESSION_ID COUNT MS  logind's mock says the session's IdleHint changed
                                            COUNT times, one every MS ms (as a terminal
                                            server's sessions do together); returns after
    bus.py block-inhibited VALUE            the manager's BlockInhibited (PropertiesChanged)
    bus.py upower-setup                     wait for UPower's mock (with a deadline)
    bus.py guard-setup SESSION_ID UID NAME DISPLAY
                                            wait for logind, add an active x11 session of
                                            class user on DISPLAY (SessionNew), and give the
                                            manager GetSessionByPID: a pid belongs to the
                                            session named by MOCK_LOGIND_SESSION=ID in its own
                                            environment or its nearest ancestor's
    bus.py idle-inhibitor-add WHO WHY UID PID
                                            an idle inhibitor (block) in logind's ListInhibitors
                                            with that holder's uid and pid, as systemd-inhibit
                                            run by that process makes (the template's Inhibit
                                            records uid 1000, pid 123456); no change signal
    bus.py idle-inhibitor-remove WHO        the idle inhibitors of WHO gone from the listing
    bus.py terminated                       the sessions TerminateSession was called for so
                                            far, as a JSON array of ids, oldest first

Not D-Bus, for the guard's tests:

    bus.py fake-agent SOCKET REPLY_FILE     a script of the session's user in place of its
                                            killed agent: listens on the agent's control
                                            socket (removing the dead agent's first) and
                                            answers every request line with REPLY_FILE's
                                            line (a `status --json` saved earlier); prints
                                            `listening`, then `answered N`; runs until killed
    bus.py connect-storm SOCKET SECONDS [--silent N] [--workers N]
                                            a crowd on a control socket for SECONDS: N (2000)
                                            connections that never send a line (each one the
                                            agent closes is opened again), and N workers (2)
                                            that connect, send half a line and leave, again
                                            and again; prints `storming`, then
                                            `silent N reconnects M`
    bus.py on-battery true|false            UPower's OnBattery (PropertiesChanged from the mock)
    bus.py idle-inhibit WHO WHY --until FILE
                                            holds a logind idle block inhibitor until FILE exists
    bus.py ss PATH METHOD [ARGS...]         a call on org.freedesktop.ScreenSaver; prints the answer
    bus.py ss-inhibit PATH APP REASON --until FILE [--uninhibit]
                                            Inhibit, print the cookie, stay on the bus until FILE
                                            exists, then UnInhibit (or just leave) and exit
    bus.py own-screensaver --until FILE     own org.freedesktop.ScreenSaver until FILE exists
    bus.py pm NAME METHOD [ARGS...]         a call on org.freedesktop.PowerManagement.Inhibit
                                            at bus name NAME; prints the answer
    bus.py pm-inhibit NAME APP REASON --until FILE [--uninhibit]
                                            as ss-inhibit, on org.freedesktop.PowerManagement.Inhibit
    bus.py watch-active                     print every ActiveChanged signal (both paths)
    bus.py ss-inhibit ... --name            also print the caller's unique name (`name :1.N`)
    bus.py ss-inhibit-many PATH COUNT --until FILE [--window N]
                                            COUNT Inhibits on one connection, at most N (all,
                                            by default) sent ahead of the answers; prints (JSON) how many
                                            were granted and how the others were refused, then
                                            stays on the bus until FILE exists
    bus.py ss-flood PATH SECONDS            Inhibit calls as fast as the bus takes them for
                                            SECONDS, never waiting for an answer
    bus.py ss-connect-flood PATH SECONDS [--calls N] [--workers N]
                                            short-lived connections for SECONDS: each says
                                            Hello and N (5) Inhibit calls, waits for their
                                            answers (5 s at most; every other worker
                                            only for Hello's) and leaves; N workers (2) at once; prints
                                            `flooding`, then `connections C calls M`
    bus.py ss-repeat PATH METHOD EVERY SECONDS
                                            METHOD (no arguments) every EVERY s for SECONDS
    bus.py ss-follow PATH APP REASON --until FILE
                                            as a browser playing a film: Inhibit whenever
                                            org.freedesktop.ScreenSaver gets an owner (and at
                                            once if it has one), until FILE exists

A second local user's forgeries on the system bus (run as that user; no file written):

    bus.py forge AGENT_PID KIND [--for SECONDS] [--every SECONDS]
        finds the connection of process AGENT_PID (ListNames, GetConnectionUnixProcessID)
        and sends it unicast signals with logind's path and interface, KIND one of:
        inactive, active      the session's PropertiesChanged {"Active": false/true}
        pulse                 inactive, active, inactive... every --every s for --for s
        lock                  the session's Lock
        sleep-true, sleep-false   the manager's PrepareForSleep(true/false)
        flood                 PropertiesChanged of the session invalidating Active, and of
                              the manager invalidating BlockInhibited, as fast as the bus
                              takes them, for --for s
        prints `target :1.N` once found, then `sent N` once the bus has routed them all

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
import dbus.lowlevel

LOGIN1 = 'org.freedesktop.login1'
MANAGER_PATH = '/org/freedesktop/login1'
MANAGER = 'org.freedesktop.login1.Manager'
SESSION = 'org.freedesktop.login1.Session'
MOCK = 'org.freedesktop.DBus.Mock'
UPOWER = 'org.freedesktop.UPower'
UPOWER_PATH = '/org/freedesktop/UPower'
PROPERTIES = 'org.freedesktop.DBus.Properties'
SCREENSAVER = 'org.freedesktop.ScreenSaver'
PM_INHIBIT = 'org.freedesktop.PowerManagement.Inhibit'
PM_INHIBIT_PATH = '/org/freedesktop/PowerManagement/Inhibit'


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


# The manager's GetSessionByPID (run by the mock, as root, in its own globals: `args`,
# `objects`, `os`, `dbus`): the session of a process is the one its environment, or the
# nearest ancestor's, names with MOCK_LOGIND_SESSION=ID, as the tests mark the processes
# of a session (real logind reads the process's cgroup). No marker: NoSessionForPID, as
# logind answers for a process outside every session.
GET_SESSION_BY_PID = """
pid = int(args[0])
found = None
hops = 0
while pid > 0 and found is None and hops < 64:
    hops += 1
    try:
        with open('/proc/%d/environ' % pid, 'rb') as f:
            entries = f.read().split(b'\\0')
    except OSError:
        break
    for entry in entries:
        if entry.startswith(b'MOCK_LOGIND_SESSION='):
            found = entry[len(b'MOCK_LOGIND_SESSION='):].decode()
            break
    if found is None:
        try:
            with open('/proc/%d/stat' % pid) as f:
                stat = f.read()
            pid = int(stat[stat.rindex(')') + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
path = '/org/freedesktop/login1/session/%s' % found
if found is None or path not in objects:
    raise dbus.exceptions.DBusException('PID %d does not belong to any known session' % int(args[0]),
                                        name='org.freedesktop.login1.NoSessionForPID')
ret = dbus.ObjectPath(path)
"""


# Runs inside the mock: IdleHint changes of one session, one every `interval` seconds,
# each flushed onto the bus at once.
IDLE_STREAM = """
import time
session = objects['/org/freedesktop/login1/session/' + args[0]]
for n in range(args[1]):
    session.EmitSignal('org.freedesktop.DBus.Properties', 'PropertiesChanged', 'sa{sv}as',
        ['org.freedesktop.login1.Session', {'IdleHint': dbus.Boolean(n % 2 == 0)}, dbus.Array([], signature='s')])
    self.connection.flush()
    time.sleep(args[2])
"""

# Runs inside the mock: every change signalled (and flushed onto the bus), then the mock
# busy for `seconds`, as a logind slow to answer.
CHANGES_THEN_STALL = """
import time
for n in range(1, args[1] + 1):
    objects['/org/freedesktop/login1/session/' + args[0] + str(n)].EmitSignal(
        'org.freedesktop.DBus.Properties', 'PropertiesChanged', 'sa{sv}as',
        ['org.freedesktop.login1.Session', {'LockedHint': dbus.Boolean(False)}, dbus.Array([], signature='s')])
self.connection.flush()
time.sleep(args[2])
"""


# Run inside the mock, in dbusmock's own globals, where the template keeps its list of
# inhibitors (`mockobject.inhibitors`).
ADD_IDLE_INHIBITOR = """
globals().setdefault('inhibitors', []).append(
    ('idle', args[0], args[1], 'block', dbus.UInt32(args[2]), dbus.UInt32(args[3])))
"""
# (A loop, not a comprehension: exec's own locals, `args`, are not seen from one.)
REMOVE_IDLE_INHIBITOR = """
listed = globals().setdefault('inhibitors', [])
for inhibitor in list(listed):
    if inhibitor[1] == args[0]:
        listed.remove(inhibitor)
"""


def guard_setup(args):
    session_id, uid, name, display = args
    bus = wait_for_name(LOGIN1)
    m = manager(bus)
    path = m.AddSession(session_id, 'seat0', dbus.UInt32(int(uid)), name, True, dbus_interface=MOCK)
    session = bus.get_object(LOGIN1, path, introspect=False)
    session.UpdateProperties(SESSION, {'Type': dbus.String('x11'), 'Class': dbus.String('user'),
                                       'Display': dbus.String(display)}, dbus_interface=MOCK)
    introspection = m.Introspect(dbus_interface='org.freedesktop.DBus.Introspectable')
    if 'GetSessionByPID' not in introspection:
        m.AddMethod(MANAGER, 'GetSessionByPID', 'u', 'o', GET_SESSION_BY_PID, dbus_interface=MOCK)
    # As logind announces a new session (the mock's AddSession does not).
    m.EmitSignal(MANAGER, 'SessionNew', 'so', [session_id, dbus.ObjectPath(path)], dbus_interface=MOCK)
    print(path)


def listen_unix(path):
    """A listening socket at `path`, in place of whatever was there."""
    import socket
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    return server


def fake_agent(args):
    path, reply_file = args
    with open(reply_file, encoding='utf-8') as f:
        reply = f.read().strip().encode() + b'\n'
    server = listen_unix(path)
    print('listening', flush=True)
    answered = 0
    while True:
        conn, _ = server.accept()
        conn.settimeout(5)
        buffer = b''
        try:
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                buffer += chunk
                while b'\n' in buffer:
                    _, buffer = buffer.split(b'\n', 1)
                    conn.sendall(reply)
                    answered += 1
                    print(f'answered {answered}', flush=True)
        except OSError:
            pass
        conn.close()


def silent(args):
    (path,) = args
    server = listen_unix(path)
    record_pid()
    print('listening', flush=True)
    # Kept open and never read: the client's handshake waits for an answer that never comes.
    accepted = []
    while True:
        conn, _ = server.accept()
        accepted.append(conn)


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


def connection_of(bus, pid, timeout=20.0):
    """The unique name of the connection of process `pid` (ListNames, then
    GetConnectionUnixProcessID of each), waited for with a deadline."""
    driver = bus.get_object('org.freedesktop.DBus', '/org/freedesktop/DBus', introspect=False)
    deadline = time.monotonic() + timeout
    while True:
        for name in driver.ListNames(dbus_interface='org.freedesktop.DBus'):
            if not name.startswith(':'):
                continue
            try:
                if int(driver.GetConnectionUnixProcessID(name, dbus_interface='org.freedesktop.DBus')) == pid:
                    return str(name)
            except dbus.exceptions.DBusException:
                pass  # gone in between
        if time.monotonic() > deadline:
            fail(f'no connection of pid {pid} on the bus within {timeout} s')
        time.sleep(0.05)


def round_trip(bus):
    """A call to the bus itself: the daemon handles a connection's messages in order, so
    once it answers, everything sent before has been routed."""
    bus.get_object('org.freedesktop.DBus', '/org/freedesktop/DBus', introspect=False) \
        .GetId(dbus_interface='org.freedesktop.DBus')


def forged(target, path, interface, member, signature=None, *args):
    message = dbus.lowlevel.SignalMessage(path, interface, member)
    message.set_destination(target)
    if signature is not None:
        message.append(*args, signature=signature)
    return message


def forged_active(target, path, active):
    return forged(target, path, PROPERTIES, 'PropertiesChanged', 'sa{sv}as', SESSION,
                  dbus.Dictionary({'Active': dbus.Boolean(active, variant_level=1)}, signature='sv'),
                  dbus.Array([], signature='s'))


def forge(args):
    pid, kind = int(args[0]), args[1]
    seconds, every = 10.0, 0.5
    rest = args[2:]
    while rest:
        flag = rest.pop(0)
        if flag == '--for':
            seconds = float(rest.pop(0))
        elif flag == '--every':
            every = float(rest.pop(0))
        else:
            fail(f'forge: unknown argument {flag}')
    bus = dbus.SystemBus()
    target = connection_of(bus, pid)
    print(f'target {target}', flush=True)
    session_id = os.environ.get('XDG_SESSION_ID') or fail('no XDG_SESSION_ID')
    session_path = f'{MANAGER_PATH}/session/{session_id}'
    sent = 0
    if kind in ('inactive', 'active'):
        bus.send_message(forged_active(target, session_path, kind == 'active'))
        sent = 1
    elif kind == 'lock':
        bus.send_message(forged(target, session_path, SESSION, 'Lock'))
        sent = 1
    elif kind in ('on-battery', 'on-ac'):
        bus.send_message(forged(target, UPOWER_PATH, PROPERTIES, 'PropertiesChanged', 'sa{sv}as', UPOWER,
                                dbus.Dictionary({'OnBattery': dbus.Boolean(kind == 'on-battery', variant_level=1)},
                                                signature='sv'),
                                dbus.Array([], signature='s')))
        sent = 1
    elif kind in ('sleep-true', 'sleep-false'):
        bus.send_message(forged(target, MANAGER_PATH, MANAGER, 'PrepareForSleep', 'b', kind == 'sleep-true'))
        sent = 1
    elif kind == 'pulse':
        end = time.monotonic() + seconds
        active = False
        while time.monotonic() < end:
            bus.send_message(forged_active(target, session_path, active))
            bus.flush()
            sent += 1
            if sent == 1:
                print('pulsing', flush=True)
            active = not active
            time.sleep(every)
    elif kind == 'flood':
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(50):
                bus.send_message(forged(target, session_path, PROPERTIES, 'PropertiesChanged', 'sa{sv}as', SESSION,
                                        dbus.Dictionary({}, signature='sv'), dbus.Array(['Active'], signature='s')))
                bus.send_message(forged(target, MANAGER_PATH, PROPERTIES, 'PropertiesChanged', 'sa{sv}as', MANAGER,
                                        dbus.Dictionary({}, signature='sv'), dbus.Array(['BlockInhibited'], signature='s')))
                sent += 2
            bus.flush()
            if sent == 100:
                print('flooding', flush=True)
    else:
        fail(f'forge: unknown kind {kind}')
    bus.flush()
    round_trip(bus)
    print(f'sent {sent}', flush=True)


def screensaver_call(path, method, *args, signature=None):
    message = dbus.lowlevel.MethodCallMessage(SCREENSAVER, path, SCREENSAVER, method)
    if signature is not None:
        message.append(*args, signature=signature)
    return message


def ss_inhibit_many(args):
    """COUNT Inhibits pipelined on one connection; the answers read as they come."""
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    path, count = args[0], int(args[1])
    until = args[args.index('--until') + 1]
    window = int(args[args.index('--window') + 1]) if '--window' in args else count
    record_pid()
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    answers = [None] * count
    loop = GLib.MainLoop()
    left = [count]

    sent = [0]

    def send_next():
        k = sent[0]
        sent[0] += 1
        bus.send_message_with_reply(screensaver_call(path, 'Inhibit', f'app-{k}', 'many', signature='ss'),
                                    answered(k), 120.0)

    def answered(k):
        def handler(message):
            if isinstance(message, dbus.lowlevel.ErrorMessage):
                answers[k] = ('error', message.get_error_name())
            else:
                answers[k] = ('cookie', int(message.get_args_list()[0]))
            left[0] -= 1
            if left[0] == 0:
                loop.quit()
            elif sent[0] < count:
                send_next()
        return handler

    for _ in range(min(window, count)):
        send_next()
    GLib.timeout_add(120 * 1000, loop.quit)
    loop.run()
    granted = [k for k, a in enumerate(answers) if a and a[0] == 'cookie']
    errors = [a[1] for a in answers if a and a[0] == 'error']
    print(json.dumps({'granted': len(granted), 'refused': len(errors), 'unanswered': answers.count(None),
                      'last_granted': granted[-1] if granted else None,
                      'first_refused': next((k for k, a in enumerate(answers) if a and a[0] == 'error'), None),
                      'errors': sorted(set(errors))}), flush=True)
    wait_for_file(until, timeout=300)


def ss_flood(args):
    path, seconds = args[0], float(args[1])
    bus = dbus.SessionBus()
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        for _ in range(50):
            bus.send_message(screensaver_call(path, 'Inhibit', f'flood {os.getpid()}', 'flooding', signature='ss'))
            sent += 1
        bus.flush()
        if sent == 50:
            print('flooding', flush=True)
    print(f'sent {sent}', flush=True)


def wire_message(serial, destination, path, interface, member, signature='', body=b''):
    """One method call in D-Bus's wire format (little-endian), made by hand: a flood of
    connections is faster without a client library's connection set-up."""
    import struct
    out = bytearray(b'l\x01\x00\x01' + struct.pack('<II', len(body), serial))

    def pad(n):
        out.extend(b'\x00' * (-len(out) % n))

    def string(code, kind, value):
        pad(8)
        out.extend(bytes([code, 1]) + kind.encode() + b'\x00')
        data = value.encode()
        if kind == 'g':
            out.extend(bytes([len(data)]) + data + b'\x00')
        else:
            pad(4)
            out.extend(struct.pack('<I', len(data)) + data + b'\x00')

    length_at = len(out)
    out.extend(b'\x00' * 4)
    pad(8)
    start = len(out)
    string(1, 'o', path)
    if interface:
        string(2, 's', interface)
    string(3, 's', member)
    string(6, 's', destination)
    if signature:
        string(8, 'g', signature)
    out[length_at:length_at + 4] = struct.pack('<I', len(out) - start)
    pad(8)
    return bytes(out) + body


def wire_strings(*values):
    import struct
    out = bytearray()
    for value in values:
        out.extend(b'\x00' * (-len(out) % 4))
        data = value.encode()
        out.extend(struct.pack('<I', len(data)) + data + b'\x00')
    return bytes(out)


def wire_count(data):
    """How many whole messages `data` holds (little-endian, as the daemon writes to us)."""
    import struct
    count = 0
    while len(data) >= 16:
        body, fields = struct.unpack_from('<I', data, 4)[0], struct.unpack_from('<I', data, 12)[0]
        size = 16 + fields + (-(16 + fields) % 8) + body
        if len(data) < size:
            break
        data = data[size:]
        count += 1
    return count


def ss_connect_flood(args):
    """Connections that each say Hello and a few Inhibits, then leave: each is a new
    client of the service for the agent, gone as soon as it came."""
    import socket
    path, seconds = args[0], float(args[1])
    calls = int(args[args.index('--calls') + 1]) if '--calls' in args else 5
    workers = int(args[args.index('--workers') + 1]) if '--workers' in args else 2
    address = os.environ['DBUS_SESSION_BUS_ADDRESS']
    socket_path = address.split('path=', 1)[1].split(',')[0]
    auth = b'\x00AUTH EXTERNAL ' + str(os.getuid()).encode().hex().encode() + b'\r\nBEGIN\r\n'
    hello = wire_message(1, 'org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'Hello')
    inhibits = b''.join(wire_message(2 + k, SCREENSAVER, path, SCREENSAVER, 'Inhibit', 'ss',
                                     wire_strings(f'connect flood {k}', 'flooding')) for k in range(calls))
    record_pid()
    end = time.monotonic() + seconds
    children = []
    for worker in range(workers):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            made = 0
            while time.monotonic() < end:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(socket_path)
                    s.settimeout(5)
                    s.sendall(auth + hello + inhibits)
                    # OK <guid>, then Hello's answer, NameAcquired and an answer to each call;
                    # every other worker leaves once Hello is answered, its calls still on
                    # their way to the agent.
                    wanted = 2 + calls if worker % 2 == 0 else 1
                    got = b''
                    while b'\r\n' not in got or wire_count(got[got.index(b'\r\n') + 2:]) < wanted:
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        got += chunk
                    made += 1
                except OSError:
                    pass
                finally:
                    s.close()
                if made == 1 and worker == 0:
                    print('flooding', flush=True)
            os.write(write_end, f'{made}\n'.encode())
            os._exit(0)
        os.close(write_end)
        children.append((pid, read_end))
    total = 0
    for pid, read_end in children:
        with os.fdopen(read_end) as f:
            total += int(f.read().strip() or 0)
        os.waitpid(pid, 0)
    print(f'connections {total} calls {total * calls}', flush=True)


def connect_storm(args):
    """Clients of the control socket that take a place and never ask anything."""
    import resource
    import select
    import socket
    path, seconds = args[0], float(args[1])
    silent = int(args[args.index('--silent') + 1]) if '--silent' in args else 2000
    workers = int(args[args.index('--workers') + 1]) if '--workers' in args else 2
    record_pid()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, silent + 256), hard))
    end = time.monotonic() + seconds
    children = []
    for worker in range(workers):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            made = 0
            while time.monotonic() < end:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(path)
                    s.send(b'{"comm')
                    made += 1
                except OSError:
                    pass
                s.close()
            os.write(write_end, f'{made}\n'.encode())
            os._exit(0)
        os.close(write_end)
        children.append((pid, read_end))

    def opened():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return None
        return s

    crowd = [c for c in (opened() for _ in range(silent)) if c]
    print('storming', flush=True)
    reopened = 0
    while time.monotonic() < end:
        # Those the agent closed (readable: a refusal or the end) take their place again.
        watch = select.poll()
        by_fd = {c.fileno(): c for c in crowd}
        for fd in by_fd:
            watch.register(fd, select.POLLIN)
        for fd, _ in watch.poll(50):
            c = by_fd[fd]
            crowd.remove(c)
            c.close()
            fresh = opened()
            if fresh:
                crowd.append(fresh)
                reopened += 1
    total = 0
    for pid, read_end in children:
        with os.fdopen(read_end) as f:
            total += int(f.read().strip() or 0)
        os.waitpid(pid, 0)
    print(f'silent {len(crowd)} reopened {reopened} reconnects {total}', flush=True)


def ss_repeat(args):
    path, method, every, seconds = args[0], args[1], float(args[2]), float(args[3])
    obj = dbus.SessionBus().get_object(SCREENSAVER, path, introspect=False)
    end = time.monotonic() + seconds
    calls = refused = 0
    while time.monotonic() < end:
        # An attacker goes on whatever the answer: a refusal is counted, not fatal.
        try:
            getattr(obj, method)(dbus_interface=SCREENSAVER)
        except dbus.exceptions.DBusException:
            refused += 1
        calls += 1
        if calls == 1:
            print('called', flush=True)
        time.sleep(every)
    print(f'calls {calls} refused {refused}', flush=True)


def ss_follow(args):
    """What Chromium does: it inhibits through the service whenever one appears."""
    from dbus.mainloop.glib import DBusGMainLoop
    from gi.repository import GLib
    path, app, reason = args[0], args[1], args[2]
    until = args[args.index('--until') + 1]
    record_pid()
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    loop = GLib.MainLoop()

    def inhibit():
        obj = bus.get_object(SCREENSAVER, path, introspect=False)
        try:
            cookie = obj.Inhibit(app, reason, dbus_interface=SCREENSAVER)
            print(f'inhibited {int(cookie)}', flush=True)
        except dbus.exceptions.DBusException as e:
            print(f'refused {e.get_dbus_name()}', flush=True)

    def owner_changed(name, old, new):
        if name == SCREENSAVER and new:
            GLib.idle_add(lambda: inhibit() and False)

    bus.add_signal_receiver(owner_changed, 'NameOwnerChanged', 'org.freedesktop.DBus', 'org.freedesktop.DBus',
                            '/org/freedesktop/DBus', arg0=SCREENSAVER)
    round_trip(bus)
    print('watching', flush=True)
    if bus.name_has_owner(SCREENSAVER):
        inhibit()

    def check():
        if os.path.exists(until):
            loop.quit()
            return False
        return True

    GLib.timeout_add(20, check)
    loop.run()


def convert(method, args):
    if method == 'UnInhibit':
        return [dbus.UInt32(int(args[0]))]
    return [dbus.String(a) for a in args]


def wait_for_name(name, timeout=20):
    """The system bus, once `name` has an owner on it (a mock starting up)."""
    bus = dbus.SystemBus()
    deadline = time.monotonic() + timeout
    while not bus.name_has_owner(name):
        if time.monotonic() > deadline:
            fail(f'{name} did not appear on the test system bus within {timeout} s')
        time.sleep(0.02)
    return bus


def main():
    argv = sys.argv[1:]
    if not argv:
        fail(__doc__)
    command, args = argv[0], argv[1:]
    if command == 'setup':
        session_id, uid, name = args
        bus = wait_for_name(LOGIN1)
        print(manager(bus).AddSession(session_id, 'seat0', dbus.UInt32(int(uid)), name, True, dbus_interface=MOCK))
    elif command == 'upower-setup':
        wait_for_name(UPOWER)
    elif command == 'on-battery':
        upower = dbus.SystemBus().get_object(UPOWER, UPOWER_PATH, introspect=False)
        upower.UpdateProperties(UPOWER, {'OnBattery': dbus.Boolean(args[0] == 'true')}, dbus_interface=MOCK)
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
    elif command == 'set-locked-hint':
        session_object(dbus.SystemBus()).SetLockedHint(dbus.Boolean(args[0] == 'true'), dbus_interface=SESSION)
    elif command == 'locked-hint-calls':
        calls = session_object(dbus.SystemBus()).GetMethodCalls('SetLockedHint', dbus_interface=MOCK)
        print(json.dumps([bool(call[1][0]) for call in calls]))
    elif command == 'session-active':
        bus = dbus.SystemBus()
        if len(args) == 2:
            target = bus.get_object(LOGIN1, f'{MANAGER_PATH}/session/{args[0]}', introspect=False)
        else:
            target = session_object(bus)
        target.UpdateProperties(SESSION, {'Active': dbus.Boolean(args[-1] == 'true')}, dbus_interface=MOCK)
    elif command == 'session-set':
        target = dbus.SystemBus().get_object(LOGIN1, f'{MANAGER_PATH}/session/{args[0]}', introspect=False)
        value = dbus.Boolean(args[2] == 'true') if args[2] in ('true', 'false') else dbus.String(args[2])
        target.UpdateProperties(SESSION, {args[1]: value}, dbus_interface=MOCK)
    elif command == 'session-add':
        session_id, uid, name, display = args
        bus = dbus.SystemBus()
        m = manager(bus)
        path = m.AddSession(session_id, 'seat0', dbus.UInt32(int(uid)), name, False, dbus_interface=MOCK)
        bus.get_object(LOGIN1, path, introspect=False).UpdateProperties(
            SESSION, {'Type': dbus.String('x11'), 'Class': dbus.String('user'), 'Display': dbus.String(display)},
            dbus_interface=MOCK)
        m.EmitSignal(MANAGER, 'SessionNew', 'so', [session_id, dbus.ObjectPath(path)], dbus_interface=MOCK)
    elif command == 'sessions-add':
        count, prefix, uid, name, kind = args
        bus = dbus.SystemBus()
        m = manager(bus)
        for n in range(1, int(count) + 1):
            path = m.AddSession(f'{prefix}{n}', 'seat0', dbus.UInt32(int(uid)), name, False, dbus_interface=MOCK)
            bus.get_object(LOGIN1, path, introspect=False).UpdateProperties(
                SESSION, {'Type': dbus.String(kind), 'Class': dbus.String('user')}, dbus_interface=MOCK)
        m.EmitSignal(MANAGER, 'SessionNew', 'so', [f'{prefix}{count}', dbus.ObjectPath(path)], dbus_interface=MOCK)
    elif command == 'user-display':
        uid, session_id = args
        # The template's GetUser adds a string to the uid (a TypeError inside the mock).
        manager(dbus.SystemBus()).AddMethod(MANAGER, 'GetUser', 'u', 'o',
                                            'ret = dbus.ObjectPath("/org/freedesktop/login1/user/%d" % args[0])',
                                            dbus_interface=MOCK)
        dbus.SystemBus().get_object(LOGIN1, f'{MANAGER_PATH}/user/{uid}', introspect=False).Set(
            'org.freedesktop.login1.User', 'Display',
            dbus.Struct((session_id, dbus.ObjectPath(f'{MANAGER_PATH}/session/{session_id}')), signature='so', variant_level=1),
            dbus_interface='org.freedesktop.DBus.Properties')
    elif command == 'session-remove':
        (session_id,) = args
        manager(dbus.SystemBus()).RemoveObject(f'/org/freedesktop/login1/session/{session_id}', dbus_interface=MOCK)
    elif command == 'idle-stream':
        session_id, count, ms = args
        m = manager(dbus.SystemBus())
        m.AddMethod(MANAGER, 'IdleStream', 'sud', '', IDLE_STREAM, dbus_interface=MOCK)
        m.IdleStream(session_id, dbus.UInt32(int(count)), float(ms) / 1000, dbus_interface=MANAGER,
                     timeout=int(count) * float(ms) / 1000 + 30)
    elif command == 'changes-then-stall':
        prefix, count, seconds = args
        m = manager(dbus.SystemBus())
        m.AddMethod(MANAGER, 'ChangesThenStall', 'sud', '', CHANGES_THEN_STALL, dbus_interface=MOCK)
        m.ChangesThenStall(prefix, dbus.UInt32(int(count)), float(seconds), dbus_interface=MANAGER, timeout=float(seconds) + 30)
    elif command == 'guard-setup':
        guard_setup(args)
    elif command == 'silent':
        silent(args)
    elif command == 'fake-agent':
        fake_agent(args)
    elif command == 'terminated':
        calls = manager(dbus.SystemBus()).GetMethodCalls('TerminateSession', dbus_interface=MOCK)
        print(json.dumps([str(call[1][0]) for call in calls]))
    elif command in ('idle-inhibitor-add', 'idle-inhibitor-remove'):
        m = manager(dbus.SystemBus())
        method = 'AddIdleInhibitor' if command == 'idle-inhibitor-add' else 'RemoveIdleInhibitor'
        introspection = m.Introspect(dbus_interface='org.freedesktop.DBus.Introspectable')
        if method not in introspection:
            signature, code = ('ssuu', ADD_IDLE_INHIBITOR) if method == 'AddIdleInhibitor' else ('s', REMOVE_IDLE_INHIBITOR)
            m.AddMethod(MANAGER, method, signature, '', code, dbus_interface=MOCK)
        values = [args[0], args[1], dbus.UInt32(int(args[2])), dbus.UInt32(int(args[3]))] if method == 'AddIdleInhibitor' else [args[0]]
        getattr(m, method)(*values, dbus_interface=MANAGER)
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
    elif command in ('ss', 'pm'):
        # ss: args[0] is the path; pm: the bus name (the object is PowerManagement's one path).
        name, path, interface = (SCREENSAVER, args[0], SCREENSAVER) if command == 'ss' else (args[0], PM_INHIBIT_PATH, PM_INHIBIT)
        method = args[1]
        obj = dbus.SessionBus().get_object(name, path, introspect=False)
        try:
            answer = getattr(obj, method)(*convert(method, args[2:]), dbus_interface=interface)
        except dbus.exceptions.DBusException as e:
            fail(f'{e.get_dbus_name()}: {e.get_dbus_message()}')
        if answer is not None:
            print(json.dumps(bool(answer) if isinstance(answer, dbus.Boolean) else int(answer)))
    elif command in ('ss-inhibit', 'pm-inhibit'):
        path, app, reason = args[0], args[1], args[2]
        until = args[args.index('--until') + 1]
        record_pid()
        bus = dbus.SessionBus()
        # pm-inhibit: PATH is the bus name (the object is PowerManagement's one path).
        name, path, interface = (SCREENSAVER, path, SCREENSAVER) if command == 'ss-inhibit' else (path, PM_INHIBIT_PATH, PM_INHIBIT)
        obj = bus.get_object(name, path, introspect=False)
        try:
            cookie = obj.Inhibit(app, reason, dbus_interface=interface)
        except dbus.exceptions.DBusException as e:
            fail(f'{e.get_dbus_name()}: {e.get_dbus_message()}')
        print(int(cookie), flush=True)
        if '--name' in args:
            print(f'name {bus.get_unique_name()}', flush=True)
        wait_for_file(until)
        if '--uninhibit' in args:
            obj.UnInhibit(cookie, dbus_interface=interface)
            print('uninhibited', flush=True)
    elif command == 'ss-inhibit-many':
        ss_inhibit_many(args)
    elif command == 'ss-flood':
        ss_flood(args)
    elif command == 'ss-connect-flood':
        ss_connect_flood(args)
    elif command == 'connect-storm':
        connect_storm(args)
    elif command == 'ss-repeat':
        ss_repeat(args)
    elif command == 'ss-follow':
        ss_follow(args)
    elif command == 'forge':
        forge(args)
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
