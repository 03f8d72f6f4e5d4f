#!/usr/bin/env python3
"""Tests/Desktop/qmp.py: talks to the test VM's QEMU over QMP (stdlib only).

  qmp.py status                    query-status (running, suspended, ...)
  qmp.py wakeup                    system_wakeup (resume from S3)
  qmp.py wait-status STATE [-t S]  poll query-status until STATE (exit 1 on timeout)
  qmp.py key COMBO...              press and release each combo: shift, ret, ctrl-alt-f2
  qmp.py type TEXT                 type TEXT on the virtual PS/2 keyboard (\\n is Return)
  qmp.py move DX DY                a relative mouse motion
  qmp.py frames [-t S] [--wake] [--save DIR]
                                   screendumps as fast as QMP gives them for S seconds
                                   (after system_wakeup with --wake), each classed by its
                                   pixels: desktop (any of the solid green root shows),
                                   locker (almost all of the locker's colours) or other;
                                   prints a JSON summary (start: the wall-clock time of its 0 s)
  qmp.py wait-frame CLASS [-t S] [--save FILE]
                                   screendumps until one is of CLASS (desktop, locker,
                                   prompt, other): prints the wall-clock time of that frame
                                   and how many were taken (exit 1 on timeout: "never N")
  qmp.py powerdown | quit          the ACPI power button | stop QEMU at once

The locker's colours: XDL_LOCKER_COLOURS, hex, comma-separated (default ff0000: i3lock -c
ff0000). With XDL_PROMPT_COLOUR set (xsecurelock's XSECURELOCK_AUTH_BACKGROUND_COLOR), a
locker frame that shows that colour is a prompt frame (unset: never, as i3lock's indicator
has a blue ring).

Input goes through QEMU's PS/2 keyboard and mouse: evdev in the guest, libinput in Xorg.
Adapted from the team's lab VM (../shared/lab/vm/qmp.py).
"""
import argparse
import json
import os
import shutil
import socket
import sys
import time

DEFAULT_SOCK = os.path.join(os.environ.get("XDL_DIR", "/var/tmp/xidlelock-desktop"), "run", "qmp.sock")

KEYS = {c: (c, False) for c in "abcdefghijklmnopqrstuvwxyz0123456789"}
KEYS.update({c.upper(): (c, True) for c in "abcdefghijklmnopqrstuvwxyz"})
KEYS.update({" ": ("spc", False), "\n": ("ret", False), "-": ("minus", False), ".": ("dot", False)})
ALIASES = {"enter": "ret", "return": "ret", "space": "spc", "escape": "esc", "control": "ctrl"}


class QMPError(Exception):
    pass


class QMP:
    def __init__(self, path=DEFAULT_SOCK, timeout=15):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as e:
            raise SystemExit(f"qmp.py: cannot connect to {path}: {e} (is the VM running?)")
        self.rfile = self.sock.makefile("rb")
        self._read()
        self.cmd("qmp_capabilities")

    def _read(self):
        line = self.rfile.readline()
        if not line:
            raise QMPError("QEMU closed the QMP connection")
        return json.loads(line)

    def cmd(self, name, **args):
        msg = {"execute": name}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            r = self._read()
            if "event" in r:
                continue
            if "error" in r:
                raise QMPError(f"{name}: {r['error'].get('class')}: {r['error'].get('desc')}")
            return r.get("return")

    def status(self):
        return self.cmd("query-status")["status"]

    def send(self, *events):
        self.cmd("input-send-event", events=list(events))


def key_event(qcode, down):
    return {"type": "key", "data": {"down": down, "key": {"type": "qcode", "data": qcode}}}


def press(q, combo, hold=0.03):
    keys = [ALIASES.get(k, k) for k in combo.lower().split("-")]
    for k in keys:
        q.send(key_event(k, True))
        time.sleep(0.01)
    time.sleep(hold)
    for k in reversed(keys):
        q.send(key_event(k, False))
        time.sleep(0.01)


def colours(value):
    return [tuple(int(c.strip()[i:i + 2], 16) for i in (0, 2, 4)) for c in value.split(",")]


LOCKER_COLOURS = colours(os.environ.get("XDL_LOCKER_COLOURS") or "ff0000")
PROMPT_COLOURS = colours(os.environ["XDL_PROMPT_COLOUR"]) if os.environ.get("XDL_PROMPT_COLOUR") else []


def near(r, g, b, of):
    # 75: a solid colour, not a shade of the next one (red > 180, green and blue < 80)
    return any(abs(r - cr) <= 75 and abs(g - cg) <= 75 and abs(b - cb) <= 75 for cr, cg, cb in of)


def classify(path):
    """desktop: any sample of the solid green root; prompt: >= 90 % the locker's colours
    and the prompt's box; locker: >= 90 % the locker's colours; else other."""
    with open(path, "rb") as f:
        data = f.read()
    # P6\n<w> <h>\n<max>\n then RGB triples
    parts = data.split(b"\n", 3)
    if parts[0] != b"P6":
        return "other"
    w, h = (int(x) for x in parts[1].split())
    pix = parts[3]
    green = red = prompt = n = 0
    for j in range(25):
        y = (2 * j + 1) * h // 50
        for i in range(40):
            x = (2 * i + 1) * w // 80
            o = (y * w + x) * 3
            r, g, b = pix[o], pix[o + 1], pix[o + 2]
            n += 1
            if g > 180 and r < 80 and b < 80:
                green += 1
            elif near(r, g, b, LOCKER_COLOURS):
                red += 1
            elif near(r, g, b, PROMPT_COLOURS):
                prompt += 1
    if green:
        return "desktop"
    if red + prompt >= 0.9 * n:
        return "prompt" if prompt else "locker"
    return "other"


