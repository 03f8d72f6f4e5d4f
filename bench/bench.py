#!/usr/bin/env python3
"""xidlelock benchmarks, side by side with xautolock, xss-lock and xprintidle.

Run through `make bench` (full, ~3 min) or `make bench QUICK=1` (~1 min): that installs
the packages and builds the release binaries first. This script then compiles
bench/xbench.c, starts private `Xvfb -noreset -nolisten tcp -displayfd` servers, measures,
prints a table and rewrites BENCHMARKS.md. Python standard library only.

Every process it starts runs in its own session and is ended by its pid (process
group) on exit, on failure and on Ctrl-C; each also gets PR_SET_PDEATHSIG so that a
harness killed outright leaves no Xvfb behind.

The machine is shared and noisy: every figure is a median over repeats with its spread.
"""
import argparse
import socket as socketlib
import ctypes
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
XIDLELOCK = os.path.join(ROOT, ".build", "release", "xidlelock")
# The tests' MPRIS player (dbus-python): a media player that says Playing.
MPRIS_PY = os.path.join(ROOT, "Tests", "IntegrationTests", "Harness", "mpris.py")
CORE_BENCH = os.path.join(ROOT, ".build", "release", "IdleCoreBench")
XBENCH = os.path.join(RESULTS, "xbench")
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---------------------------------------------------------------- processes

_started = []  # Popen objects, each the leader of its own session
_libc = ctypes.CDLL(None, use_errno=True)


def _child_setup():
    # Runs in the child between fork and exec: die with the harness, no core dumps
    # (xss-lock aborts on an assertion without logind, see the deadline test).
    _libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def start(argv, env=None, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
    """Starts argv in its own session, remembered for cleanup. Main thread only
    (PR_SET_PDEATHSIG fires when the *thread* that forked exits)."""
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                         start_new_session=True, preexec_fn=_child_setup)
    _started.append(p)
    return p


def stop(p, grace=1.0):
    """Ends p's whole process group by its pid: SIGTERM, then SIGKILL after `grace`.
    Only while p is not yet reaped: until then its pid (and so its group id) cannot
    belong to anyone else, even if p has exited."""
    if p.returncode is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
    if p in _started:
        _started.remove(p)


def stop_all():
    for p in reversed(list(_started)):
        stop(p, grace=0.5)


def _on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


class Xvfb:
    """A private X server on a free display, found with -displayfd. `extra`: more
    arguments (a screen's size); `wait=False` returns at once, and `ready()` waits
    (several servers starting together)."""

    def __init__(self, extra=(), wait=True):
        r, w = os.pipe()
        self.proc = subprocess.Popen(
            ["Xvfb", "-noreset", "-nolisten", "tcp", *extra, "-displayfd", str(w)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(w,), start_new_session=True, preexec_fn=_child_setup)
        _started.append(self.proc)
        os.close(w)
        self._displayfd = r
        self.pid = self.proc.pid
        if wait:
            self.ready()

    def ready(self, timeout=15):
        r = self._displayfd
        number = b""
        deadline = time.monotonic() + timeout
        os.set_blocking(r, False)
        while not number.endswith(b"\n"):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                os.close(r)
                raise RuntimeError("Xvfb did not start")
            try:
                chunk = os.read(r, 16)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            if not chunk:
                time.sleep(0.01)
            number += chunk
        os.close(r)
        self.display = ":" + number.decode().strip()
        self.env = dict(os.environ, DISPLAY=self.display)
        self.env.pop("XAUTHORITY", None)

    def run(self, argv, **kw):
        return subprocess.run(argv, env=self.env, check=True, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60, **kw)

    def close(self):
        stop(self.proc)


# ---------------------------------------------------------------- /proc readings

def tasks(pid):
    try:
        return os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []


def per_task(pid, read):
    """{tid: read(pid, tid)} over the threads of pid alive now."""
    out = {}
    for tid in tasks(pid):
        try:
            out[tid] = read(pid, tid)
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            pass
    return out


def task_cpu_ns(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


def task_switches(pid, tid):
    total = 0
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def grown(before, after):
    """What per-thread counters grew by between two readings: a thread born in between
    counts from zero; one that ended in between is lost (its last counts are unknown),
    never subtracted."""
    return sum(v - before.get(tid, 0) for tid, v in after.items())


def cpu_ns(pid):
    """On-CPU ns per thread of pid (first field of /proc/PID/task/TID/schedstat)."""
    return per_task(pid, task_cpu_ns)


def ctx_switches(pid):
    """Voluntary + involuntary context switches per thread of pid."""
    return per_task(pid, task_switches)


def memory_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                out[key] = int(line.split()[1])
    return out


def cpu_stall_us():
    """Microseconds, since boot, in which some runnable task waited for a CPU
    (/proc/pressure/cpu, "some" total): how busy the shared machine was."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None


def settle(pids, quiet_for=0.15, step=0.03, limit=3.0):
    """Waits until none of pids uses CPU for `quiet_for` seconds (or `limit` passes)."""
    end = time.monotonic() + limit
    last = [cpu_ns(p) for p in pids]
    still_since = time.monotonic()
    while time.monotonic() < end:
        time.sleep(step)
        now = [cpu_ns(p) for p in pids]
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_for:
            return


def wait_for(predicate, timeout, step=0.005):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# ---------------------------------------------------------------- statistics

def median(xs):
    return statistics.median(xs) if xs else float("nan")


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(xs):
    return {"median": median(xs), "min": min(xs), "max": max(xs),
            "p25": pct(xs, 0.25), "p75": pct(xs, 0.75), "n": len(xs)}


def fmt(x, digits=None):
    if x != x:
        return "n/a"
    if x == 0:
        return "0"
    if digits is None:
        digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2 if abs(x) >= 1 else 3
    return f"{x:,.{digits}f}"


def cell(s, unit="", digits=None):
    """'median (min–max)'."""
    return f"{fmt(s['median'], digits)}{unit} ({fmt(s['min'], digits)}–{fmt(s['max'], digits)})"


def ratio(a, b):
    if b == 0 or a != a or b != b:
        return "n/a"
    return f"{a / b:.2f}×"


# ---------------------------------------------------------------- the agents

def agent_argv(name, locker="true", lock_after="1h", extra=()):
    if name == "xidlelock":
        return [XIDLELOCK, "--lock-after", lock_after, "--locker", locker, *extra]
    if name == "xautolock":
        return ["xautolock", "-time", "10", "-locker", locker]
    if name == "xss-lock":
        return ["xss-lock", "--", *locker.split()]
    raise ValueError(name)


def start_agent(name, x, locker="true", lock_after="1h", log=None, extra=(), env=None):
    if name == "xss-lock":
        x.run(["xset", "s", "600"])
    stderr = open(log, "w") if log else subprocess.DEVNULL
    p = start(agent_argv(name, locker, lock_after, extra), env=env or x.env, stderr=stderr)
    if log:
        stderr.close()
    if name == "xidlelock" and log:
        if not wait_for(lambda: "started" in open(log).read() or p.poll() is not None, 10):
            raise RuntimeError("xidlelock did not start")
    if p.poll() is not None:
        raise RuntimeError(f"{name} exited at start ({p.returncode})")
    settle([p.pid], quiet_for=0.2)
    return p


PEERS = ["xidlelock", "xautolock", "xss-lock"]

# ---------------------------------------------------------------- 1 + 5: idle wake-ups, memory


def bench_idle(window, samples):
    """Agents idle, each on its own Xvfb, plus one Xvfb with no client, all measured
    over the same window, split into `samples` sub-windows."""
    servers, agents = {}, {}
    try:
        for name in ["none"] + PEERS:
            servers[name] = Xvfb()
        for name in PEERS:
            agents[name] = start_agent(name, servers[name], log=os.path.join(RESULTS, f"idle-{name}.log"))
        servers["none"].run(["xset", "s", "600"])
        time.sleep(1.0)
        watched = {f"agent:{n}": p.pid for n, p in agents.items()}
        watched.update({f"server:{n}": x.pid for n, x in servers.items()})
        readings = []
        step = window / samples
        t0 = time.monotonic()
        for i in range(samples + 1):
            target = t0 + i * step
            time.sleep(max(0.0, target - time.monotonic()))
            readings.append((time.monotonic(), {k: ctx_switches(pid) for k, pid in watched.items()}))
        memory = {n: memory_kb(p.pid) for n, p in agents.items()}
        alive = {n: p.poll() is None for n, p in agents.items()}
    finally:
        for p in agents.values():
            stop(p)
        for x in servers.values():
            x.close()
    rates = {k: [] for k in watched}
    for (ta, a), (tb, b) in zip(readings, readings[1:]):
        for k in watched:
            rates[k].append(grown(a[k], b[k]) * 60.0 / (tb - ta))
    totals = {k: sum(grown(a[k], b[k]) for (_, a), (_, b) in zip(readings, readings[1:])) for k in watched}
    caused = {n: [r - base for r, base in zip(rates[f"server:{n}"], rates["server:none"])] for n in PEERS}
    return {
        "window_s": readings[-1][0] - readings[0][0],
        "agent_per_min": {n: summary(rates[f"agent:{n}"]) for n in PEERS},
        "agent_total": {n: totals[f"agent:{n}"] for n in PEERS},
        "server_per_min": {n: summary(rates[f"server:{n}"]) for n in ["none"] + PEERS},
        "server_caused_per_min": {n: summary(caused[n]) for n in PEERS},
        "memory_kb": memory,
        "alive": alive,
    }


# ---------------------------------------------------------------- 2: burst of motion

def bench_burst(motions, repeats):
    """Agent and server CPU while `motions` XTest relative motions are sent as fast as
    the server takes them. A fresh agent per repeat (listening when the burst starts);
    configurations interleaved so that noise hits all alike."""
    configs = ["none"] + PEERS
    rows = {c: [] for c in configs}
    x = Xvfb()
    try:
        x.run(["xset", "s", "600"])
        for r in range(repeats):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for config in order:
                agent = None
                if config != "none":
                    agent = start_agent(config, x, log=os.path.join(RESULTS, f"burst-{config}.log"))
                pids = [x.pid] + ([agent.pid] if agent else [])
                settle(pids, quiet_for=0.1)
                a0, s0 = (cpu_ns(agent.pid) if agent else {}), cpu_ns(x.pid)
                out = x.run([XBENCH, "motion", str(motions)]).stdout.split()
                settle(pids, quiet_for=0.1)  # let the agent drain what it was sent
                a1, s1 = (cpu_ns(agent.pid) if agent else {}), cpu_ns(x.pid)
                if agent:
                    if agent.poll() is not None:
                        raise RuntimeError(f"{config} died during the burst")
                    stop(agent)
                rows[config].append({"agent_ns": grown(a0, a1), "server_ns": grown(s0, s1),
                                     "burst_ns": int(out[1]) - int(out[0])})
    finally:
        x.close()
    base = median([row["server_ns"] for row in rows["none"]])
    result = {"motions": motions, "repeats": repeats, "server_alone_ns_per_event": summary(
        [row["server_ns"] / motions for row in rows["none"]])}
    for c in PEERS:
        result[c] = {
            "agent_ns_per_event": summary([row["agent_ns"] / motions for row in rows[c]]),
            "agent_ms_per_burst": summary([row["agent_ns"] / 1e6 for row in rows[c]]),
            "server_added_ns_per_event": summary([(row["server_ns"] - base) / motions for row in rows[c]]),
            "burst_ms": summary([row["burst_ns"] / 1e6 for row in rows[c]]),
        }
    result["none"] = {"burst_ms": summary([row["burst_ns"] / 1e6 for row in rows["none"]])}
    return result


# ---------------------------------------------------------------- 7: the heuristics, off and on

HEURISTICS = {
    "all off": [],
    "--not-when-fullscreen": ["--not-when-fullscreen"],
    "--not-when-audio, nothing plays": ["--not-when-audio"],
    "--not-when-audio, a stream plays": ["--not-when-audio"],
    "--corners +-0+": ["--corners", "+-0+"],
    # Every D-Bus service on: org.freedesktop.ScreenSaver served and the players followed on
    # the session bus, UPower (and logind's name) followed on the system bus. An MPRIS
    # player (Tests/IntegrationTests/Harness/mpris.py) says Playing on that session bus
    # all along: the agent holds the lock off.
    "--not-when-playing, every bus service, a player plays": ["--not-when-playing", "--lock-after-on-battery", "30m"],
    "all on, every bus service, a stream and a player play": [
        "--not-when-fullscreen", "--not-when-audio", "--not-when-playing", "--corners", "+-0+",
        "--lock-after-on-battery", "30m"],
    # Its burst is XTest input, which the agent does not count: raw input is selected
    # from the real devices only, so the server sends the agent none of it.
    "--ignore-xtest, an XTest flood": ["--ignore-xtest"],
    # UPower followed on a system bus (python3-dbusmock's upower template), a screen-off
    # timer set, a stage that fires through audio holds.
    "UPower, screen off, a stage ignore=audio": ["--lock-after-on-battery", "30m", "--screen-off-after-lock", "30s",
                                                  "--stage", "dim=50m on-battery=20m ignore=audio:true"],
}


class SystemBus:
    """A private dbus-daemon standing in for the system bus, with UPower's mock on it."""

    def __init__(self, tmp):
        self.daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"],
                                       stdout=subprocess.PIPE, text=True, preexec_fn=_child_setup)
        self.address = self.daemon.stdout.readline().strip()
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address)
        self.mock = start(["/usr/bin/python3", "-m", "dbusmock", "--system", "--template", "upower"], env=self.env)
        if not wait_for(lambda: subprocess.run(["dbus-send", f"--bus={self.address}", "--print-reply", "--dest=org.freedesktop.UPower",
                                                "/org/freedesktop/UPower", "org.freedesktop.DBus.Peer.Ping"],
                                               capture_output=True).returncode == 0, 15):
            raise RuntimeError("UPower's mock did not start")

    def close(self):
        stop(self.mock)
        stop(self.daemon)


