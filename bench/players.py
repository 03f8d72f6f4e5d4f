#!/usr/bin/python3
"""Issue #31's players measurement: does each real player or presenter hold the lock
off while it plays, and how soon after it is killed does the lock come, for xidlelock
and for xss-lock beside it (the anchor: `xss-lock -- LOCKER` with `xset s LOCK 0`).

    bench/players.sh [--rows mpv,totem,...] [--agents xidlelock,xidlelock+sm,xss-lock]
                     [--lock 8] [--no-portal] [--out FILE] [--keep]

An agent entry is xss-lock, or xidlelock with an optional suffix that adds flags
(AGENT_FLAGS): xidlelock+sm runs it with --session-manager-service, xidlelock+playing
with --not-when-playing. Each entry gets a column pair; the "+ portal" pair (GTK rows)
is plain xidlelock with xdg-desktop-portal-gtk on the bus.

Each row runs on a fresh Xvfb (its own display), a private `dbus-daemon --session`
(nothing on it but what the row starts; D-Bus activation sees every installed
service file except the portals', which only the "+ portal" rows get, and except
org.freedesktop.ScreenSaver's), the agent with a locker that appends the time it
started to a file and then waits, and the application playing a video made with
ffmpeg (or a PDF, an ODP). After the application is up the script presses shift
once (that starts the idle time), checks that no lock comes for 2x the lock time,
then kills the application's whole process group with SIGKILL and waits for the
lock. It watches the bus with dbus-monitor and tells which methods the application
called, takes `xidlelock status --json` every 2 s while it plays, and reads the X
saver timeout and DPMS (`xset q`) while held and after the kill.

Installs nothing: what a row needs and is missing is said, and the row is skipped.
Runs as root (the machines of this project) or as a user; VLC refuses root, so as
root it runs as `nobody` (PLAYERS_USER), with the display and the bus opened to it.
"""
import argparse
import datetime
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_xidlelock():
    path = os.environ.get("XIDLELOCK")
    if path:
        return os.path.abspath(path)
    for kind in ("release", "debug"):
        candidate = os.path.join(ROOT, ".build", kind, "xidlelock")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


XIDLELOCK = find_xidlelock()
# Tests/TestWindow (swift build builds it beside the agent): a window for xdg-screensaver.
TESTWINDOW = next((p for p in (os.path.join(os.path.dirname(XIDLELOCK or ROOT), "TestWindow"),
                               os.path.join(ROOT, ".build", "debug", "TestWindow")) if os.access(p, os.X_OK)),
                  os.path.join(ROOT, ".build", "debug", "TestWindow"))
AS_ROOT = os.geteuid() == 0
# The integration tests' D-Bus helper (python3-dbusmock's logind, GetSessionByPID).
BUS_PY = os.path.join(ROOT, "Tests", "IntegrationTests", "Harness", "bus.py")
OTHER_USER = os.environ.get("PLAYERS_USER", "nobody")

# --------------------------------------------------------------------- the rows

# name: (label, Debian packages, programs it needs, how it is started, options)
# The command is a list; MEDIA, PDF, ODP and WINDOW are filled in.
ROWS = {
    "mpv": dict(label="mpv", packages="mpv", programs=["mpv"],
                argv=["mpv", "--no-config", "--loop-file=inf", "--vo=x11", "--hwdec=no", "--no-audio", "{MEDIA}"]),
    "vlc": dict(label="VLC", packages="vlc", programs=["cvlc"], other_user=True,
                argv=["cvlc", "--no-audio", "--loop", "--vout=xcb_x11", "--no-video-title-show", "{MEDIA}"]),
    "firefox": dict(label="Firefox", packages="firefox-esr", programs=["firefox-esr"], optional=True, other_user=True,
                    argv=["firefox-esr", "--new-instance", "--profile", "{HOME}/ff", "file://{MEDIA}"]),
    "totem": dict(label="Totem", packages="totem totem-plugins", programs=["totem"], gtk=True,
                  argv=["totem", "{MEDIA}"]),
    "evince": dict(label="Evince presentation", packages="evince", programs=["evince"], gtk=True,
                   argv=["evince", "--presentation", "{PDF}"]),
    "clapper": dict(label="Clapper", packages="clapper", programs=["clapper"], gtk=True,
                    argv=["clapper", "{MEDIA}"]),
    "impress": dict(label="LibreOffice Impress slideshow", packages="libreoffice-impress", programs=["soffice"],
                    argv=["soffice", "--norestore", "--nologo", "--show", "{ODP}"]),
    "gnome-session-inhibit": dict(label="`gnome-session-inhibit --inhibit idle`", packages="gnome-session-bin",
                                  programs=["gnome-session-inhibit"], gtk=True, windowless=True,
                                  argv=["gnome-session-inhibit", "--inhibit", "idle", "--reason", "players bench",
                                        "sleep", "3600"]),
    "xdg-screensaver": dict(label="`xdg-screensaver suspend WINDOW`", packages="xdg-utils x11-utils",
                            programs=["xdg-screensaver", "xprop"], window=True,
                            argv=["xdg-screensaver", "suspend", "{WINDOW}"]),
}
DEFAULT_ROWS = ["mpv", "vlc", "firefox", "totem", "evince", "clapper", "impress", "gnome-session-inhibit",
                "xdg-screensaver"]