def frames(q, seconds, wake, save):
    path = "/dev/shm/xdl-frame.ppm" if os.path.isdir("/dev/shm") else "/tmp/xdl-frame.ppm"
    if save:
        os.makedirs(save, exist_ok=True)
    t0, start = time.monotonic(), time.time()
    if wake:
        q.cmd("system_wakeup")
    seq, firsts = [], {}
    while (t := time.monotonic() - t0) < seconds:
        q.cmd("screendump", filename=path)
        c = classify(path)
        seq.append((round(t, 3), c))
        if c not in firsts:
            firsts[c] = t
            if save:
                shutil.copyfile(path, os.path.join(save, f"first-{c}.ppm"))
    os.path.exists(path) and os.unlink(path)
    runs = []
    for t, c in seq:
        if runs and runs[-1][0] == c:
            runs[-1][1] += 1
        else:
            runs.append([c, 1, t])
    count = {c: sum(1 for _, k in seq if k == c) for c in ("desktop", "locker", "other")}
    desk = [t for t, c in seq if c == "desktop"]
    back = [t for t, c in seq if c == "locker" and desk and t > desk[-1]]
    return {
        "start": round(start, 3),
        "frames": len(seq), "seconds": round(seconds, 1), **count,
        "first_desktop_s": desk[0] if desk else None, "last_desktop_s": desk[-1] if desk else None,
        "first_locker_s": round(firsts["locker"], 3) if "locker" in firsts else None,
        "locker_after_desktop_s": back[0] if back else None,
        "runs": " ".join(f"{c}x{k}@{t:.2f}" for c, k, t in runs[:12]) + (" ..." if len(runs) > 12 else ""),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--socket", default=DEFAULT_SOCK)
    sub = ap.add_subparsers(dest="op", required=True)
    sub.add_parser("status")
    sub.add_parser("wakeup")
    p = sub.add_parser("wait-status"); p.add_argument("state"); p.add_argument("-t", "--timeout", type=float, default=30)
    p = sub.add_parser("key"); p.add_argument("combos", nargs="+")
    p = sub.add_parser("type"); p.add_argument("text")
    p = sub.add_parser("move"); p.add_argument("dx", type=int); p.add_argument("dy", type=int)
    p = sub.add_parser("frames"); p.add_argument("-t", "--seconds", type=float, default=5)
    p.add_argument("--wake", action="store_true"); p.add_argument("--save")
    p = sub.add_parser("wait-frame"); p.add_argument("kind", choices=["desktop", "locker", "prompt", "other"])
    p.add_argument("-t", "--timeout", type=float, default=30); p.add_argument("--save")
    sub.add_parser("powerdown")
    sub.add_parser("quit")
    a = ap.parse_args()
    q = QMP(a.socket)

    if a.op == "status":
        print(q.status())
    elif a.op == "wakeup":
        q.cmd("system_wakeup")
    elif a.op == "wait-status":
        end = time.monotonic() + a.timeout
        while (s := q.status()) != a.state:
            if time.monotonic() > end:
                print(s)
                sys.exit(1)
            time.sleep(0.05)
        print(s)
    elif a.op == "key":
        for combo in a.combos:
            press(q, combo)
    elif a.op == "type":
        for ch in a.text.encode().decode("unicode_escape"):
            if ch not in KEYS:
                sys.exit(f"qmp.py: cannot type {ch!r}")
            k, shifted = KEYS[ch]
            press(q, f"shift-{k}" if shifted else k, hold=0.02)
    elif a.op == "move":
        q.send({"type": "rel", "data": {"axis": "x", "value": a.dx}},
               {"type": "rel", "data": {"axis": "y", "value": a.dy}})
    elif a.op == "frames":
        print(json.dumps(frames(q, a.seconds, a.wake, a.save)))
    elif a.op == "wait-frame":
        path = "/dev/shm/xdl-wait.ppm" if os.path.isdir("/dev/shm") else "/tmp/xdl-wait.ppm"
        end, n = time.monotonic() + a.timeout, 0
        try:
            while True:
                q.cmd("screendump", filename=path)
                t, n = time.time(), n + 1
                if classify(path) == a.kind:
                    a.save and shutil.copyfile(path, a.save)
                    print(f"{t:.3f} {n}")
                    break
                if time.monotonic() > end:
                    print(f"never {n}")
                    sys.exit(1)
        finally:
            os.path.exists(path) and os.unlink(path)
    elif a.op == "powerdown":
        q.cmd("system_powerdown")
    elif a.op == "quit":
        q.cmd("quit")


if __name__ == "__main__":
    try:
        main()
    except QMPError as e:
        sys.exit(f"qmp.py: {e}")