class SessionBus:
    """A private session bus with one MPRIS player on it that says Playing."""

    def __init__(self, tmp, tag):
        self.daemon = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"],
                                       stdout=subprocess.PIPE, text=True, preexec_fn=_child_setup)
        self.address = self.daemon.stdout.readline().strip()
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address)
        control = os.path.join(tmp, f"mpris-{tag}.control")
        open(control, "w").close()
        self.out = os.path.join(tmp, f"mpris-{tag}.out")
        with open(self.out, "w") as out:
            self.player = start(["/usr/bin/python3", MPRIS_PY, "bench", control], env=env, stdout=out)
        if not wait_for(lambda: open(self.out).read().startswith("ready "), 15):
            raise RuntimeError("the MPRIS player did not start")

    def close(self):
        stop(self.player)
        stop(self.daemon)


class SoundServer:
    """A private PulseAudio on a null sink; `play()` starts a steady stream on it."""

    def __init__(self, tmp):
        self.socket = os.path.join(tmp, "pulse.sock")
        self.env = dict(os.environ, PULSE_SERVER=f"unix:{self.socket}", PULSE_RUNTIME_PATH=tmp, HOME=tmp)
        self.proc = start(["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit",
                           "--use-pid-file=no", "--system=no", "-L", "module-null-sink",
                           "-L", f"module-native-protocol-unix socket={self.socket} auth-anonymous=1"], env=self.env)
        if not wait_for(lambda: subprocess.run(["pactl", "info"], env=self.env, capture_output=True).returncode == 0, 15):
            raise RuntimeError("pulseaudio did not start")
        self.tone = os.path.join(tmp, "tone.wav")
        import math
        import struct
        import wave
        with wave.open(self.tone, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(8000)
            w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(i * 0.35))) for i in range(8000 * 200)))

    def play(self):
        return start(["paplay", "--client-name=bench-player", self.tone], env=self.env)

    def close(self):
        stop(self.proc)