# Programs every row needs (Debian package in brackets).
BASE = {"Xvfb": "xvfb", "dbus-daemon": "dbus", "dbus-monitor": "dbus-bin", "dbus-send": "dbus-bin",
        "xset": "x11-xserver-utils", "xdotool": "xdotool", "ffmpeg": "ffmpeg", "setpriv": "util-linux"}
PORTAL = ["/usr/libexec/xdg-desktop-portal", "/usr/libexec/xdg-desktop-portal-gtk"]
# xidlelock+SUFFIX in --agents: the flags the suffix adds.
AGENT_FLAGS = {"": [], "sm": ["--session-manager-service"], "playing": ["--not-when-playing"]}


def agent_kind(entry):
    """xidlelock or xss-lock, and the flags (xidlelock+sm: --session-manager-service)."""
    kind, _, suffix = entry.partition("+")
    return kind, AGENT_FLAGS.get(suffix)

# Method calls worth naming: who an application asks to hold the screen on.
WATCHED = re.compile(r"ScreenSaver|SessionManager|PowerManagement|portal\.Inhibit|impl\.portal\.Inhibit|"
                     r"org\.xfce\.Session|org\.mate\.SessionManager|login1|Mpris|Inhibit")

# --------------------------------------------------------------------- processes

started = []


