#!/usr/bin/env python3
"""Tests/Desktop/remote-client.py: scenarios (k) and (l)'s real clients, on the host, against the
VM's forwarded loopback ports only. Run with the venv that has vncdotool (and Pillow).

  remote-client.py vnc PORT PASSWORD ACTION...   vncdotool's client (one connection)
  remote-client.py rdp XDISPLAY ACTION...        the xfreerdp window on the host's Xvfb
                                                 (xdotool for input, its root for frames)
ACTION:
  input SECONDS INTERVAL   moves the pointer every INTERVAL s for SECONDS; prints the host
                           time and the count of each move as it is made
  nudge                    two pointer moves, to two places (one of them is a move even
                           when the pointer already is at the other)
  red [SAVE]               prints the red share of one frame (the locker: i3lock -c ff0000)
  wait-red TIMEOUT SAVE    frames as fast as they come until one is mostly red; prints its
                           host time and the seconds waited (never: none in TIMEOUT)
  wait-clear TIMEOUT       until a frame is not mostly red; same output
  type TEXT                Escape (i3lock forgets what was typed), TEXT, then Return
  unlock TIMEOUT TEXT [SAVE [STUCK]]
                           in one connection: Escape (as a user's first key: it wakes a
                           blanked screen; i3lock and slock forget what was typed), wait-red,
                           type TEXT, wait-clear; prints the seconds waited for the red frame
                           and from Return to the clear frame (never: none in TIMEOUT;
                           without red nothing is typed: "never never"). With
                           XDL_LOCKER=xsecurelock: Ctrl-U instead (Escape would close its
                           prompt; Ctrl-U wakes it and clears it), then the red frame with
                           the prompt, then TEXT and Return with no Escape. SAVE: that frame;
                           STUCK: the last frame when none after Return was clear
A frame is "mostly red" when over half its pixels are within 8 each of the locker's colours:
XDL_LOCKER_COLOURS, hex, comma-separated (default ff0000, i3lock -c ff0000; slock paints its
own, xsecurelock those it is given). xsecurelock's prompt is a box of XDL_PROMPT_COLOUR
(default 0000ff: its XSECURELOCK_AUTH_BACKGROUND_COLOR) in such a frame."""
import os, subprocess, sys, time, warnings

warnings.simplefilter("ignore")   # vncdotool's TripleDES (VncAuth) is deprecated in cryptography

RED_SHARE = 0.5
PROMPT_SHARE = 0.002  # xsecurelock's prompt box: a few hundred pixels of 1024x768 at least


def colours(value):
    return [tuple(int(c.strip()[i:i + 2], 16) for i in (0, 2, 4)) for c in value.split(",")]


LOCKER = os.environ.get("XDL_LOCKER", "i3lock")
LOCKER_COLOURS = colours(os.environ.get("XDL_LOCKER_COLOURS") or "ff0000")
PROMPT_COLOURS = colours(os.environ.get("XDL_PROMPT_COLOUR") or "0000ff")


def share(img, of):
    """The share of img's pixels within 8 in each band of one of the colours `of`."""
    from PIL import ImageChops
    bands = img.convert("RGB").resize((256, 192)).split()
    hit = None
    for colour in of:
        m = None
        for band, v in zip(bands, colour):
            b = band.point(lambda x, v=v: 255 if abs(x - v) <= 8 else 0)
            m = b if m is None else ImageChops.multiply(m, b)
        hit = m if hit is None else ImageChops.lighter(hit, m)
    return hit.histogram()[255] / (256 * 192)


def red_share(img):
    return share(img, LOCKER_COLOURS)


class Vnc:
    def __init__(self, port, password):
        from vncdotool import api
        self.api = api
        self.c = api.connect(f"127.0.0.1::{port}", password=password)

    def frame(self):
        self.c.refreshScreen()
        return self.c.screen.copy()

    def move(self, x, y):
        self.c.mouseMove(x, y)

    def key(self, name):
        self.c.keyPress(name)

    def type(self, text, escape=True):
        if escape:
            self.c.keyPress("esc")
        for ch in text:
            self.c.keyPress(ch)
            time.sleep(0.05)
        self.c.keyPress("enter")

    def close(self):
        try:
            self.c.disconnect()
        finally:
            self.api.shutdown()


class Rdp:
    def __init__(self, display):
        self.env = dict(os.environ, DISPLAY=display)
        self.display = display

    def frame(self):
        from PIL import ImageGrab
        img = ImageGrab.grab(xdisplay=self.display)
        # the xfreerdp window sits at the Xvfb's top left (no window manager), 1024x768
        return img.crop((0, 0, 1024, 768))

    def xdo(self, *args):
        subprocess.run(["xdotool", *args], env=self.env, check=True)

    def move(self, x, y):
        self.xdo("mousemove", str(x), str(y))

    def key(self, name):
        self.xdo("mousemove", "500", "400")
        self.xdo("key", {"esc": "Escape", "ctrl-u": "ctrl+u"}.get(name, name))

    def type(self, text, escape=True):
        self.xdo("mousemove", "500", "400")
        if escape:
            self.xdo("key", "Escape")
        self.xdo("type", "--delay", "60", text)
        self.xdo("key", "Return")

    def close(self):
        pass


def wait(client, want_red, timeout, save=None, prompt=False, stuck=None):
    t0, img = time.time(), None
    while time.time() - t0 < timeout:
        img = client.frame()
        t = time.time()
        if (red_share(img) > RED_SHARE) == want_red and (not prompt or share(img, PROMPT_COLOURS) > PROMPT_SHARE):
            if save:
                img.save(save)
            return f"{t:.3f} {t - t0:.2f}"
        time.sleep(0.05)
    if stuck and img is not None:
        img.save(stuck)
    return f"never {time.time() - t0:.2f}"


def main():
    a = sys.argv[1:]
    kind = a.pop(0)
    client = Vnc(a.pop(0), a.pop(0)) if kind == "vnc" else Rdp(a.pop(0))
    try:
        act = a.pop(0)
        if act == "input":
            secs, every = float(a[0]), float(a[1])
            end, i = time.time() + secs, 0
            while time.time() < end:
                i += 1
                client.move(300 + 40 * (i % 5), 300 + 30 * (i % 3))
                print(f"{time.time():.3f} {i}", flush=True)
                time.sleep(every)
        elif act == "nudge":
            for x in (300, 303):
                client.move(x, 300)
                time.sleep(0.2)
            print(f"{time.time():.3f}")
        elif act == "red":
            img = client.frame()
            if a:
                img.save(a[0])
            print(f"{red_share(img):.3f}")
        elif act == "wait-red":
            print(wait(client, True, float(a[0]), a[1] if len(a) > 1 else None))
        elif act == "wait-clear":
            print(wait(client, False, float(a[0])))
        elif act == "type":
            client.type(a[0])
            print("typed")
        elif act == "unlock":
            prompt = LOCKER == "xsecurelock"
            client.key("ctrl-u" if prompt else "esc")
            red = wait(client, True, float(a[0]), a[2] if len(a) > 2 else None, prompt=prompt).split()
            if red[0] == "never":
                print("never never")
            else:
                client.type(a[1], escape=not prompt)
                clear = wait(client, False, float(a[0]), stuck=a[3] if len(a) > 3 else None).split()
                print(f"{red[1]} {'never' if clear[0] == 'never' else clear[1]}")
        else:
            sys.exit(__doc__)
    finally:
        client.close()


if __name__ == "__main__":
    main()
