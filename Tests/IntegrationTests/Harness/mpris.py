"""The tests' MPRIS player: a media player as the session bus sees one, with
dbus-python (Debian's /usr/bin/python3), on $DBUS_SESSION_BUS_ADDRESS.

    mpris.py NAME CONTROL [--status STATUS] [--identity TEXT] [--also NAME2]

It owns org.mpris.MediaPlayer2.NAME (and org.mpris.MediaPlayer2.NAME2 with --also)
and serves /org/mpris/MediaPlayer2: org.mpris.MediaPlayer2's Identity (TEXT,
"Test Player" by default) and org.mpris.MediaPlayer2.Player's PlaybackStatus
(STATUS, Playing by default), through org.freedesktop.DBus.Properties, with
PropertiesChanged on each change, as real players send it. Told by lines appended
to the file CONTROL: `play`, `pause`, `stop` (PlaybackStatus Playing, Paused,
Stopped), `invalidate STATUS` (the new status only named as invalidated, to be
asked), `release` (its names go, the process stays on the bus), `exit`. Prints
`ready UNIQUE_NAME STATUS` once its names are owned, then the status after each
change (`Paused`), `released`.

    mpris.py forge

A forger: owns no player name, sends one PropertiesChanged saying Playing on the
players' path (a broadcast, as a player's), prints `forged UNIQUE_NAME` and stays on
the bus until killed.
"""
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

ROOT = "org.mpris.MediaPlayer2"
PLAYER = "org.mpris.MediaPlayer2.Player"
PATH = "/org/mpris/MediaPlayer2"


class MediaPlayer(dbus.service.Object):
    def __init__(self, bus, identity, status):
        super().__init__(bus, PATH)
        self.props = {ROOT: {"Identity": identity, "CanQuit": False, "CanRaise": False,
                             "HasTrackList": False, "SupportedUriSchemes": dbus.Array([], "s"),
                             "SupportedMimeTypes": dbus.Array([], "s")},
                      PLAYER: {"PlaybackStatus": status, "CanPlay": True, "CanPause": True,
                               "CanControl": True, "Volume": 0.0}}

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        return self.props[interface][name]

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return self.props.get(interface, {})

    @dbus.service.signal(dbus.PROPERTIES_IFACE, signature="sa{sv}as")
    def PropertiesChanged(self, interface, changed, invalidated):
        pass

    def set_status(self, status, invalidate=False):
        self.props[PLAYER]["PlaybackStatus"] = status
        if invalidate:
            self.PropertiesChanged(PLAYER, dbus.Dictionary({}, "sv"), ["PlaybackStatus"])
        else:
            self.PropertiesChanged(PLAYER, dbus.Dictionary({"PlaybackStatus": status}, "sv"), [])


def serve(argv):
    name, control = argv[0], argv[1]
    status, identity, also = "Playing", "Test Player", None
    rest = argv[2:]
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--status":
            status = value
        elif flag == "--identity":
            identity = value
        elif flag == "--also":
            also = value
    bus = dbus.SessionBus()
    player = MediaPlayer(bus, identity, status)
    names = [dbus.service.BusName(f"{ROOT}.{n}", bus, do_not_queue=True) for n in [name] + ([also] if also else [])]
    print("ready", bus.get_unique_name(), status, flush=True)
    loop = GLib.MainLoop()
    done = [0]

    def read_control():
        with open(control) as f:
            lines = f.read().split("\n")[:-1]
        for line in lines[done[0]:]:
            done[0] += 1
            words = line.split()
            if not words:
                continue
            if words[0] in ("play", "pause", "stop"):
                new = {"play": "Playing", "pause": "Paused", "stop": "Stopped"}[words[0]]
                player.set_status(new)
                print(new, flush=True)
            elif words[0] == "invalidate":
                player.set_status(words[1], invalidate=True)
                print(words[1], flush=True)
            elif words[0] == "release":
                for n in names:
                    bus.release_name(n.get_name())
                names.clear()
                print("released", flush=True)
            elif words[0] == "exit":
                loop.quit()
        return True

    GLib.timeout_add(50, read_control)
    loop.run()


def forge():
    bus = dbus.SessionBus()
    message = dbus.lowlevel.SignalMessage(PATH, dbus.PROPERTIES_IFACE, "PropertiesChanged")
    message.append(PLAYER, dbus.Dictionary({"PlaybackStatus": "Playing"}, "sv"), dbus.Array([], "s"),
                   signature="sa{sv}as")
    bus.send_message(message)
    bus.flush()
    print("forged", bus.get_unique_name(), flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    DBusGMainLoop(set_as_default=True)
    if sys.argv[1] == "forge":
        forge()
    else:
        serve(sys.argv[1:])