def start(argv, env, cwd, log, user=None):
    """Starts argv in a session of its own (so that its whole group can be killed)."""
    out = open(log, "ab")
    if user is not None:
        pw = pwd.getpwnam(user)
        argv = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"] + argv
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                         start_new_session=True)
    out.close()
    started.append(p)
    return p


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def wait_for(condition, timeout, every=0.05):
    """True once condition() holds, False after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(every)


def run(argv, env, timeout=20):
    try:
        r = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out"


def kill_leftovers(marker):
    """Every process whose environment names this run's directory (the bus address, the
    runtime directory): services the bus started, what an application forked off."""
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker.encode() in f.read():
                    os.kill(int(name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass

# --------------------------------------------------------------------- media


def make_media(directory):
    """A 5-minute video (VP8 in WebM, no sound: no sound server needed), a 3-page PDF
    and a 3-slide ODP (flat XML), made once into `directory`."""
    os.makedirs(directory, exist_ok=True)
    video = os.path.join(directory, "film.webm")
    if not os.path.exists(video):
        r = subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                            "testsrc=size=320x240:rate=10", "-t", "300", "-c:v", "libvpx", "-b:v", "100k",
                            "-an", video + ".tmp.webm"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"players: ffmpeg could not make the test video: {r.stderr}")
        os.rename(video + ".tmp.webm", video)
    pdf = os.path.join(directory, "slides.pdf")
    if not os.path.exists(pdf):
        with open(pdf, "wb") as f:
            f.write(minimal_pdf(3))
    odp = os.path.join(directory, "slides.fodp")
    if not os.path.exists(odp):
        with open(odp, "w") as f:
            f.write(minimal_fodp(3))
    for path in (directory, video, pdf, odp):
        os.chmod(path, 0o755 if os.path.isdir(path) else 0o644)
    return video, pdf, odp


def minimal_pdf(pages):
    objects = ["<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(pages))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>")
    font = 3 + 2 * pages
    for i in range(pages):
        stream = f"BT /F1 48 Tf 72 400 Td (Slide {i + 1}) Tj ET"
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 640 480] /Contents {4 + 2 * i} 0 R "
                       f"/Resources << /Font << /F1 {font} 0 R >> >> >>")
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def minimal_fodp(slides):
    pages = "".join(
        f'<draw:page draw:name="s{i}" draw:master-page-name="Default"><draw:frame svg:x="2cm" svg:y="2cm" '
        f'svg:width="20cm" svg:height="4cm"><draw:text-box><text:p>Slide {i}</text:p></draw:text-box>'
        f'</draw:frame></draw:page>' for i in range(1, slides + 1))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
            'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
            'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
            'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
            'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
            'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
            'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
            'office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">'
            '<office:automatic-styles><style:page-layout style:name="PM1"><style:page-layout-properties '
            'fo:page-width="28cm" fo:page-height="15.75cm"/></style:page-layout></office:automatic-styles>'
            '<office:master-styles><style:master-page style:name="Default" style:page-layout-name="PM1"/>'
            '</office:master-styles>'
            f'<office:body><office:presentation>{pages}</office:presentation></office:body></office:document>\n')

# --------------------------------------------------------------------- one run


class Run:
    """One row with one agent: Xvfb, a private session bus, the agent, the application."""

    def __init__(self, row, agent, portal, lock, media, keep):
        self.row, self.spec, self.agent, self.portal, self.lock = row, ROWS[row], agent, portal, lock
        self.kind, self.flags = agent_kind(agent)
        self.video, self.pdf, self.odp = media
        self.keep = keep
        # No "+" in the path: the bus addresses made from it would need it escaped.
        self.dir = tempfile.mkdtemp(prefix=f"players-{row}-{agent.replace('+', '-')}-")
        os.chmod(self.dir, 0o755)
        self.result = dict(row=row, agent=agent, portal=portal)

    def path(self, name):
        return os.path.join(self.dir, name)

    def log(self, what):
        print(f"  [{self.row} / {self.agent}{' + portal' if self.portal else ''}] {what}", file=sys.stderr, flush=True)

    # ---- set-up

    def start_xvfb(self):
        with open(self.path("xvfb.display"), "w") as out:
            p = subprocess.Popen(["Xvfb", "-displayfd", "1", "-noreset", "-nolisten", "tcp", "-ac",
                                  "-screen", "0", "1024x768x24"], stdout=out, stderr=open(self.path("xvfb.log"), "w"),
                                 start_new_session=True, cwd=self.dir)
        started.append(p)
        number = wait_for(lambda: open(self.path("xvfb.display")).read().strip()
                          if open(self.path("xvfb.display")).read().endswith("\n") else None, 20)
        if not number:
            raise RuntimeError("Xvfb printed no display number: " + open(self.path("xvfb.log")).read())
        self.display = ":" + number

    def service_dir(self):
        """Installed D-Bus session services, less the portals (unless this row has them)
        and less any org.freedesktop.ScreenSaver (an installed xidlelock's)."""
        services = self.path("services")
        os.makedirs(services)
        for base in ("/usr/share/dbus-1/services", "/usr/local/share/dbus-1/services"):
            if not os.path.isdir(base):
                continue
            for name in os.listdir(base):
                text = open(os.path.join(base, name), errors="replace").read()
                portal = "portal" in name.lower() or "portal" in text.lower()
                if "org.freedesktop.ScreenSaver" in text or (portal and not self.portal):
                    continue
                if not os.path.exists(os.path.join(services, name)):
                    os.symlink(os.path.join(base, name), os.path.join(services, name))
        return services

    def start_bus(self):
        socket = self.path("session.bus")
        config = self.path("session-bus.conf")
        with open(config, "w") as f:
            f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{self.service_dir()}</servicedir>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
""")
        p = start(["dbus-daemon", "--nofork", f"--config-file={config}", "--print-address=1"], self.base_env(),
                  self.dir, self.path("bus.log"))
        if not wait_for(lambda: os.path.exists(socket), 20):
            raise RuntimeError("dbus-daemon did not start: " + open(self.path("bus.log")).read())
        os.chmod(socket, 0o777)  # the other user's application connects too
        self.bus = f"unix:path={socket}"

    def start_system_bus(self):
        """A second daemon as the system bus, with python3-dbusmock's logind template on it
        holding session c1 of this user on this display (xss-lock 0.3.0 aborts without
        logind; the agent follows it too). Processes of the session are marked with
        MOCK_LOGIND_SESSION=c1 (the harness's GetSessionByPID reads it)."""
        socket = self.path("system.bus")
        start(["dbus-daemon", "--session", "--nofork", f"--address=unix:path={socket}"], self.base_env(), self.dir,
              self.path("system-bus.log"))
        if not wait_for(lambda: os.path.exists(socket), 20):
            raise RuntimeError("the system dbus-daemon did not start: " + open(self.path("system-bus.log")).read())
        self.system_bus = f"unix:path={socket}"
        env = self.base_env()
        start([sys.executable, "-m", "dbusmock", "--system", "--template", "logind"], env, self.dir,
              self.path("logind.log"))
        code, out, err = run([sys.executable, BUS_PY, "guard-setup", "c1", str(os.getuid()),
                              pwd.getpwuid(os.getuid()).pw_name, self.display], env, 30)
        if code != 0:
            raise RuntimeError("logind's mock: " + out + err + open(self.path("logind.log")).read())

    def base_env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("XIDLELOCK", "DBUS_", "XDG_", "WAYLAND", "GNOME_", "DESKTOP_SESSION"))
               and k not in ("DISPLAY", "JOURNAL_STREAM", "SESSION_MANAGER", "XAUTHORITY")}
        runtime = self.path("run")
        os.makedirs(runtime, mode=0o700, exist_ok=True)
        home = self.path("home")
        os.makedirs(home, exist_ok=True)
        env.update(HOME=home, XDG_RUNTIME_DIR=runtime, XDG_CONFIG_HOME=os.path.join(home, ".config"),
                   XDG_CACHE_HOME=os.path.join(home, ".cache"), XDG_DATA_HOME=os.path.join(home, ".local/share"),
                   # The run's own system bus: the machine's (and its logind) stays out.
                   DBUS_SYSTEM_BUS_ADDRESS="unix:path=" + self.path("system.bus"),
                   XDG_SESSION_ID="c1", MOCK_LOGIND_SESSION="c1", PLAYERS_RUN=self.dir)
        if getattr(self, "display", None):
            env["DISPLAY"] = self.display
        if getattr(self, "bus", None):
            env["DBUS_SESSION_BUS_ADDRESS"] = self.bus
        return env

    def app_env(self, user):
        env = self.base_env()
        env.update(GDK_BACKEND="x11", NO_AT_BRIDGE="1", LIBGL_ALWAYS_SOFTWARE="1", GSK_RENDERER="cairo",
                   GTK_A11Y="none", SAL_USE_VCLPLUGIN="gen")
        if user is not None:
            # The other user's own home and runtime directory.
            for var, name in (("HOME", "home-user"), ("XDG_RUNTIME_DIR", "run-user")):
                d = self.path(name)
                os.makedirs(d, mode=0o700, exist_ok=True)
                pw = pwd.getpwnam(user)
                os.chown(d, pw.pw_uid, pw.pw_gid)
                env[var] = d
            env["XDG_CONFIG_HOME"] = os.path.join(env["HOME"], ".config")
            env["XDG_CACHE_HOME"] = os.path.join(env["HOME"], ".cache")
            env["XDG_DATA_HOME"] = os.path.join(env["HOME"], ".local/share")
        return env

    def names(self):
        code, out, _ = run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                            "/org/freedesktop/DBus", "org.freedesktop.DBus.ListNames"], self.base_env())
        return set(re.findall(r'string "(:[0-9.]+)"', out))

    def label_connections(self):
        """The process behind each connection on the bus now (for naming who called what)."""
        for name in self.names():
            if name in self.who:
                continue
            code, out, _ = run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                "/org/freedesktop/DBus", "org.freedesktop.DBus.GetConnectionUnixProcessID",
                                f"string:{name}"], self.base_env(), 5)
            pid = re.search(r"uint32 (\d+)", out)
            if pid:
                try:
                    self.who[name] = open(f"/proc/{pid.group(1)}/comm").read().strip()
                except OSError:
                    pass

    def start_monitor(self):
        # The names already on the bus (the agent's): their calls are not the application's.
        self.before = self.names()
        self.who = {}
        start(["dbus-monitor", "--address", self.bus], self.base_env(), self.dir, self.path("monitor.log"))

    def locker_command(self):
        return f"date +%s.%N >> {self.path('lock.times')}; exec sleep 3600"

    def start_agent(self):
        env = self.base_env()
        if self.kind == "xidlelock":
            self.socket = self.path("agent.sock")
            start([XIDLELOCK, "--lock-after", f"{self.lock}s", "--locker", self.locker_command(),
                   "--socket", self.socket] + self.flags, env, self.dir, self.path("agent.log"))
            ok = wait_for(lambda: run([XIDLELOCK, "status", "--socket", self.socket], env, 5)[0] == 0, 20)
            if not ok:
                raise RuntimeError("xidlelock did not answer: " + open(self.path("agent.log")).read())
            # Its bus service (on by default) is up once it says so.
            wait_for(lambda: "org.freedesktop.ScreenSaver" in open(self.path("agent.log")).read(), 10)
            if "--session-manager-service" in self.flags and not wait_for(
                    lambda: self.has_name("org.gnome.SessionManager"), 10, 0.2):
                raise RuntimeError("org.gnome.SessionManager did not appear on the bus: "
                                   + open(self.path("agent.log")).read())
        else:
            run(["xset", "s", str(self.lock), "0"], env)
            p = start(["xss-lock", "--", "sh", "-c", self.locker_command()], env, self.dir, self.path("agent.log"))
            # Ready once it is an X client (it selects the saver's events at start).
            time.sleep(0.5)
            if p.poll() is not None:
                raise RuntimeError("xss-lock exited: " + open(self.path("agent.log")).read())

    def has_name(self, name):
        return "boolean true" in run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                      "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                      f"string:{name}"], self.base_env(), 5)[1]

    def start_portal(self):
        env = self.app_env(None)
        for program in PORTAL:
            start([program], env, self.dir, self.path(os.path.basename(program) + ".log"))
        names = ["org.freedesktop.portal.Desktop", "org.freedesktop.impl.portal.desktop.gtk"]
        for name in names:
            ok = wait_for(lambda: run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                       "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                       f"string:{name}"], env, 5)[1].find("boolean true") >= 0, 20, 0.2)
            if not ok:
                raise RuntimeError(f"{name} did not appear on the bus")

    # ---- what is seen

    def locks(self):
        try:
            return [float(t) for t in open(self.path("lock.times")).read().split()]
        except FileNotFoundError:
            return []

    def holders(self):
        if self.kind != "xidlelock":
            return None
        code, out, _ = run([XIDLELOCK, "status", "--json", "--socket", self.socket], self.base_env(), 5)
        if code != 0:
            return None
        try:
            status = json.loads(out)
        except ValueError:
            return None
        return [f"{i.get('who')} [{i.get('source')}]" + (f": {i.get('why')}" if i.get("why") else "")
                for i in status.get("inhibitors", [])]

    def saver(self):
        code, out, _ = run(["xset", "q"], self.base_env())
        timeout = re.search(r"timeout:\s+(\d+)", out)
        dpms = re.search(r"DPMS is (\w+)", out)
        return f"saver timeout {timeout.group(1) if timeout else '?'}" + (f", DPMS {dpms.group(1)}" if dpms else "")

    def app_calls(self):
        """The watched method calls (and their errors) made by connections that came after the agent."""
        text = open(self.path("monitor.log"), errors="replace").read()
        calls, serials, errors = [], {}, []
        blocks = re.split(r"\n(?=\S)", text)
        for block in blocks:
            head = block.split("\n", 1)[0]
            sender = re.search(r"sender=(\S+)", head)
            sender = sender.group(1) if sender else ""
            if head.startswith("method call"):
                iface = re.search(r"interface=([^;]+)", head)
                member = re.search(r"member=(\S+)", head)
                dest = re.search(r"destination=(\S+)", head)
                serial = re.search(r"serial=(\d+)", head)
                name = f"{iface.group(1) if iface else '?'}.{member.group(1) if member else '?'}"
                args = re.findall(r'string "([^"]*)"|uint32 (\d+)', block.split("\n", 1)[1] if "\n" in block else "")
                argtext = ", ".join(a or b for a, b in args)
                if member and member.group(1) in ("NameHasOwner", "GetNameOwner", "StartServiceByName") \
                        and WATCHED.search(argtext):
                    entry = f"{member.group(1)}({argtext})"
                elif WATCHED.search(name) or (dest and WATCHED.search(dest.group(1))):
                    entry = f"{dest.group(1) if dest else '?'} {name}({argtext})"
                else:
                    continue
                when = re.search(r"time=([0-9.]+)", head)
                if sender in self.before or (when and float(when.group(1)) < self.t_start):
                    continue
                entry = f"{self.who.get(sender, sender)}: {entry}"
                key = (sender, serial.group(1) if serial else "")
                serials[key] = entry
                calls.append(entry)
            elif head.startswith("error"):
                reply = re.search(r"reply_serial=(\d+)", head)
                dest = re.search(r"destination=(\S+)", head)
                name = re.search(r"error_name=(\S+)", head)
                key = (dest.group(1) if dest else "", reply.group(1) if reply else "")
                if key in serials:
                    errors.append(f"{serials[key]} → {name.group(1) if name else 'error'}")
        seen = []
        for entry in calls:
            if entry not in seen:
                seen.append(entry)
        failed = []
        for entry in errors:
            if entry not in failed:
                failed.append(entry)
        return seen, failed

    # ---- the measurement

    def app_argv(self):
        # A copy of its own: LibreOffice killed mid-show leaves its lock file beside the
        # document, and the next start would ask "Document in Use".
        odp = self.path(os.path.basename(self.odp))
        shutil.copy(self.odp, odp)
        os.chmod(odp, 0o666)
        values = dict(MEDIA=self.video, PDF=self.pdf, ODP=odp, WINDOW=getattr(self, "window", ""),
                      HOME=self.app_home)
        return [a.format(**values) for a in self.spec["argv"]]

    def visible_window(self, env):
        """A mapped window other than the row's own TestWindow."""
        code, out, _ = run(["xdotool", "search", "--onlyvisible", "--name", "."], env, 5)
        return code == 0 and any(w != getattr(self, "window", None) for w in out.split())

    def measure(self):
        self.start_xvfb()
        self.start_system_bus()
        self.start_bus()
        self.start_agent()
        self.start_monitor()
        if self.portal:
            self.start_portal()
        user = OTHER_USER if (self.spec.get("other_user") and AS_ROOT) else None
        env = self.app_env(user)
        self.app_home = env["HOME"]
        if self.spec.get("window"):
            if not os.access(TESTWINDOW, os.X_OK):
                raise RuntimeError(f"{TESTWINDOW} is missing (swift build builds it beside xidlelock)")
            self.window_process = None
            code, out, err = run([TESTWINDOW, "create", "players"], env)
            if code != 0:
                raise RuntimeError("TestWindow: " + err)
            self.window = out.strip()
            run(["xdotool", "windowmap", self.window], env)
        t_start = self.t_start = time.time()
        app = start(self.app_argv(), env, self.dir, self.path("app.log"), user)
        self.app = app
        # Input every 2 s until the application is up (a window of its own, or 1 s after
        # the start for a windowless one) and 4 s more for it to start playing; the hold
        # window starts at the last input.
        deadline = time.monotonic() + 60
        up = None
        while time.monotonic() < deadline:
            run(["xdotool", "key", "shift"], self.base_env())
            last_input = time.time()
            if app.poll() is not None and not self.spec.get("window"):
                break
            if up is None and ((self.spec.get("windowless") or self.spec.get("window")) and time.time() - t_start > 1
                               or self.visible_window(env)):
                up = time.monotonic()
            if up is not None and time.monotonic() - up >= 4:
                break
            time.sleep(2)
        self.result["start_s"] = round(time.time() - t_start, 1)
        if self.locks():
            self.result["held"] = "locked before the application was up"
            return
        exited = None
        if app.poll() is not None and not self.spec.get("window"):
            # It gave up (gnome-session-inhibit without a session manager): nothing can hold.
            exited = f"it exited with status {app.returncode} at start"
            self.result["app_log"] = open(self.path("app.log"), errors="replace").read()[-600:]
        elif up is None:
            self.result["held"] = "no window within 60 s"
            return
        # Held while it plays: no lock for 2x the lock time after the last input.
        hold_until = last_input + 2 * self.lock
        self.result["status"] = []
        polls = shown = 0
        while time.time() < hold_until and not self.locks():
            h = self.holders()
            if h is not None:
                polls += 1
                shown += bool(h)
                for item in h:
                    if item not in self.result["status"]:
                        self.result["status"].append(item)
            self.label_connections()
            wait_for(self.locks, min(2.0, max(0.0, hold_until - time.time())))
        self.label_connections()
        self.result["status_shown"] = f"{shown}/{polls}" if self.kind == "xidlelock" else None
        self.result["saver_held"] = self.saver()
        locks = self.locks()
        if locks:
            self.result["held"] = (f"**locked mid-show** ({locks[0] - last_input:.1f} s after the last input"
                                   + (f"; {exited}" if exited else "") + ")")
            self.result["after_kill"] = "–"
            self.result["calls"], self.result["errors"] = self.app_calls()
            return
        self.result["held"] = "held" + (f" ({exited})" if exited else "")
        # The end: SIGKILL to the application's whole group (for xdg-screensaver, the
        # window goes: its helper loop sees that).
        if self.spec.get("window"):
            run([TESTWINDOW, "destroy", self.window], env)
        else:
            kill_group(app)
        t_kill = time.time()
        limit = max(30, 3 * self.lock)
        wait_for(self.locks, limit)
        locks = self.locks()
        self.result["after_kill"] = f"{locks[0] - t_kill:.1f} s" if locks else f"never (waited {limit} s)"
        self.result["saver_after"] = self.saver()
        if not locks and self.kind == "xidlelock":
            # What doctor says of the hold that outlived its program (LibreOffice's saver off).
            code, out, err = run([XIDLELOCK, "doctor", "--socket", self.socket], self.base_env(), 20)
            with open(self.path("doctor.txt"), "w") as f:
                f.write(out + err)
            held = [line.strip() for line in out.splitlines() if "held off" in line or "xset s on" in line]
            self.result["doctor"] = held
            if any("xset s on" in line for line in held):
                self.result["after_kill"] = (f"never (waited {limit} s): the X server keeps the saver off; "
                                             "doctor says `xset s on` ends it")
        self.result["calls"], self.result["errors"] = self.app_calls()

    def cleanup(self):
        for p in list(started):
            kill_group(p)
        for p in list(started):
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        started.clear()
        kill_leftovers(self.dir)
        if self.keep:
            print(f"  kept {self.dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

# --------------------------------------------------------------------- main


def missing_for(row):
    spec = ROWS[row]
    missing = [p for p in spec["programs"] if shutil.which(p) is None]
    return missing


def version(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS), help="comma-separated: " + ", ".join(ROWS))
    parser.add_argument("--agents", default="xidlelock,xss-lock")
    parser.add_argument("--lock", type=int, default=8, help="lock time in seconds (default 8)")
    parser.add_argument("--no-portal", action="store_true", help="skip the rows with xdg-desktop-portal-gtk")
    parser.add_argument("--out", help="also write the markdown here")
    parser.add_argument("--keep", action="store_true", help="keep each run's directory (logs, monitor.log)")
    args = parser.parse_args()
    rows = [r for r in args.rows.split(",") if r]
    agents = [a for a in args.agents.split(",") if a]
    for r in rows:
        if r not in ROWS:
            sys.exit(f"players: no row '{r}' (rows: {', '.join(ROWS)})")

    missing = {p: pkg for p, pkg in BASE.items() if shutil.which(p) is None}
    if "xss-lock" in agents and shutil.which("xss-lock") is None:
        missing["xss-lock"] = "xss-lock"
    for a in agents:
        kind, flags = agent_kind(a)
        if kind not in ("xidlelock", "xss-lock") or flags is None or (kind == "xss-lock" and "+" in a):
            sys.exit(f"players: no agent '{a}' (xss-lock, or xidlelock[+{'|+'.join(f for f in AGENT_FLAGS if f)}])")
    if any(agent_kind(a)[0] == "xidlelock" for a in agents) and XIDLELOCK is None:
        sys.exit("players: no xidlelock binary: run `swift build` (or `make release`), or set XIDLELOCK=path")
    if subprocess.run([sys.executable, "-c", "import dbus, dbusmock"], capture_output=True).returncode != 0:
        missing[f"{sys.executable}'s dbus and dbusmock"] = "python3-dbusmock"
    if missing:
        sys.exit("players: missing " + ", ".join(missing) + "; install with: apt-get install -y "
                 + " ".join(sorted(set(missing.values()))))
    skipped = {}
    for r in rows:
        m = missing_for(r)
        if m:
            skipped[r] = f"not installed ({', '.join(m)}; apt-get install {ROWS[r]['packages']})"
    want_portal = not args.no_portal and "xidlelock" in agents
    if want_portal and not all(os.access(p, os.X_OK) for p in PORTAL):
        print("players: no portal rows: apt-get install xdg-desktop-portal xdg-desktop-portal-gtk", file=sys.stderr)
        want_portal = False
    for r, why in skipped.items():
        print(f"players: {ROWS[r]['label']}: {why}", file=sys.stderr)

    media = make_media(os.path.join(tempfile.gettempdir(), "players-media"))
    results = {}
    for r in rows:
        if r in skipped:
            continue
        variants = [(a, False) for a in agents]
        if want_portal and ROWS[r].get("gtk"):
            variants.append(("xidlelock", True))
        for agent, portal in variants:
            run_ = Run(r, agent, portal, args.lock, media, args.keep)
            try:
                run_.measure()
            except Exception as e:  # a row that cannot be set up says why
                run_.result["held"] = f"error: {e}"
            finally:
                run_.cleanup()
            res = run_.result
            run_.log(f"{res.get('held')}; after kill: {res.get('after_kill', '–')}; status: {res.get('status')}; "
                     f"calls: {res.get('calls')} errors: {res.get('errors')}")
            results[(r, agent, portal)] = res

    text = report(rows, agents, want_portal, skipped, results, args.lock)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)