def bench_heuristics(window, samples, motions, repeats):
    """Each configuration's idle wake-ups and memory (each agent on its own Xvfb, all over
    the same window) and agent CPU per motion event (fresh agents, interleaved)."""
    if not shutil.which("pulseaudio"):
        return {"skipped": "pulseaudio is not installed"}
    tmp = tempfile.mkdtemp(prefix="xidlelock-bench-")
    os.makedirs(os.path.join(tmp, "silent"))
    sound = SoundServer(tmp)
    # The "nothing plays" agent gets a sound server of its own that stays silent.
    silent = SoundServer(os.path.join(tmp, "silent"))
    player = sound.play()

    system = SystemBus(tmp)
    # One session bus each: each agent serves org.freedesktop.ScreenSaver on its own.
    sessions = {}
    for name in HEURISTICS:
        if "every bus service" in name:
            sessions[name] = SessionBus(tmp, len(sessions))

    def env_for(x, name):
        server = silent if name == "--not-when-audio, nothing plays" else sound
        env = dict(x.env, PULSE_SERVER=server.env["PULSE_SERVER"])
        if name.startswith("UPower") or "every bus service" in name:
            env["DBUS_SYSTEM_BUS_ADDRESS"] = system.address
        if name in sessions:
            env["DBUS_SESSION_BUS_ADDRESS"] = sessions[name].address
        return env
    servers, agents = {}, {}
    try:
        for name, flags in HEURISTICS.items():
            servers[name] = Xvfb()
            env = env_for(servers[name], name)
            agents[name] = start_agent("xidlelock", servers[name], log=os.path.join(RESULTS, f"heuristics-{len(agents)}.log"),
                                       extra=flags, env=env)
        # Past the corner check, which comes once per rest at the corner delay (5 s)
        # after the last input: what is measured is the idle minutes after it.
        time.sleep(6.0)
        readings = []
        step = window / samples
        t0 = time.monotonic()
        for i in range(samples + 1):
            time.sleep(max(0.0, t0 + i * step - time.monotonic()))
            readings.append((time.monotonic(), {n: ctx_switches(p.pid) for n, p in agents.items()}))
        memory = {n: memory_kb(p.pid) for n, p in agents.items()}
        for p in agents.values():
            stop(p)
        for x in servers.values():
            x.close()
        servers, agents = {}, {}
        rows = {n: [] for n in HEURISTICS}
        x = Xvfb()
        servers["burst"] = x
        x.run(["xset", "s", "600"])
        names = list(HEURISTICS)
        for r in range(repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                env = env_for(x, name)
                agent = start_agent("xidlelock", x, log=os.path.join(RESULTS, "heuristics-burst.log"),
                                    extra=HEURISTICS[name], env=env)
                settle([x.pid, agent.pid], quiet_for=0.1)
                a0 = cpu_ns(agent.pid)
                x.run([XBENCH, "motion", str(motions)])
                settle([x.pid, agent.pid], quiet_for=0.1)
                a1 = cpu_ns(agent.pid)
                if agent.poll() is not None:
                    raise RuntimeError(f"xidlelock {name} died during the burst")
                stop(agent)
                rows[name].append(grown(a0, a1) / motions)
    finally:
        for p in agents.values():
            stop(p)
        for x in servers.values():
            x.close()
        stop(player)
        sound.close()
        silent.close()
        system.close()
        for session in sessions.values():
            session.close()
        shutil.rmtree(tmp, ignore_errors=True)
    result = {}
    for name in HEURISTICS:
        total = sum(grown(a[name], b[name]) for (_, a), (_, b) in zip(readings, readings[1:]))
        span = readings[-1][0] - readings[0][0]
        result[name] = {"wakeups_total": total, "wakeups_per_min": total * 60.0 / span,
                        "memory_kb": memory[name], "ns_per_event": summary(rows[name])}
    result["window_s"] = readings[-1][0] - readings[0][0]
    result["motions"], result["repeats"] = motions, repeats
    return result


# ---------------------------------------------------------------- 8: the guard and its agent

BUS_PY = os.path.join(ROOT, "Tests", "IntegrationTests", "Harness", "bus.py")
# The session the guard guards: the second local user `nobody` on the row's Xvfb, as the
# guard's integration tests (Tests/IntegrationTests/Harness/Guard.swift) set it up.
GUARD_UID, GUARD_USER, GUARD_SESSION = 65534, "nobody", "g1"

# The private mount namespace the guard and its agent run in. The bench measures the
# release build, which reads the policy from /etc/xidlelock only and serves
# /run/xidlelock/guard.sock (XIDLELOCK_TEST_ETC and XIDLELOCK_TEST_RUN are honoured by a
# debug build only): so the guard and the agent see the bench's own directories there,
# bind-mounted in a mount namespace of their own, and the machine's /etc and /run are
# never written. An overlay on /etc (its upper layer in the bench's temporary directory)
# gives the mount point when the machine has none, without creating it on the real
# /etc. /run is an empty tmpfs there: nothing of the machine's is needed (the system
# bus and the user's runtime directory are the bench's), and the guard's and the
# agent's audit entries go to their logs, never to the machine's journal (they would
# read as evidence of a session that never was). A holder process keeps the namespace;
# the guard and the agent enter it with nsenter, which execs them (their pids are the
# ones measured).
NAMESPACE_SCRIPT = r"""
set -eu
t=$1
mkdir -p "$t/ns/etc-upper" "$t/ns/etc-work"
mount -t overlay xidlelock-bench -o "lowerdir=/etc,upperdir=$t/ns/etc-upper,workdir=$t/ns/etc-work" /etc
mount -t tmpfs -o mode=0755,size=1m xidlelock-bench /run
mkdir -p /etc/xidlelock /run/xidlelock
mount --bind "$t/etc" /etc/xidlelock
mount --bind "$t/run" /run/xidlelock
touch "$t/ns/ready"
exec sleep infinity
"""


def debian_system_bus_config(listen):
    """Debian's /usr/share/dbus-1/system.conf for a private daemon run as root, as the
    guard's tests run it (Buses.swift, debianSystemConfig): its policies untouched, so
    that `nobody`'s agent reaches it as it reaches the machine's system bus; listening
    on `listen`, in the foreground, with no pid file, syslog or service activation."""
    import re
    with open("/usr/share/dbus-1/system.conf") as f:
        text = f.read()
    for pattern in (r"<user>[^<]*</user>", r"<fork/>", r"<pidfile>[^<]*</pidfile>", r"<syslog/>",
                    r"<standard_system_servicedirs/>", r"<servicehelper>[^<]*</servicehelper>"):
        text = re.sub(pattern, "", text)
    text, listens = re.subn(r"<listen>[^<]*</listen>", f"<listen>unix:path={listen}</listen>", text, count=1)
    text, includes = re.subn(r"<includedir>system.d</includedir>",
                             "<includedir>/usr/share/dbus-1/system.d</includedir>", text, count=1)
    if not listens or not includes:
        raise RuntimeError("/usr/share/dbus-1/system.conf has no <listen> or <includedir>system.d</includedir>")
    return text


def guard_missing():
    """Why the guard's row cannot run here, or None."""
    if os.geteuid() != 0:
        return "it needs root (the guard runs as root, its agent as uid 65534)"
    for tool in ("unshare", "nsenter", "mount", "setpriv", "dbus-daemon"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    if not os.path.exists("/usr/share/dbus-1/system.conf"):
        return "dbus's /usr/share/dbus-1/system.conf is missing"
    if subprocess.run(["/usr/bin/python3", "-c", "import dbus, dbusmock"], capture_output=True).returncode != 0:
        return "python3-dbusmock is not installed"
    return None


def pss_kb(pid):
    """Proportional set size (/proc/PID/smaps_rollup): each shared page divided among
    the processes that map it (the guard and its agent share the executable's)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def bench_guard(window, samples):
    """`xidlelock guard --verbose` (root) guarding one logind session (x11, class user, of
    `nobody` on a private Xvfb; python3-dbusmock's logind on a private system bus, with
    GetSessionByPID from bus.py guard-setup) and the session's agent (as nobody), once the
    guard has verified the agent and follows it (pidfd, ptrace): both idle over the same
    window, split into `samples` sub-windows."""
    missing = guard_missing()
    if missing:
        return {"skipped": missing}
    tmp = tempfile.mkdtemp(prefix="xidlelock-bench-guard-")
    os.chmod(tmp, 0o755)  # nobody reaches its runtime directory and the system bus below
    for d in ("etc", "run", "ns", "metrics"):
        os.mkdir(os.path.join(tmp, d), 0o755)
        os.chmod(os.path.join(tmp, d), 0o755)  # the guard wants its run directory root's, 0755
    with open(os.path.join(tmp, "etc", "policy"), "w") as f:
        # A clinic's policy; max-lock-after and the agent's lock time (1h) far beyond the window.
        f.write("secure\nmax-lock-after 1h\nlocker true\non-agent-lost lock\nagent-grace 10s\n")
        # The textfile for node_exporter on (issue #38): the guard idles with it all the same.
        f.write(f"metrics-directory {tmp}/metrics\n")
    user = os.path.join(tmp, "user")
    for d, mode in ((user, 0o755), (user + "/home", 0o700), (user + "/runtime", 0o700), (user + "/config", 0o700)):
        os.mkdir(d, mode)
        os.chmod(d, mode)
        os.chown(d, GUARD_UID, GUARD_UID)
    guard_log = os.path.join(RESULTS, "guard.log")
    agent_log = os.path.join(RESULTS, "guard-agent.log")
    # The guard verifies only an agent whose user cannot read its executable (installed
    # 0711: the kernel starts it non-dumpable): the release build, copied so, as make
    # install installs it, into a directory of root's every user can pass through.
    bindir = tempfile.mkdtemp(prefix="xidlelock-bench-bin-", dir="/var/tmp")
    os.chmod(bindir, 0o755)
    binary = os.path.join(bindir, "xidlelock")
    shutil.copy(XIDLELOCK, binary)
    os.chmod(binary, 0o711)
    # `xidlelock guard` execs root's own daemon, found beside it (as in libexec).
    shutil.copy(os.path.join(os.path.dirname(XIDLELOCK), "xidlelock-guard"), os.path.join(bindir, "xidlelock-guard"))
    x = holder = daemon = logind = guard = agent = None
    try:
        x = Xvfb()
        socket = os.path.join(tmp, "system.bus")
        config = os.path.join(tmp, "system-bus.conf")
        with open(config, "w") as f:
            f.write(debian_system_bus_config(socket))
        daemon = start(["dbus-daemon", f"--config-file={config}", "--nofork"],
                       stderr=open(os.path.join(RESULTS, "guard-system-bus.log"), "w"))
        bus_env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={socket}")
        if not wait_for(lambda: os.path.exists(socket) or daemon.poll() is not None, 15) or daemon.poll() is not None:
            raise RuntimeError("the private system bus did not start (bench/results/guard-system-bus.log)")
        logind = start(["/usr/bin/python3", "-m", "dbusmock", "--system", "--template", "logind"], env=bus_env,
                       stderr=open(os.path.join(RESULTS, "guard-logind.log"), "w"))
        setup = subprocess.run(["/usr/bin/python3", BUS_PY, "guard-setup", GUARD_SESSION, str(GUARD_UID), GUARD_USER,
                                x.display], env=bus_env, cwd=tmp, capture_output=True, text=True, timeout=60)
        if setup.returncode != 0:
            raise RuntimeError(f"bus.py guard-setup failed: {setup.stderr.strip()}")

        ready = os.path.join(tmp, "ns", "ready")
        holder = start(["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "sh", tmp],
                       stderr=open(os.path.join(RESULTS, "guard-namespace.log"), "w"))
        if not wait_for(lambda: os.path.exists(ready) or holder.poll() is not None, 10) or holder.poll() is not None:
            with open(os.path.join(RESULTS, "guard-namespace.log")) as f:
                return {"skipped": f"no private mount namespace for the guard's /etc/xidlelock and /run/xidlelock "
                                   f"({' '.join(f.read().split())[:200] or 'unshare failed'})"}
        enter = ["nsenter", f"--target={holder.pid}", "--mount", "--"]

        env = {k: v for k, v in bus_env.items()
               if k not in ("DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "XDG_SESSION_ID", "XDG_RUNTIME_DIR")}
        with open(guard_log, "w") as log:
            guard = start(enter + [binary, "guard", "--verbose"], env=env, stderr=log)
        if not wait_for(lambda: os.path.exists(os.path.join(tmp, "run", "guard.sock")) or guard.poll() is not None, 10) \
                or guard.poll() is not None:
            raise RuntimeError(f"the guard did not start (exit {guard.returncode}; bench/results/guard.log)")

        # The session's agent as row 1's, run as nobody in the session (MOCK_LOGIND_SESSION
        # is how logind's mock tells its session) with the user's own directories.
        agent_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DISPLAY": x.display,
                     "HOME": user + "/home", "USER": GUARD_USER, "LOGNAME": GUARD_USER,
                     "XDG_RUNTIME_DIR": user + "/runtime", "XDG_CONFIG_HOME": user + "/config",
                     "XDG_SESSION_ID": GUARD_SESSION, "MOCK_LOGIND_SESSION": GUARD_SESSION,
                     "DBUS_SYSTEM_BUS_ADDRESS": bus_env["DBUS_SYSTEM_BUS_ADDRESS"]}
        # setpriv changes the credentials, which clears PR_SET_PDEATHSIG: it sets it again.
        as_user = ["setpriv", f"--reuid={GUARD_UID}", f"--regid={GUARD_UID}", "--clear-groups", "--pdeathsig", "TERM"]
        with open(agent_log, "w") as log:
            agent = start(enter + as_user + [binary] + agent_argv("xidlelock")[1:], env=agent_env, stderr=log)

        def verified():
            with open(guard_log) as f:
                return f"agent pid {agent.pid} verified" in f.read()
        if not wait_for(lambda: verified() or agent.poll() is not None or guard.poll() is not None, 15, step=0.02) \
                or not verified():
            with open(guard_log) as f:
                tail = " | ".join(f.read().strip().splitlines()[-3:])
            raise RuntimeError(f"the guard did not verify the agent (agent exit {agent.poll()}, guard exit "
                               f"{guard.poll()}): {tail}")
        time.sleep(1.0)
        settle([guard.pid, agent.pid], quiet_for=0.2)
        watched = {"guard": guard.pid, "agent": agent.pid}
        readings = []
        step = window / samples
        t0 = time.monotonic()
        for i in range(samples + 1):
            time.sleep(max(0.0, t0 + i * step - time.monotonic()))
            readings.append((time.monotonic(), {k: ctx_switches(pid) for k, pid in watched.items()}))
        memory = {k: dict(memory_kb(pid), Pss=pss_kb(pid)) for k, pid in watched.items()}
        # Proof of life: the guard asks an idle agent's loop to answer at most once per 10
        # idle minutes (more often only when a lock it was told of is due). Its cost, from
        # root's questions (each asks the agent once): CPU of the guard and of the agent
        # per question, over `questions` of them.
        questions = 50
        before = {k: cpu_ns(pid) for k, pid in watched.items()}
        answered = 0
        for _ in range(questions):
            with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as c:
                c.settimeout(5)
                c.connect(os.path.join(tmp, "run", "guard.sock"))
                c.sendall(b"sessions\n")
                reply = b""
                while not reply.endswith(b"\n"):
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    reply += chunk
                answered += b'"guarded":true' in reply
        proof = {k: grown(before[k], cpu_ns(pid)) / questions for k, pid in watched.items()}
        alive = {k: p.poll() is None for k, p in (("guard", guard), ("agent", agent))}
        metrics_file = os.path.join(tmp, "metrics", "xidlelock.prom")
        metrics = {"written": os.path.exists(metrics_file),
                   "bytes": os.path.getsize(metrics_file) if os.path.exists(metrics_file) else 0}
        with open(guard_log) as f:
            acted = [line for line in f.read().splitlines() if "started the policy's locker" in line or "logged off" in line]
    finally:
        # The guard first, so that it takes the agent's end for no loss.
        for p in (guard, agent, holder, logind, daemon):
            if p:
                stop(p)
        if x:
            x.close()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(bindir, ignore_errors=True)
    span = readings[-1][0] - readings[0][0]
    result = {"window_s": span, "sessions": 1, "memory_kb": memory, "alive": alive, "acted": acted, "metrics_file": metrics,
              "proof": {"questions": questions, "answered_guarded": answered, "cpu_ns_per_question": proof,
                        "cpu_ns_per_idle_minute": {k: v / 10 for k, v in proof.items()}}}
    for k in watched:
        rates = [grown(a[k], b[k]) * 60.0 / (tb - ta) for (ta, a), (tb, b) in zip(readings, readings[1:])]
        total = sum(grown(a[k], b[k]) for (_, a), (_, b) in zip(readings, readings[1:]))
        result[k] = {"per_min": summary(rates), "total": total, "total_per_min": total * 60.0 / span}
    return result


# ---------------------------------------------------------------- 3: deadline precision

def spawn_overhead(tmp, how, n=40):
    """Median ns from posix_spawn to the `now` helper's own timestamp (sh -c or direct)."""
    path = os.path.join(tmp, f"overhead-{how}")
    out = subprocess.run([XBENCH, "spawnlat", str(n), how, path], check=True,
                         capture_output=True, text=True).stdout.split()
    return summary([int(v) for v in out[5:]])  # the first few warm the caches


def stamps(path):
    try:
        with open(path) as f:
            return [int(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


class DeadlineRun:
    """One agent, lock time 1 s, locker = `xbench lock FILE 1100` (xss-lock: `xbench now
    FILE`). A cycle: wait 100 ms after the last unlock, send one XTest motion (t0 = just
    before it is sent), read the next locker timestamp t1; error = t1 - t0 - 1 s - the
    helper's own start-up overhead."""

    def __init__(self, name, tmp, cycles, overhead_ns):
        self.name, self.cycles, self.overhead = name, cycles, overhead_ns
        self.x = Xvfb()
        self.file = os.path.join(tmp, f"locks-{name}")
        self.errors_ms = []
        # CPU stall (PSI) from 50 ms before each deadline to the lock: a cycle with
        # none ran on an idle machine, which is what the target is about.
        self.stalls_ms = []
        self.stall_at_due = None
        self.agent = None
        self.t0 = None
        self.state = "start"
        self.started_at = time.monotonic()
        self.next_at = 0.0
        self.failure = None
        if name == "xss-lock":
            self.x.run(["xset", "s", "1"])  # the server's screensaver fires at 1 s idle
        else:
            # --verbose: a log line per decision (a few µs each), so that a failed cycle can be explained.
            # A locker that holds the screen (grabs the keyboard) 1.1 s, then unlocks: a
            # locker that exits at once is a failure to xidlelock, never an unlock.
            self.agent = start(agent_argv(name, f"{XBENCH} lock {self.file} 1100", "1s") + ["--verbose"], env=self.x.env,
                               stderr=open(os.path.join(RESULTS, f"deadline-{name}.log"), "w"))

    def done(self):
        return len(self.errors_ms) >= self.cycles or self.failure is not None

    def step(self):
        """Advances the cycle without blocking for long; call often."""
        now = time.monotonic()
        if self.state == "start":
            if self.name == "xss-lock" or stamps(self.file):  # xidlelock locks once at start
                self.state, self.next_at = "pause", now + 0.1
            elif now > self.started_at + 10:
                self.failure = "no first lock within 10 s"
        elif self.state == "pause" and self.name != "xss-lock" and len(stamps(self.file + ".unlocked")) < len(stamps(self.file)):
            # xidlelock's locker still holds the screen: the cycle starts 100 ms after the unlock.
            self.next_at = now + 0.1
        elif self.state == "pause" and now >= self.next_at:
            if self.agent and self.name == "xss-lock":
                stop(self.agent)
            out = self.x.run([XBENCH, "motion", "1"]).stdout.split()
            self.t0 = int(out[0])
            self.stall_at_due = None
            if self.name == "xss-lock":
                # Without logind, xss-lock 0.3.0 aborts (assertion `logind_session`) when its
                # locker exits and when the screensaver turns off: a fresh one for every
                # cycle, started just after the input that turns the screensaver off (it
                # is ready long before the 1 s timeout).
                self.agent = start(agent_argv("xss-lock", f"{XBENCH} now {self.file}"), env=self.x.env)
            self.state, self.next_at = "wait", now + 5.0
        elif self.state == "wait":
            if self.stall_at_due is None and time.monotonic_ns() >= self.t0 + 950_000_000:
                self.stall_at_due = (cpu_stall_us(), stamps(self.file))
            later = [t for t in stamps(self.file) if t > self.t0]
            if later:
                self.errors_ms.append((later[0] - self.t0 - 1_000_000_000 - self.overhead) / 1e6)
                stall, seen = self.stall_at_due or (None, None)
                now_stall = cpu_stall_us()
                # Unknown (None) if the harness looked too late, after the lock was written.
                known = stall is not None and now_stall is not None and not [t for t in seen if t > self.t0]
                self.stalls_ms.append((now_stall - stall) / 1000 if known else None)
                self.state, self.next_at = "pause", now + 0.1
            elif now > self.next_at:
                self.failure = f"no lock within 5 s of input (cycle {len(self.errors_ms) + 1})"

    def close(self):
        if self.agent:
            stop(self.agent)
        self.x.close()


QUIET_STALL_MS = 1.0


def bench_deadline(cycles, together):
    tmp = tempfile.mkdtemp(prefix="deadline-", dir=RESULTS)
    over = {"sh": spawn_overhead(tmp, "sh"), "exec": spawn_overhead(tmp, "exec")}
    runs = []
    try:
        groups = [["xidlelock", "xss-lock"]] if together else [["xidlelock"], ["xss-lock"]]
        for group in groups:
            batch = []
            for name in group:
                # xidlelock runs the locker with /bin/sh -c; xss-lock execs it directly.
                batch.append(DeadlineRun(name, tmp, cycles, over["sh" if name == "xidlelock" else "exec"]["median"]))
            runs += batch
            while not all(r.done() for r in batch):
                for r in batch:
                    if not r.done():
                        r.step()
                time.sleep(0.002)
            for r in batch:
                r.close()
    finally:
        for r in runs:
            r.close()
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"overhead_ms": {k: {q: v / 1e6 for q, v in s.items() if q != "n"} for k, s in over.items()},
              "concurrent": together}
    for r in runs:
        errs = r.errors_ms
        quiet = [e for e, st in zip(errs, r.stalls_ms) if st is not None and st < QUIET_STALL_MS]
        result[r.name] = {"cycles": len(errs), "failure": r.failure,
                          "error_ms": summary(errs) if errs else None,
                          "worst_abs_ms": max(abs(e) for e in errs) if errs else None,
                          "quiet_cycles": len(quiet),
                          "quiet_worst_abs_ms": max(abs(e) for e in quiet) if quiet else None,
                          "quiet_median_ms": median(quiet) if quiet else None,
                          "raw_ms": errs, "stall_ms": r.stalls_ms}
    return result


# ---------------------------------------------------------------- 4: idle query

def bench_query(calls, blocks=5):
    x = Xvfb()
    try:
        xprintidle = shutil.which("xprintidle")
        out = x.run([XBENCH, "alt", str(calls), XIDLELOCK, "idle", "--", xprintidle]).stdout.split("\n")
    finally:
        x.close()
    a = [int(line[2:]) / 1e6 for line in out if line.startswith("a ")]
    b = [int(line[2:]) / 1e6 for line in out if line.startswith("b ")]
    size = len(a) // blocks
    block_ratios = [median(a[i * size:(i + 1) * size]) / median(b[i * size:(i + 1) * size]) for i in range(blocks)]
    return {"calls": calls,
            "xidlelock": {"median": median(a), "p90": pct(a, 0.9), "min": min(a), "max": max(a)},
            "xprintidle": {"median": median(b), "p90": pct(b, 0.9), "min": min(b), "max": max(b)},
            "ratio_median": median(a) / median(b),
            "ratio_p90": pct(a, 0.9) / pct(b, 0.9),
            "block_ratios": summary(block_ratios)}


# ---------------------------------------------------------------- 6: the core

def bench_core(days, repeats):
    out = subprocess.run([CORE_BENCH, "--days", str(days), "--repeats", str(repeats)],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    result = {}
    for feed in ("agent", "every"):
        mine = [r for r in rows if r["feed"] == feed]
        result[feed] = {"days": days, "repeats": repeats,
                        "events_per_day": mine[0]["events"] / days,
                        "days_per_s": summary([r["days_per_s"] for r in mine]),
                        "events_per_s": summary([r["events_per_s"] for r in mine])}
    return result


# ---------------------------------------------------------------- machine, table, file

def machine():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    swift = subprocess.run(["swift", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    debian = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else "?"

    def version(cmd):
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", cmd], capture_output=True, text=True).stdout
            return out or "?"
        except OSError:
            return "?"
    return {"cores": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "swift": swift[0] if swift else "?", "debian": debian,
            "load_start": os.getloadavg(),
            "versions": {p: version(p) for p in ("xvfb", "xautolock", "xss-lock", "xprintidle")}}


def verdict(ok):
    if ok == "skipped":
        return "n/a: not measured"
    if ok is None:
        return "n/a: too few cycles on an idle machine (rerun when it is quieter)"
    return "**pass**" if ok else "**MISS**"


def render(res, quick, command, date, elapsed):
    m, idle, burst, dl, q, core = (res[k] for k in ("machine", "idle", "burst", "deadline", "query", "core"))
    L = []
    L.append("# Benchmarks")
    L.append("")
    L.append(f"Generated by `bench/bench.py` on {date} ({'QUICK mode: short windows, few repeats' if quick else 'full mode'};"
             f" took {elapsed:.0f} s). Reproduce with:")
    L.append("")
    L.append(f"    {command}")
    L.append("")
    pressure = ", ".join(f"{k} {v:.0f}%" for k, v in res["pressure"].items()) or "n/a"
    versions = ", ".join(f"{p} {v}" for p, v in m["versions"].items())
    L.append(f"Machine: {m['cores']} cores, {m['cpu']}, Linux {m['kernel']}, Debian {m['debian']}, {m['swift']}; "
             f"{versions}.")
    L.append("")
    L.append(f"Shared machine: other builds and tests ran at the same time. Load average {m['load_start'][0]:.2f} at "
             f"start, {m['load_end'][0]:.2f} at end; CPU pressure (PSI: share of the time some task waited for a "
             f"CPU) per test: {pressure}.")
    L.append("")
    L.append("Cells are `median (min–max)` over repeats or sub-windows; ratios are xidlelock ÷ peer, of medians.")
    L.append("")
    L.append("| # | measure | xidlelock | xautolock | xss-lock | xprintidle | ratio |")
    L.append("|---|---|---|---|---|---|---|")
    a = idle["agent_per_min"]
    L.append(f"| 1 | agent wake-ups per idle minute ({idle['window_s']:.0f} s window, {a['xidlelock']['n']} sub-windows; "
             f"total in window) | {cell(a['xidlelock'])}; {idle['agent_total']['xidlelock']} | {cell(a['xautolock'])}; "
             f"{idle['agent_total']['xautolock']} | {cell(a['xss-lock'])}; {idle['agent_total']['xss-lock']} | – | "
             f"vs xautolock {ratio(a['xidlelock']['median'], a['xautolock']['median'])} |")
    s = idle["server_caused_per_min"]
    L.append(f"| 1 | X server wake-ups per idle minute caused (minus an Xvfb with no client: "
             f"{fmt(idle['server_per_min']['none']['median'])}/min) | {cell(s['xidlelock'])} | {cell(s['xautolock'])} | "
             f"{cell(s['xss-lock'])} | – | |")
    L.append(f"| 2 | agent CPU per motion event, ns ({burst['motions']:,} XTest motions, {burst['repeats']} repeats, "
             f"fresh agent each) | {cell(burst['xidlelock']['agent_ns_per_event'])} | "
             f"{cell(burst['xautolock']['agent_ns_per_event'])} | {cell(burst['xss-lock']['agent_ns_per_event'])} | – | "
             f"vs xss-lock {ratio(burst['xidlelock']['agent_ns_per_event']['median'], burst['xss-lock']['agent_ns_per_event']['median'])} |")
    L.append(f"| 2 | X server CPU added per motion event, ns (server alone: "
             f"{fmt(burst['server_alone_ns_per_event']['median'])} ns/event) | "
             f"{cell(burst['xidlelock']['server_added_ns_per_event'])} | {cell(burst['xautolock']['server_added_ns_per_event'])} | "
             f"{cell(burst['xss-lock']['server_added_ns_per_event'])} | – | |")
    xe, se = dl["xidlelock"].get("error_ms"), dl["xss-lock"].get("error_ms")
    stopped = {n: f" (stopped: {dl[n]['failure']})" if dl[n]["failure"] else "" for n in ("xidlelock", "xss-lock")}
    xa_poll = 60.0 / a["xautolock"]["median"] * 1000 if a["xautolock"]["median"] > 0 else float("nan")
    L.append(f"| 3 | deadline error, ms: median (min–max); worst \\|error\\| — lock 1 s "
             f"({dl['xidlelock']['cycles']} / {dl['xss-lock']['cycles']} cycles; xss-lock with `xset s 1`) | "
             f"{cell(xe, digits=2) if xe else 'failed'}; {fmt(dl['xidlelock']['worst_abs_ms'] or float('nan'), 2)}{stopped['xidlelock']} | "
             f"polls: whole minutes (`-time` ≥ 1 min), error up to one poll period ≈ {fmt(xa_poll, 0)} ms (from row 1) | "
             f"{cell(se, digits=2) if se else 'failed'}; {fmt(dl['xss-lock']['worst_abs_ms'] or float('nan'), 2)}{stopped['xss-lock']} | – | "
             f"vs xss-lock {ratio(xe['median'], se['median']) if xe and se else 'n/a'} |")
    qx, qs = dl["xidlelock"], dl["xss-lock"]

    def quiet(d):
        if not d.get("quiet_cycles"):
            return "none"
        return f"{fmt(d['quiet_median_ms'], 2)}; {fmt(d['quiet_worst_abs_ms'], 2)} ({d['quiet_cycles']} cycles)"
    L.append(f"| 3 | the same on cycles the machine was idle for (CPU stall < {QUIET_STALL_MS:g} ms from 50 ms "
             f"before the deadline to the lock): median; worst | {quiet(qx)} | – | {quiet(qs)} | – | |")
    L.append(f"| 4 | `idle` query wall time per call, ms: median; p90 ({q['calls']} calls each, alternating) | "
             f"{fmt(q['xidlelock']['median'], 2)}; {fmt(q['xidlelock']['p90'], 2)} | – | – | "
             f"{fmt(q['xprintidle']['median'], 2)}; {fmt(q['xprintidle']['p90'], 2)} | {q['ratio_median']:.2f}× "
             f"(blocks {fmt(q['block_ratios']['min'], 2)}–{fmt(q['block_ratios']['max'], 2)}); p90 {q['ratio_p90']:.2f}× |")
    mem = idle["memory_kb"]
    L.append(f"| 5 | idle agent VmRSS / RssAnon, kB | {mem['xidlelock']['VmRSS']:,} / {mem['xidlelock']['RssAnon']:,} | "
             f"{mem['xautolock']['VmRSS']:,} / {mem['xautolock']['RssAnon']:,} | {mem['xss-lock']['VmRSS']:,} / "
             f"{mem['xss-lock']['RssAnon']:,} | – | RssAnon vs xautolock "
             f"{ratio(mem['xidlelock']['RssAnon'], mem['xautolock']['RssAnon'])}, vs xss-lock "
             f"{ratio(mem['xidlelock']['RssAnon'], mem['xss-lock']['RssAnon'])} |")
    ca, ce = core["agent"], core["every"]
    L.append(f"| 6 | IdleCore: simulated days/s, agent feed ({fmt(ca['events_per_day'], 0)} events/day) | "
             f"{cell(ca['days_per_s'])} | – | – | – | |")
    L.append(f"| 6 | IdleCore: events/s, every raw input fed ({fmt(ce['events_per_day'], 0)} events/day; days/s "
             f"{fmt(ce['days_per_s']['median'])}) | {cell(ce['events_per_s'])} | – | – | – | |")
    L.append("")
    h = res.get("heuristics", {})
    if "skipped" in h:
        L.append(f"Row 7 (the heuristics) skipped: {h['skipped']}.")
        L.append("")
    elif h:
        L.append(f"### 7. The heuristics, each off and on ({h['window_s']:.0f} s idle window; {h['motions']:,} XTest "
                 f"motions x {h['repeats']} repeats, fresh agent each)")
        L.append("")
        L.append("| flags | agent wake-ups per idle minute (total) | agent CPU per motion event, ns | RssAnon, kB |")
        L.append("|---|---|---|---|")
        for name in HEURISTICS:
            r = h[name]
            L.append(f"| {name} | {fmt(r['wakeups_per_min'])} ({r['wakeups_total']}) | {cell(r['ns_per_event'])} | "
                     f"{r['memory_kb']['RssAnon']:,} |")
        L.append("")
    g = res.get("guard", {})
    if "skipped" in g:
        L.append(f"Row 8 (the guard) skipped: {g['skipped']}.")
        L.append("")
    elif g:
        L.append(f"### 8. `xidlelock guard` (root) and the agent it guards ({g['window_s']:.0f} s idle window, "
                 f"{g['sessions']} session, the agent verified and followed)")
        L.append("")
        L.append("| process | wake-ups per idle minute: median (min–max); total in window | VmRSS / RssAnon / Pss, kB |")
        L.append("|---|---|---|")
        for k, label in (("guard", f"`xidlelock guard`, root, {g['sessions']} session"),
                         ("agent", "the session's agent, uid 65534, registered with the guard")):
            mem = g["memory_kb"][k]
            pss = f"{mem['Pss']:,}" if mem.get("Pss") is not None else "n/a"
            L.append(f"| {label} | {cell(g[k]['per_min'])}; {g[k]['total']} | {mem['VmRSS']:,} / {mem['RssAnon']:,} / {pss} |")
        L.append("")
        if "proof" in g:
            p = g["proof"]
            q = p["cpu_ns_per_question"]
            L.append(f"Proof of life (the guard asks an idle agent's loop to answer once per 10 idle minutes): one question costs "
                     f"the guard {q['guard'] / 1000:,.1f} µs and the agent {q['agent'] / 1000:,.1f} µs of CPU "
                     f"({p['questions']} of root's questions, each asking the agent; guarded in {p['answered_guarded']} answers), "
                     f"so {p['cpu_ns_per_idle_minute']['guard'] / 1000:,.2f} µs of the guard's and "
                     f"{p['cpu_ns_per_idle_minute']['agent'] / 1000:,.2f} µs of the agent's per session per idle minute, "
                     f"and 0.1 agent wake-ups per idle minute.")
            L.append("")
        if g["acted"] or not all(g["alive"].values()):
            dead = [k for k, up in g["alive"].items() if not up]
            L.append(f"**Not idle**: {'; '.join(g['acted'])}{' ended before the end of the window: ' + ', '.join(dead) if dead else ''}.")
            L.append("")
    L.append("## Targets")
    L.append("")
    L.append("| target | measured | result |")
    L.append("|---|---|---|")
    t = res["targets"]
    for name, measured, ok in t:
        L.append(f"| {name} | {measured} | {verdict(ok)} |")
    L.append("")
    L.append("## How `xidlelock idle` came to start as fast as `xprintidle`")
    L.append("")
    L.append(
        "A Swift program starts slower than a C one: mapping the statically linked runtime, the "
        "copy-on-write page faults of its relocated data (a PIE's pointers are fixed up at every start) and "
        "libm, which the runtime needs (measured 2026-11-24: a C program that prints a line 0.96 ms, a Swift "
        "one linked as `make release` links 1.55 ms). Steps, each measured with `make bench` (row 4): no "
        "Foundation (1.25 ms and 2.4 MB a run); the Swift runtime, libstdc++ and libgcc linked statically "
        "(2.69× → 1.49×); our own argv accessor instead of the runtime's scan of /proc/self/maps, DT_RELR "
        "relocations (lld `-z pack-relative-relocs`) and `--no-export-dynamic` (1.49× → 1.34×); no "
        "_StringProcessing (binary 14.1 → 11.9 MB), libXi loaded only by the agent, and the functions `idle` "
        "runs placed together (`bench/startup.order`): 1.32×. The last step made up the Swift floor: `idle` "
        "speaks to the server through libxcb (the library under Xlib, which xprintidle also loads), and the "
        "binary no longer links libX11 and libXss, which the agent and `doctor` load at run time (CXlib). "
        "Mapping and relocating libX11, libXss and libXext was about 0.45 ms of xprintidle's 1.7 ms (a C "
        "query through libxcb: 1.2 ms). Then (2026-11-28, perf stat): `xidlelock idle` took 210 page faults to "
        "xprintidle's 135, and a Swift program that does nothing but the same query, linked the same way, 191 "
        "(1.15× xprintidle): start-up is page faults, not instructions (0.75 M against xprintidle's 0.84 M). "
        "Two steps: `idle` alone goes straight to the query, without building the argument list, the parser's "
        "tables and their generic metadata (210 → 186); and the runtime's .bss variables it touches are placed "
        "together by the same order file, found from its page faults with perf (186 → 177: scattered, each "
        "cost two faults, a read that maps the zero page and the write that copies it). What remains in the "
        "binary's own pages (70 of 177): 50 are the loader relocating .data.rel.ro and .data (a PIE's pointers, "
        "about two thirds of them the standard library's type metadata and witness tables, the rest ours: "
        "IdleCore's 121 value witness tables and 139 metadata records), 9 code, 3 .bss; the other 107 are libc, "
        "libm, libxcb and its libraries, the heap and the stack, as xprintidle's. Measured and not taken: "
        "linked as a non-PIE the same binary takes 160 faults and 0.93× xprintidle, but the agent would lose "
        "ASLR for its own code, and it parses D-Bus calls from every program of the user, sandboxed ones "
        "included; a fully static binary (libX11's security updates would no longer reach users through apt); "
        "a static libm (glibc's libm.a needs libc's internals and does not link into a dynamic program).")
    L.append("")
    L.append("## How each figure is taken")
    L.append("")
    L.append(
        "1. Each agent idles on its own private Xvfb (xidlelock `--lock-after 1h --locker true`, "
        "`xautolock -time 10 -locker true`, `xss-lock -- true` after `xset s 600`), plus an Xvfb with no client, all over "
        "the same window after 1 s of settling. Wake-ups = voluntary + involuntary context switches summed over "
        "`/proc/PID/task/*/status`, per sub-window, scaled to a minute.")
    L.append(
        "2. `xbench motion N` (bench/xbench.c) sends N `XTestFakeRelativeMotionEvent` (+1/−1 px) with `XSync` every "
        "256. CPU = first field of `/proc/PID/task/*/schedstat` (ns on CPU) before the burst and after the agent has "
        "gone quiet again, divided by N. Server CPU added = server CPU with the agent − median server CPU with no "
        "agent, per event. Configurations are interleaved per repeat.")
    o = dl["overhead_ms"]
    L.append(
        f"3. The locker is `xbench lock FILE 1100` for xidlelock (it appends CLOCK_MONOTONIC ns, grabs the keyboard, holds it 1.1 s and unlocks: an instant exit 0 is a failure to xidlelock) and `xbench now FILE` for xss-lock. A cycle: 100 ms after an unlock, one XTest "
        f"motion (t0 taken just before it is sent), lock time 1 s; error = t1 − t0 − 1 s − the helper's own start-up "
        f"(measured: `sh -c` {o['sh']['median']:.2f} ms, direct exec {o['exec']['median']:.2f} ms; subtracted for "
        f"xidlelock and xss-lock respectively). xss-lock 0.3.0 aborts (assertion `logind_session`) on a machine without logind "
        f"when its locker exits or the screensaver turns off, so a fresh one is started right after each cycle's "
        f"input."
        + (" xidlelock and xss-lock cycles ran at the same time on two servers (quick mode)." if dl["concurrent"] else ""))
    L.append(
        "4. `xbench alt N A -- B` runs `xidlelock idle` and `xprintidle` alternately (order swapped every round), "
        "wall time from `posix_spawn` to `waitpid`, stdout to /dev/null, one Xvfb. Block ratios: the calls in 5 "
        "blocks, ratio of medians per block.")
    L.append("5. VmRSS and RssAnon from `/proc/PID/status` of the agents of row 1, at the end of the idle window.")
    L.append(
        "6. `.build/release/IdleCoreBench`: simulated days (night suspend, 8 h of work and idle segments, lock and "
        "unlock, 1-minute warning) on an injected clock. *Agent feed*: input only while the machine listens, wakes "
        "at deadlines; *every*: each raw input event. Times include the simulation's own work.")
    L.append(
        "7. As rows 1, 2 and 5 for xidlelock alone with each heuristic flag. The sound server is a private "
        "`pulseaudio` on a null sink; *a stream plays*: `paplay` of a 200 s tone runs on it all along (the agent "
        "holds the lock off); *nothing plays*: a second, silent server. *A player plays*: a private session bus "
        "(`dbus-daemon --session`) with the tests' MPRIS player (`Harness/mpris.py`, PlaybackStatus Playing) on it; "
        "*every bus service*: that session bus (org.freedesktop.ScreenSaver served, the players followed) and row "
        "8's kind of system bus with UPower's mock (OnBattery followed; logind's name waited for). No window manager runs: "
        "`--not-when-fullscreen` follows the root's `_NET_ACTIVE_WINDOW`, which nothing sets. The window starts 6 s "
        "after the agents: `--corners` asks where the pointer rests once per rest, 5 s (the corner delay) after the "
        "last input, one wake-up and two round trips (4 context switches), and then nothing.")
    L.append(
        "8. A private system bus (Debian's system.conf policies, so that the user's agent reaches it as the "
        "machine's), python3-dbusmock's logind on it with a session of `nobody` (x11, class user, Display the row's "
        "Xvfb) and GetSessionByPID (`bus.py guard-setup`, as the guard's integration tests); the policy `secure`, "
        "`max-lock-after 1h`, `locker true`, `on-agent-lost lock`, `agent-grace 10s`. The release build reads "
        "/etc/xidlelock and serves /run/xidlelock only, so the guard and its agent run in a private mount "
        "namespace in which the bench's directories are bind-mounted there (an overlay on /etc gives the mount "
        "point; /run is an empty tmpfs, so the audit entries go to the logs, not the machine's journal). "
        "`xidlelock guard --verbose` runs as root; the agent as row 1's (`--lock-after 1h --locker true`, no "
        "session bus) as uid 65534 through `setpriv`, marked for the mock's session. The window starts 1 s after "
        "the guard logs the agent verified (from then on it follows it with a pidfd and ptrace). Wake-ups and "
        "VmRSS / RssAnon as rows 1 and 5; Pss from `/proc/PID/smaps_rollup` (the guard and the agent share the "
        "executable's pages, which VmRSS counts in full for each).")
    L.append("")
    return "\n".join(L)


def targets(res):
    idle, burst, dl, q, mem = res["idle"], res["burst"], res["deadline"], res["query"], res["idle"]["memory_kb"]
    wake = idle["agent_total"]["xidlelock"]
    cpu = burst["xidlelock"]["agent_ns_per_event"]["median"]
    xe = dl["xidlelock"].get("error_ms")
    worst = dl["xidlelock"].get("worst_abs_ms")
    anon = mem["xidlelock"]["RssAnon"]
    enough = dl["xidlelock"]["cycles"] >= res["plan"]["cycles"]  # a run cut short proves nothing
    qn, qworst = dl["xidlelock"].get("quiet_cycles", 0), dl["xidlelock"].get("quiet_worst_abs_ms")
    rows = [
        ("wake-ups between deadlines = 0", f"{wake} in {idle['window_s']:.0f} s idle", wake == 0),
        ("agent CPU per motion event ≤ 50 ns", f"{cpu:.1f} ns", cpu <= 50),
        ("deadline error median ≤ 1 ms", f"{xe['median']:.2f} ms" if xe else "failed", enough and abs(xe["median"]) <= 1),
        ("deadline error worst ≤ 50 ms (idle machine)",
         f"{qworst:.2f} ms over {qn} idle-machine cycles (all {len(dl['xidlelock']['raw_ms'])}: {worst:.2f} ms)"
         if qn else f"all cycles: {worst:.2f} ms" if xe else "failed",
         (enough and qworst <= 50) if qn >= 10 or not enough else None),
        ("`xidlelock idle` ≤ 1.0× `xprintidle` wall time", f"{q['ratio_median']:.3f}×", q["ratio_median"] <= 1.0),
        ("idle agent RssAnon ≤ 1024 kB", f"{anon:,} kB", anon <= 1024),
    ]
    h = res.get("heuristics", {})
    flagged = {k: v for k, v in h.items() if isinstance(v, dict) and "ns_per_event" in v}
    if flagged:
        cpus = [v["ns_per_event"] for v in flagged.values()]
        rows.append(("every heuristics row (7): agent CPU per motion event median ≤ 50 ns, max < 100 ns",
                     f"medians {fmt(min(c['median'] for c in cpus))}–{fmt(max(c['median'] for c in cpus))} ns, "
                     f"max {fmt(max(c['max'] for c in cpus))} ns",
                     all(c["median"] <= 50 and c["max"] < 100 for c in cpus)))
    flood = h.get("--ignore-xtest, an XTest flood")
    if flood:
        rows.append(("`--ignore-xtest`: agent CPU per flooded XTest event ≤ 1 µs", f"{fmt(flood['ns_per_event']['median'])} ns",
                     flood["ns_per_event"]["median"] <= 1000))
    playing = h.get("--not-when-playing, every bus service, a player plays")
    if playing:
        rows += [
            ("wake-ups per idle minute = 0 with --not-when-playing and every bus service on, a player playing",
             f"{fmt(playing['wakeups_per_min'])} ({playing['wakeups_total']} in {h['window_s']:.0f} s)",
             playing["wakeups_total"] == 0),
            ("idle RssAnon ≤ 1024 kB, the same agent", f"{playing['memory_kb']['RssAnon']:,} kB",
             playing["memory_kb"]["RssAnon"] <= 1024),
        ]
    g = res.get("guard", {})
    names = ("agent wake-ups between deadlines = 0, guarded", "guard wake-ups per idle minute ≤ 1 per session",
             "guard RSS ≤ 2 MB (RssAnon: its own pages, as the agent's target)")
    if not g or "skipped" in g:
        return rows + [(name, "not measured (row 8 skipped)", "skipped") for name in names]
    idle_all = all(g["alive"].values()) and not g["acted"]
    per_session = g["guard"]["total_per_min"] / g["sessions"]
    mem = g["memory_kb"]["guard"]
    return rows + [
        (names[0], f"{g['agent']['total']} in {g['window_s']:.0f} s idle", idle_all and g["agent"]["total"] == 0),
        (names[1], f"{fmt(per_session)} ({g['guard']['total']} in {g['window_s']:.0f} s, {g['sessions']} session)",
         idle_all and per_session <= 1),
        (names[2], f"{mem['RssAnon']:,} kB (VmRSS {mem['VmRSS']:,} kB, Pss {fmt(mem['Pss'] if mem['Pss'] is not None else float('nan'), 0)} kB: mostly the "
                   f"executable's pages, shared with the agent)", mem["RssAnon"] <= 2048),
    ]


# Sections of BENCHMARKS.md that other scripts measure (bench/card-removal.py,
# bench/guard-scale.py): carried
# over from the file as it is when this script rewrites it.
KEPT_SECTIONS = ("## Smart card removal", "## The guard at scale")


def kept_sections(path):
    """The kept sections of the file at `path` (from the first kept heading to the end), or ''."""
    try:
        with open(path) as f:
            old = f.read()
    except FileNotFoundError:
        return ""
    starts = [i for i in (old.find("\n" + heading) for heading in KEPT_SECTIONS) if i >= 0]
    return old[min(starts):] if starts else ""


def build_helper():
    os.makedirs(RESULTS, exist_ok=True)
    src = os.path.join(ROOT, "bench", "xbench.c")
    subprocess.run(["cc", "-O2", "-Wall", "-o", XBENCH, src, "-lX11", "-lXtst"], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about a minute: 10 s windows, fewer repeats")
    ap.add_argument("--output", default=os.path.join(ROOT, "BENCHMARKS.md"))
    args = ap.parse_args()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    for need in (XIDLELOCK, CORE_BENCH):
        if not os.path.exists(need):
            sys.exit(f"bench: {need} is missing: run `swift build -c release` (make bench does)")
    for tool in ("Xvfb", "xautolock", "xss-lock", "xprintidle", "xset", "cc"):
        if not shutil.which(tool):
            sys.exit(f"bench: {tool} is not installed (sh .ci/install-packages build bench)")
    quick = args.quick
    plan = dict(window=10.0, samples=5, motions=20_000, burst_repeats=3, cycles=20, calls=200, days=200, core_repeats=5) \
        if quick else dict(window=60.0, samples=6, motions=20_000, burst_repeats=9, cycles=30, calls=400, days=2000, core_repeats=9)
    command = "make bench QUICK=1" if quick else "make bench"
    began = time.monotonic()
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    res = {"machine": machine(), "quick": quick, "plan": plan}
    m = res["machine"]
    print(f"machine: {m['cores']} cores, {m['cpu']}, Linux {m['kernel']}, {m['swift']}; load {m['load_start'][0]:.2f}", flush=True)
    res["pressure"] = {}

    def section(key, label, run):
        print(label, flush=True)
        stall0, t0 = cpu_stall_us(), time.monotonic()
        res[key] = run()
        stall1, t1 = cpu_stall_us(), time.monotonic()
        if stall0 is not None and stall1 is not None:
            res["pressure"][key] = (stall1 - stall0) / 1e4 / (t1 - t0)  # % of the time

    try:
        build_helper()
        section("idle", f"[1,5] idle wake-ups and memory: {plan['window']:.0f} s window ...",
                lambda: bench_idle(plan["window"], plan["samples"]))
        section("burst", f"[2] bursts of {plan['motions']:,} motions x {plan['burst_repeats']} ...",
                lambda: bench_burst(plan["motions"], plan["burst_repeats"]))
        section("deadline", f"[3] deadline precision: {plan['cycles']} lock cycles ...",
                lambda: bench_deadline(plan["cycles"], together=quick))
        section("query", f"[4] idle query: {plan['calls']} calls each ...", lambda: bench_query(plan["calls"]))
        section("heuristics", f"[7] the heuristics off and on: {plan['window']:.0f} s window, "
                f"{plan['motions']:,} motions x {plan['burst_repeats']} ...",
                lambda: bench_heuristics(plan["window"], plan["samples"], plan["motions"], plan["burst_repeats"]))
        section("guard", f"[8] the guard and its agent: {plan['window']:.0f} s window ...",
                lambda: bench_guard(plan["window"], plan["samples"]))
        section("core", f"[6] IdleCore: {plan['days']} simulated days x {plan['core_repeats']} ...",
                lambda: bench_core(plan["days"], plan["core_repeats"]))
    finally:
        stop_all()
    m["load_end"] = os.getloadavg()
    res["targets"] = targets(res)
    text = render(res, quick, command, date, time.monotonic() - began) + kept_sections(args.output)
    with open(args.output, "w") as f:
        f.write(text)
    with open(os.path.join(RESULTS, f"results-{'quick' if quick else 'full'}.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    print()
    print(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as e:
        stop_all()
        sys.exit(f"bench: interrupted ({e}); every process it started has been ended")