def report(rows, agents, want_portal, skipped, results, lock):
    L = []
    binary = "–" if not XIDLELOCK else os.path.relpath(XIDLELOCK, ROOT) if XIDLELOCK.startswith(ROOT) else XIDLELOCK
    build = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %cs"], capture_output=True, text=True).stdout.strip()
    L.append(f"Measured {datetime.date.today()} by `bench/players.sh` (lock time {lock} s; held = no lock for "
             f"{2 * lock} s after the last input while the application plays; then `kill -9` of its process group, "
             f"and the time to the lock). xidlelock {binary} "
             f"at {build}; xss-lock {version('xss-lock')} with `xset s {lock} 0`.")
    for a in agents:
        kind, flags = agent_kind(a)
        if flags:
            L.append(f"`{a}` is xidlelock with `{' '.join(flags)}` (no portal).")
    L.append("")
    head = ["application"]
    for a in agents:
        head.append(a)
        head.append(f"{a}: lock after kill")
    if want_portal:
        head += ["xidlelock + portal", "+ portal: lock after kill"]
    L.append("| " + " | ".join(head) + " |")
    L.append("|" + " --- |" * len(head))
    for r in rows:
        label = ROWS[r]["label"]
        pkg = ROWS[r]["packages"].split()[0]
        if r in skipped:
            L.append(f"| {label} | " + " | ".join([skipped[r]] + ["–"] * (len(head) - 2)) + " |")
            continue
        cells = [f"{label} {version(pkg)}"]
        for a in agents:
            res = results.get((r, a, False), {})
            cells += [res.get("held", "–"), res.get("after_kill", "–")]
        if want_portal:
            if ROWS[r].get("gtk"):
                res = results.get((r, "xidlelock", True), {})
                cells += [res.get("held", "–"), res.get("after_kill", "–")]
            else:
                cells += ["", ""]
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append("What each held run showed: xidlelock's `status` (inhibitors seen in the polls every 2 s while it "
             "played; shown in N of M polls), the X saver settings while held and after the kill, and the "
             "application's method calls on the session bus (those about inhibiting, with the errors they got):")
    L.append("")
    for r in rows:
        for a in agents + (["xidlelock+portal"] if want_portal and ROWS[r].get("gtk") else []):
            portal = a.endswith("+portal")
            res = results.get((r, a.replace("+portal", ""), portal))
            if not res:
                continue
            parts = []
            if res.get("status") is not None and a.startswith("xidlelock"):
                parts.append(f"status: {'; '.join(res['status']) or 'no inhibitor'} (shown {res.get('status_shown')})")
            if res.get("saver_held"):
                parts.append(f"while held {res['saver_held']}"
                             + (f", after {res['saver_after']}" if res.get("saver_after") else ""))
            if res.get("calls") is not None:
                parts.append("calls: " + ("; ".join(f"`{c}`" for c in res["calls"]) or "none"))
                if res.get("errors"):
                    parts.append("errors: " + "; ".join(f"`{e}`" for e in res["errors"]))
            if res.get("doctor"):
                parts.append("doctor after the kill: " + "; ".join(f"`` {d} ``" for d in res["doctor"]))
            if res.get("app_log"):
                parts.append("app log: `" + res["app_log"].strip().replace("\n", " ⏎ ")[-300:] + "`")
            L.append(f"- {ROWS[r]['label']}, {a}: " + (". ".join(parts) or "–"))
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        for p in started:
            kill_group(p)
        sys.exit(130)
