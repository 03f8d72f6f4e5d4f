#!/usr/bin/env python3
"""The guard at scale (issue #36): N sessions, each with its own user, Xvfb and agent.

Run through `make bench-guard` (N = 1, 10, 100, 300: about 15 minutes) or
`make bench-guard QUICK=1` (N = 1, 10, short windows: about a minute and a half); options with
`make bench-guard ARGS='--sessions 1,10 --window 30'`. Needs root. Prints a markdown
table beside the issue's "today" figures and writes it to bench/results/guard-scale.md
(the guard's log of each N beside it, guard-scale-N.log).

For each N, a world of its own:
- N throwaway users xilbench001, xilbench002, ...: created with useradd when missing
  (no home, no login shell, comment "xidlelock bench guard-scale"), reused when they
  exist with that comment (a same-named user without it is refused, never touched), and
  removed with userdel at the end, also on failure and Ctrl-C (`--keep-users` keeps
  them for the next run, `--remove-users` removes those kept);
- N small Xvfb servers (-screen 0 64x64x24, -nolisten tcp, -displayfd);
- a private system bus (Debian's system.conf, its limits untouched) served by
  python3-dbusmock's logind template, with GetSessionByPID from the tests' bus.py
  and N sessions of Type x11, class user, each on its display, every fourth Remote (as
  a VNC server's), announced with SessionNew: the users log in ten at a time, each
  session's agent started right after its session;
- the guard as root (`--guard`, default `.build/release/xidlelock guard`; a
  `.build/release/xidlelock-guard` is given `--agent PATH`, the installed agent),
  policy `secure`, `max-lock-after 1h`, `agent-grace 2s`, `on-agent-lost lock`, and a
  `locker` that writes a stamp file of the session and sleeps;
- each session's agent (the release build, installed as the guard requires it: a copy
  root's, mode 0711, in a directory of root's) run as the session's user.
The guard, its agents and root's doctor see the bench's /etc/xidlelock and
/run/xidlelock through a private mount namespace (bench.py's row 8): the machine's
/etc and /run are never written.

Measured: the agents the guard verified (root's `doctor --policy --json`, and the
guard's log); the guard's CPU and wake-ups (voluntary + involuntary context switches of
its threads, /proc) over an idle window; under churn (each session's IdleHint changed
once a second through the mock, which emits PropertiesChanged) the guard's CPU;
root's doctor's answer time, idle and under churn; kill -9 and SIGSTOP of an agent to
the policy's locker's stamp; the guard's RssAnon and private pages per session ((at N
- at 1) / (N - 1)), and its Pss.

Every process it starts is ended by its pid (process group) on exit, failure and
Ctrl-C, and the processes the guard started as the bench's users (its lockers) are
ended by pid after checking their uid. Python standard library; the D-Bus parts run
as children under Debian's /usr/bin/python3 (dbus-python, python3-dbusmock).
"""
import argparse
import json
import os
import pwd
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  the process, /proc and bus helpers of `make bench`
from bench import ROOT, RESULTS, cpu_ns, ctx_switches, grown, median, memory_kb, pss_kb, wait_for  # noqa: E402

HARNESS = os.path.join(ROOT, "Tests", "IntegrationTests", "Harness")
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: it has dbus-python and python3-dbusmock
USER_PREFIX = "xilbench"
USER_MARK = "xidlelock bench guard-scale"
GRACE_S = 2
REMOTE_EVERY = 4
LOGIN_BATCH = 10  # sessions added at once, each followed at once by its agent

# The "today" table (issue #36, measured on the guard before its rework with
# the same set-up), the "before" columns. N = 1 was not measured there.
BEFORE = {
    10: dict(verified="10", idle="0 CPU, 0 wake-ups", churn="0.7 %", doctor="7 / 8 ms", kill="2.01 s"),
    100: dict(verified="100", idle="0, 0", churn="15 % (mock-bound)", doctor="30 / 145 ms", kill="2.02 s"),
    200: dict(verified="200", idle="0, 0", churn="14 % (mock-bound)", doctor="60 / 420 ms", kill="2.02 s"),
    300: dict(verified="**256**", idle="**87 % of a core**", churn="15 %", doctor="**no answer (5 s)** / 1.1 s",
              kill="2.01 s"),
}

# ---------------------------------------------------------------- users


def bench_users(n):
    """xilbench001 ... xilbenchN, created when missing: [(name, uid)] and the names created."""
    users, created = [], []
    for i in range(1, n + 1):
        name = f"{USER_PREFIX}{i:03d}"
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                            "--comment", USER_MARK, "--user-group", name], check=True, capture_output=True, text=True)
            created.append(name)
            entry = pwd.getpwnam(name)
        if entry.pw_gecos != USER_MARK:
            raise RuntimeError(f"user {name} exists and is not the bench's (comment {entry.pw_gecos!r}): "
                               f"remove it or pick another --user-prefix")
        users.append((name, entry.pw_uid))
    return users, created


def remove_users(names):
    for name in names:
        try:
            if pwd.getpwnam(name).pw_gecos != USER_MARK:
                continue
        except KeyError:
            continue
        subprocess.run(["userdel", name], capture_output=True)


def end_processes_of(uids):
    """Ends every process running as one of the bench's users (the guard's lockers, its
    display checks; the users exist only for the bench), by pid."""
    uids = set(uids)
    for _ in range(20):
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry}").st_uid in uids:
                    found.append(int(entry))
            except FileNotFoundError:
                pass
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


# ---------------------------------------------------------------- processes


def stop_many(procs, grace=3.0):
    """bench.stop for many at once: SIGTERM to every group, then SIGKILL to those left."""
    live = [p for p in procs if p and p.returncode is None and p.poll() is None]
    grace += 0.02 * len(live)  # 300 Xvfb ending at once on a busy machine: a killed one leaves its socket
    for sig in (signal.SIGCONT, signal.SIGTERM):  # SIGCONT: a stopped agent takes its SIGTERM
        for p in live:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
    end = time.monotonic() + grace
    for p in live:
        try:
            p.wait(timeout=max(0.01, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in live:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    for p in procs:
        if p in bench._started:
            bench._started.remove(p)


def start_xvfbs(n, batch=20):
    """n small Xvfb servers, each on a free display, `batch` starting at once: [bench.Xvfb]."""
    out = []
    while len(out) < n:
        pending = [bench.Xvfb(extra=("-screen", "0", "64x64x24"), wait=False) for _ in range(min(batch, n - len(out)))]
        for x in pending:
            try:
                x.ready(timeout=30)
            except RuntimeError:
                raise RuntimeError(f"Xvfb did not start ({len(out)} of {n} running)") from None
            out.append(x)
    return out


def cpu_share(pid, seconds_fn):
    """CPU of pid (every thread) over what seconds_fn() waits, in % of a core, and the span."""
    before, t0 = cpu_ns(pid), time.monotonic()
    seconds_fn()
    after, t1 = cpu_ns(pid), time.monotonic()
    return grown(before, after) / 1e9 / (t1 - t0) * 100, t1 - t0


# ---------------------------------------------------------------- the D-Bus children (Debian's python3)


def child_setup():
    """Waits for logind's mock, gives it GetSessionByPID (bus.py's) and prints `ready`;
    then, for each line of stdin (JSON [[id, uid, name, display, remote]]), adds those
    sessions, each announced with SessionNew as logind does, and prints `added K`."""
    sys.path.insert(0, HARNESS)
    import dbus
    import bus as harness_bus
    b = harness_bus.wait_for_name(harness_bus.LOGIN1)
    m = harness_bus.manager(b)
    m.AddMethod(harness_bus.MANAGER, "GetSessionByPID", "u", "o", harness_bus.GET_SESSION_BY_PID,
                dbus_interface=harness_bus.MOCK)
    print("ready", flush=True)
    for line in sys.stdin:
        sessions = json.loads(line)
        for session_id, uid, name, display, remote in sessions:
            path = m.AddSession(session_id, "seat0", dbus.UInt32(uid), name, True, dbus_interface=harness_bus.MOCK)
            props = {"Type": dbus.String("x11"), "Class": dbus.String("user"), "Display": dbus.String(display),
                     "Remote": dbus.Boolean(remote)}
            if remote:
                props["RemoteHost"] = dbus.String("thin-client.example")
            b.get_object(harness_bus.LOGIN1, path, introspect=False).UpdateProperties(
                harness_bus.SESSION, dbus.Dictionary(props, signature="sv"), dbus_interface=harness_bus.MOCK)
            m.EmitSignal(harness_bus.MANAGER, "SessionNew", "so", [session_id, dbus.ObjectPath(path)],
                         dbus_interface=harness_bus.MOCK)
        print("added", len(sessions), flush=True)


def child_churn(ids_file, per_second):
    """Each session's IdleHint toggled `per_second` times a second, the changes spread
    evenly over the second, through the mock (UpdateProperties: PropertiesChanged),
    until SIGTERM; then prints how many changes were made in how long."""
    sys.path.insert(0, HARNESS)
    import dbus
    import bus as harness_bus
    with open(ids_file) as f:
        ids = json.load(f)
    b = dbus.SystemBus()
    objects = [b.get_object(harness_bus.LOGIN1, f"{harness_bus.MANAGER_PATH}/session/{i}", introspect=False)
               for i in ids]
    values = [False] * len(ids)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    interval = 1.0 / (len(ids) * per_second)
    print("churning", flush=True)
    t0, k = time.monotonic(), 0
    while not stop:
        delay = t0 + k * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
            continue
        i = k % len(ids)
        values[i] = not values[i]
        objects[i].UpdateProperties(harness_bus.SESSION, dbus.Dictionary({"IdleHint": dbus.Boolean(values[i])}, signature="sv"),
                                    dbus_interface=harness_bus.MOCK)
        k += 1
    print(f"changes {k} seconds {time.monotonic() - t0:.3f}", flush=True)


# ---------------------------------------------------------------- one world of N sessions


def guard_argv(command, bindir, agent):
    """The --guard command with its executables (words naming a file of the build) run
    as installed copies in bindir; xidlelock-guard learns the agent's path."""
    argv = []
    for word in shlex.split(command):
        path = word if os.path.isabs(word) else os.path.join(ROOT, word)
        if os.sep in word and os.path.isfile(path):
            installed = os.path.join(bindir, os.path.basename(path))
            if not os.path.exists(installed):
                shutil.copy(path, installed)
                os.chmod(installed, 0o711)
            word = installed
        argv.append(word)
    if os.path.basename(argv[0]) == "xidlelock-guard" and "--agent" not in argv:
        argv += ["--agent", agent]
    return argv + ["--verbose"]


LOCKER = """#!/bin/sh
# The bench's locker: when it started (CLOCK_REALTIME) in a stamp named by the session.
date +%s.%N > "$1/$XDG_SESSION_ID"
exec sleep 86400
"""


class World:
    """N sessions, the guard and its agents (see the module's docstring)."""

    def __init__(self, users, args, tag):
        self.n = len(users)
        self.users = users
        self.args = args
        self.tag = tag
        self.procs = []
        self.xvfbs = []
        self.agents = {}  # session id -> Popen
        self.locked_before = []  # sessions the guard's locker held before the bench's kill
        self.guard = self.holder = self.daemon = self.logind = self.setup = None
        self.tmp = tempfile.mkdtemp(prefix="xidlelock-guard-scale-")
        os.chmod(self.tmp, 0o755)
        for d in ("etc", "run", "ns", "users"):
            os.mkdir(os.path.join(self.tmp, d), 0o755)
            os.chmod(os.path.join(self.tmp, d), 0o755)
        self.stamps = os.path.join(self.tmp, "stamps")
        os.mkdir(self.stamps)
        os.chmod(self.stamps, 0o1777)
        # Root's directory the users pass through: the installed agent (0711) and the locker.
        self.bindir = tempfile.mkdtemp(prefix="xidlelock-guard-scale-bin-", dir="/var/tmp")
        os.chmod(self.bindir, 0o755)
        self.binary = os.path.join(self.bindir, "xidlelock")
        shutil.copy(bench.XIDLELOCK, self.binary)
        os.chmod(self.binary, 0o711)
        sibling = os.path.join(os.path.dirname(bench.XIDLELOCK), "xidlelock-guard")
        if os.path.exists(sibling):  # `xidlelock guard` execs it from its own directory
            shutil.copy(sibling, os.path.join(self.bindir, "xidlelock-guard"))
            os.chmod(os.path.join(self.bindir, "xidlelock-guard"), 0o711)
        locker = os.path.join(self.bindir, "bench-locker")
        with open(locker, "w") as f:
            f.write(LOCKER)
        os.chmod(locker, 0o755)
        with open(os.path.join(self.tmp, "etc", "policy"), "w") as f:
            f.write(f"secure\nmax-lock-after 1h\nlocker {locker} {self.stamps}\non-agent-lost lock\n"
                    f"agent-grace {GRACE_S}s\n")
        self.guard_log = os.path.join(RESULTS, f"guard-scale-{tag}.log")
        self.ids = [f"b{i + 1:03d}" for i in range(self.n)]

    def log(self, name):
        return open(os.path.join(self.tmp, name), "w")

    def start(self):
        t0 = time.monotonic()
        self.xvfbs = start_xvfbs(self.n)
        self.procs += [x.proc for x in self.xvfbs]
        socket = os.path.join(self.tmp, "system.bus")
        config = os.path.join(self.tmp, "system-bus.conf")
        with open(config, "w") as f:
            f.write(bench.debian_system_bus_config(socket))
        self.daemon = bench.start(["dbus-daemon", f"--config-file={config}", "--nofork"], stderr=self.log("bus.log"))
        self.procs.append(self.daemon)
        self.bus_env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={socket}")
        if not wait_for(lambda: os.path.exists(socket) or self.daemon.poll() is not None, 15) \
                or self.daemon.poll() is not None:
            raise RuntimeError("the private system bus did not start")
        self.logind = bench.start([SYSTEM_PYTHON, "-m", "dbusmock", "--system", "--template", "logind"],
                                  env=self.bus_env, stderr=self.log("logind.log"))
        self.procs.append(self.logind)
        # logind is up before the guard starts, as at boot. The child is started as
        # bench.start starts one, with a pipe to its stdin: the sessions to add.
        self.setup = subprocess.Popen([SYSTEM_PYTHON, os.path.abspath(__file__), "_setup"], env=self.bus_env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log("setup.log"),
                                      start_new_session=True, preexec_fn=bench._child_setup)
        bench._started.append(self.setup)
        self.procs.append(self.setup)
        self.setup_send = self.setup.stdin
        if self.setup_answer() != "ready":
            raise RuntimeError("logind's mock did not start (setup.log)")

        ready = os.path.join(self.tmp, "ns", "ready")
        self.holder = bench.start(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                   bench.NAMESPACE_SCRIPT, "sh", self.tmp], stderr=self.log("namespace.log"))
        self.procs.append(self.holder)
        if not wait_for(lambda: os.path.exists(ready) or self.holder.poll() is not None, 10) \
                or self.holder.poll() is not None:
            raise RuntimeError("no private mount namespace for /etc/xidlelock and /run/xidlelock")
        self.enter = ["nsenter", f"--target={self.holder.pid}", "--mount", "--"]

        env = {k: v for k, v in self.bus_env.items()
               if k not in ("DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS", "XDG_SESSION_ID", "XDG_RUNTIME_DIR")}
        self.root_env = env
        with open(self.guard_log, "w") as log:
            self.guard = bench.start(self.enter + guard_argv(self.args.guard, self.bindir, self.binary), env=env,
                                     stderr=log)
        self.procs.append(self.guard)
        if not wait_for(lambda: os.path.exists(os.path.join(self.tmp, "run", "guard.sock"))
                        or self.guard.poll() is not None, 15) or self.guard.poll() is not None:
            raise RuntimeError(f"the guard did not start (exit {self.guard.returncode}; {self.guard_log})")

        # The users log in, a few at a time: their sessions (SessionNew each), then at once
        # their agents, as a session's autostart starts it (a session with no agent for
        # agent-grace is locked by the guard, as it should be).
        displays = [x.display for x in self.xvfbs]
        spec = [[sid, uid, name, display, i % REMOTE_EVERY == REMOTE_EVERY - 1]
                for i, (sid, (name, uid), display) in enumerate(zip(self.ids, self.users, displays))]
        self.remote = sum(1 for s in spec if s[4])
        for k in range(0, self.n, LOGIN_BATCH):
            batch = spec[k:k + LOGIN_BATCH]
            self.setup_send.write((json.dumps(batch) + "\n").encode())
            self.setup_send.flush()
            if self.setup_answer() != f"added {len(batch)}":
                raise RuntimeError("logind's mock did not add the sessions (setup.log)")
            for sid, uid, name, display, _ in batch:
                self.start_agent(sid, name, uid, display)
        self.started_in = time.monotonic() - t0

    def setup_answer(self):
        """The setup child's next line (30 s at most)."""
        ready, _, _ = select.select([self.setup.stdout], [], [], 30)
        return self.setup.stdout.readline().decode().strip() if ready else None

    def start_agent(self, sid, name, uid, display):
        base = os.path.join(self.tmp, "users", name)
        for d, mode in ((base, 0o755), (base + "/home", 0o700), (base + "/runtime", 0o700), (base + "/config", 0o700)):
            os.makedirs(d, exist_ok=True)
            os.chmod(d, mode)
            os.chown(d, uid, uid)
        env = {"PATH": "/usr/bin:/bin", "DISPLAY": display, "HOME": base + "/home", "USER": name, "LOGNAME": name,
               "XDG_RUNTIME_DIR": base + "/runtime", "XDG_CONFIG_HOME": base + "/config", "XDG_SESSION_ID": sid,
               "MOCK_LOGIND_SESSION": sid, "DBUS_SYSTEM_BUS_ADDRESS": self.bus_env["DBUS_SYSTEM_BUS_ADDRESS"]}
        # setpriv changes the credentials, which clears PR_SET_PDEATHSIG: it sets it again.
        as_user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--pdeathsig", "TERM"]
        with open(os.path.join(base, "agent.log"), "w") as log:
            p = bench.start(self.enter + as_user + [self.binary, "--lock-after", "1h", "--locker", "true"],
                            env=env, stderr=log)
        self.agents[sid] = p
        self.procs.append(p)

    def verified_in_log(self):
        """Sessions whose running agent the guard's log says it verified."""
        with open(self.guard_log, errors="replace") as f:
            text = f.read()
        return {sid for sid, p in self.agents.items() if f"session {sid}: agent pid {p.pid} verified" in text}

    def wait_verified(self):
        t0 = time.monotonic()
        wait_for(lambda: len(self.verified_in_log()) == self.n or self.guard.poll() is not None,
                 30 + 0.5 * self.n, step=0.25)
        return len(self.verified_in_log()), time.monotonic() - t0

    def doctor(self):
        """Root's `doctor --policy --json`: (seconds, exit status, its JSON or None)."""
        argv = self.enter + [self.binary, "doctor", "--policy", "/etc/xidlelock/policy", "--json"]
        t0 = time.monotonic()
        try:
            r = subprocess.run(argv, env=self.root_env, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            return float("inf"), None, None
        took = time.monotonic() - t0
        try:
            answer = json.loads(r.stdout)
        except ValueError:
            answer = None
        return took, r.returncode, answer

    def guard_lines(self, *needles):
        with open(self.guard_log, errors="replace") as f:
            return [line.rstrip() for line in f if any(n in line for n in needles)]

    def close(self):
        # The guard first, so that it takes the agents' ends for no loss; its lockers
        # outlive it (it never kills one: that would unlock) and are ended by uid.
        if self.guard:
            stop_many([self.guard])
        stop_many(list(self.agents.values()))
        end_processes_of(uid for _, uid in self.users)
        stop_many([x.proc for x in self.xvfbs] + [p for p in (self.setup, self.holder, self.logind, self.daemon) if p])
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.bindir, ignore_errors=True)


# ---------------------------------------------------------------- the measures


def doctor_verified(answer):
    """Sessions root's doctor names, and those whose agent it says the guard verified."""
    sessions = (answer or {}).get("sessions") or []
    verified = sum(1 for s in sessions for q in s.get("requirements", [])
                   if q.get("requirement") == "guard" and q.get("met") and "verified" in (q.get("detail") or ""))
    return verified, len(sessions)


def private_kb(pid):
    """The pages only this process maps (Private_Clean + Private_Dirty, smaps_rollup): its
    Pss falls as agents start, since they map the same executable's pages."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return sum(int(fields[key].split()[0]) for key in ("Private_Clean", "Private_Dirty"))


def doctor_times(world, repeats):
    out = []
    for _ in range(repeats):
        out.append(world.doctor())
    return out


def kinds(lines, most=8):
    """Lines alike but for sessions, users and numbers, counted: [(count, first such line)],
    the most frequent first."""
    import re
    seen = {}
    for line in lines:
        key = re.sub(r"\d+", "#", line)
        seen.setdefault(key, [0, line])[0] += 1
    return sorted((tuple(v) for v in seen.values()), key=lambda v: -v[0])[:most]


def lock_after(world, sid, sig):
    """Sends sig to session sid's agent; seconds until the policy's locker's stamp."""
    stamp = os.path.join(world.stamps, sid)
    agent = world.agents[sid]
    if os.path.exists(stamp):
        world.locked_before.append(sid)
        return None
    sent = time.time()
    os.kill(agent.pid, sig)
    if not wait_for(lambda: os.path.exists(stamp) and os.path.getsize(stamp) > 0, GRACE_S + 20, step=0.01):
        return None
    with open(stamp) as f:
        return float(f.read().strip()) - sent


def measure(n, users, args):
    """Every figure for N sessions: a dict."""
    res = {"n": n}
    world = World(users[:n], args, str(n))
    try:
        print(f"  N={n}: starting {n} Xvfb, the bus, logind's mock, the guard, {n} agents ...", flush=True)
        world.start()
        res["remote"] = world.remote
        count, took = world.wait_verified()
        res["verified_log"], res["verify_s"], res["start_s"] = count, took, world.started_in
        print(f"  N={n}: {count}/{n} verified in the guard's log ({world.started_in:.1f} s to start, "
              f"{took:.1f} s more to verify)", flush=True)
        if world.guard.poll() is not None:
            raise RuntimeError(f"the guard exited ({world.guard.returncode}): {world.guard_log}")
        _, status, answer = world.doctor()
        res["verified_doctor"], res["doctor_sessions"] = doctor_verified(answer)
        res["doctor_status"] = status
        res["doctor_answer"] = answer

        bench.settle([world.guard.pid], quiet_for=1.0, limit=30)
        res["memory"] = dict(memory_kb(world.guard.pid), Pss=pss_kb(world.guard.pid), Private=private_kb(world.guard.pid))
        print(f"  N={n}: idle window {args.window:.0f} s ...", flush=True)
        before_sw = ctx_switches(world.guard.pid)
        res["idle_cpu_pct"], span = cpu_share(world.guard.pid, lambda: time.sleep(args.window))
        res["idle_wakeups"] = grown(before_sw, ctx_switches(world.guard.pid))
        res["idle_window_s"] = span
        res["doctor_idle"] = doctor_times(world, args.doctor_repeats)

        print(f"  N={n}: churn {args.churn_window:.0f} s (each IdleHint once a second) ...", flush=True)
        ids_file = os.path.join(world.tmp, "ids.json")
        with open(ids_file, "w") as f:
            json.dump(world.ids, f)
        churn = bench.start([SYSTEM_PYTHON, os.path.abspath(__file__), "_churn", ids_file, "1"], env=world.bus_env,
                            stdout=subprocess.PIPE)
        world.procs.append(churn)
        try:
            if churn.stdout.readline().strip() != b"churning":
                raise RuntimeError("the churn did not start")
            time.sleep(2.0)  # the guard's answer to the first changes, before the window
            mock_before = cpu_ns(world.logind.pid)
            before_sw = ctx_switches(world.guard.pid)
            profiler = None
            if args.perf:
                profiler = subprocess.Popen(["perf", "record", "-q", "-F", "499", "-g", "-p", str(world.guard.pid),
                                             "-o", os.path.join(RESULTS, f"guard-scale-{n}-churn.perf.data")],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                res["churn_cpu_pct"], span = cpu_share(world.guard.pid, lambda: time.sleep(args.churn_window))
            finally:
                if profiler:
                    profiler.send_signal(signal.SIGINT)
                    profiler.wait(timeout=60)
                    # Read now, while the installed executable it sampled still exists.
                    data = os.path.join(RESULTS, f"guard-scale-{n}-churn.perf.data")
                    with open(data[:-len(".data")] + ".txt", "w") as out:
                        subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                                        "--percent-limit", "0.5"], stdout=out, stderr=subprocess.DEVNULL, timeout=300)
            res["churn_wakeups"] = grown(before_sw, ctx_switches(world.guard.pid))
            res["mock_cpu_pct"] = grown(mock_before, cpu_ns(world.logind.pid)) / 1e9 / span * 100
            res["doctor_churn"] = doctor_times(world, args.doctor_repeats)
        finally:
            churn.send_signal(signal.SIGTERM)
            out, _ = churn.communicate(timeout=30)
            bench._started.remove(churn)
        words = out.decode().split()
        if len(words) >= 4 and words[0] == "changes":
            res["churn_rate"] = int(words[1]) / float(words[3])

        # What the guard said until now (before the kills, which it must report loudly).
        # Audit entries repeat the line before them; the bench's namespace has no journal.
        trouble = [line for line in world.guard_lines("error", "warning", "refus", "cannot", "NOT guarded")
                   if "audit " not in line and "the systemd journal does not take entries" not in line]
        res["trouble_count"], res["trouble"] = len(trouble), kinds(trouble)
        res["locked_before_kills"] = sorted({line.split()[2] for line in world.guard_lines(
            "started the policy's locker (pid") if "audit" not in line})
        samples = max(1, min(args.kills, n // 2))
        res["kill9"] = [lock_after(world, world.ids[i], signal.SIGKILL) for i in range(samples)]
        if n >= 2:
            res["sigstop"] = [lock_after(world, world.ids[samples + i], signal.SIGSTOP) for i in range(samples)]
        res["lost_lines"] = world.guard_lines("started the policy's locker", "lost", "frozen", "stopped")[:12]
        res["guard_alive"] = world.guard.poll() is None
        res["locked_before_kill"] = world.locked_before

    finally:
        world.close()
    if n == 1:
        # One session: SIGSTOP in a world of its own (the first one's agent was killed).
        world = World(users[:1], args, "1-sigstop")
        try:
            world.start()
            world.wait_verified()
            res["sigstop"] = [lock_after(world, world.ids[0], signal.SIGSTOP)]
        finally:
            world.close()
    return res


# ---------------------------------------------------------------- the table


def ms(s):
    return "n/a" if s is None or s != s else ("> 30 s" if s == float("inf") else f"{s * 1000:.0f} ms")


def seconds(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "**no locker**"
    return f"{median(xs):.2f} s" + (f" ({min(xs):.2f}–{max(xs):.2f}, {len(xs)})" if len(xs) > 1 else "")


def doctor_cell(samples):
    """Median answer time, and the worst when it failed or was slow."""
    times = [t for t, status, _ in samples]
    failed = sum(1 for _, status, answer in samples if answer is None)
    text = ms(median(times)) + (f" (max {ms(max(times))})" if times else "")
    return text + (f", {failed} without an answer" if failed else "")


def render(results, args, date, first):
    lines = [f"# The guard at scale (issue #36)", "",
             f"Generated by `bench/guard-scale.py` on {date} ({'QUICK mode, ' if args.quick else ''}"
             f"idle window {args.window:.0f} s, churn window {args.churn_window:.0f} s; guard `{args.guard}`; "
             f"release build). Machine: {os.cpu_count()} cores, shared; load {first:.2f} at start, "
             f"{os.getloadavg()[0]:.2f} at end.", "",
             "Each N: N users, N Xvfb, N agents (installed 0711, root's), python3-dbusmock's logind with "
             "GetSessionByPID on a private system bus (every fourth session Remote), the guard as root, policy "
             f"`agent-grace {GRACE_S}s`. \"before\": the issue's table (the guard before its rework); \"now\": "
             "this run. Verified: the sessions root's doctor says the guard verified, of N (in brackets, the "
             "agents the guard's log says it verified at some time). "
             "Churn: each session's IdleHint changed once a second through the mock (the rate it reached in "
             "brackets). Wake-ups: the guard's voluntary + involuntary context switches, every thread. "
             "kill -9 / SIGSTOP → locker: from the signal to the policy's locker's own stamp, median (min–max, "
             "samples). Memory: the guard's RssAnon, its private pages (Private_Clean + Private_Dirty) and Pss "
             "(which falls as N grows: the agents map the same executable); per session (at N − at 1) / (N − 1).",
             "",
             "| N | verified (root's doctor; the guard's log) | guard idle | guard under churn "
             "| root's doctor idle; churn | kill -9 → locker | SIGSTOP → locker "
             "| guard RssAnon / private / Pss, kB (per session: RssAnon / private) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    one = next((r for r in results if r["n"] == 1 and "memory" in r), None)
    rows = {r["n"]: r for r in results}
    for n in sorted(set(rows) | set(BEFORE)):
        r, b = rows.get(n), BEFORE.get(n)
        if b:
            lines.append(f"| {n}, before | {b['verified']} | {b['idle']} | {b['churn']} | {b['doctor']} | {b['kill']} "
                         f"| – | – |")
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {n}, now | **failed: {r['error']}** | | | | | | |")
            continue
        mem = r["memory"]
        per = ""
        if one and n > 1:
            per = (f" ({(mem['RssAnon'] - one['memory']['RssAnon']) / (n - 1):.1f} / "
                   f"{(mem['Private'] - one['memory']['Private']) / (n - 1):.1f})")
        verified = f"{r['verified_doctor']} of {n} ({r['verified_log']})"
        if r["verified_doctor"] < n:
            verified = "**" + verified + "**"
        idle = f"{r['idle_cpu_pct']:.2f} % CPU, {r['idle_wakeups']} wake-ups"
        churn = (f"{r['churn_cpu_pct']:.1f} %, {r['churn_wakeups'] / args.churn_window:.0f} wake-ups/s "
                 f"({r.get('churn_rate', float('nan')):.0f} changes/s; mock {r['mock_cpu_pct']:.0f} %)")
        lines.append(f"| {n}, now | {verified} | {idle} | {churn} | {doctor_cell(r['doctor_idle'])}; "
                     f"{doctor_cell(r['doctor_churn'])} | {seconds(r['kill9'])} | {seconds(r.get('sigstop', []))} "
                     f"| {mem['RssAnon']:,} / {mem['Private']:,} / {mem['Pss']:,}{per} |")
    lines += ["", "## Targets", "", "| N | every agent verified | 0 wake-ups idle | churn ≤ 3 % of a core "
              "| doctor ≤ 1 s (idle, churn) | kill -9, SIGSTOP → locker ≤ agent-grace + 1 s |",
              "| --- | --- | --- | --- | --- | --- |"]

    def ok(b):
        return "pass" if b else "**fail**"
    for r in results:
        if "error" in r:
            continue
        times = [t for t, _, _ in r["doctor_idle"] + r["doctor_churn"]]
        answered = all(a is not None for _, _, a in r["doctor_idle"] + r["doctor_churn"])
        locks = r["kill9"] + r.get("sigstop", [])
        lines.append(f"| {r['n']} | {ok(r['verified_doctor'] == r['n'])} | {ok(r['idle_wakeups'] == 0)} "
                     f"| {ok(r['churn_cpu_pct'] <= 3)} | {ok(answered and max(times) <= 1)} "
                     f"| {ok(all(x is not None and x <= GRACE_S + 1 for x in locks))} |")
    notes = []
    for r in results:
        if r.get("locked_before_kills"):
            notes.append(f"- N = {r['n']}: **the guard started its locker in {len(r['locked_before_kills'])} sessions "
                         f"before any agent was killed or stopped**: {', '.join(r['locked_before_kills'][:20])}")
        if r.get("locked_before_kill"):
            notes.append(f"- N = {r['n']}: sessions already locked when the bench was to kill their agent (no "
                         f"time taken): {', '.join(r['locked_before_kill'])}")
        if r.get("trouble"):
            notes.append(f"- N = {r['n']}: the guard's errors, warnings and refusals before the kills "
                         f"({r['trouble_count']} line{'s' if r['trouble_count'] != 1 else ''}; each kind: how many, the first):")
            notes += [f"  - {count} × `{line[:300]}`" for count, line in r["trouble"]]
    if notes:
        lines += ["", "## What the guard said", ""] + notes
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", default=None, help="the Ns, comma-separated (default 1,10,100,300; QUICK 1,10)")
    ap.add_argument("--quick", action="store_true", help="10 s windows; N = 1,10 unless --sessions")
    ap.add_argument("--window", type=float, default=None, help="the idle window, s (default 60; QUICK 10)")
    ap.add_argument("--churn-window", type=float, default=None, help="the churn window, s (default 30; QUICK 10)")
    ap.add_argument("--doctor-repeats", type=int, default=5, help="root's doctor asked this often, idle and in churn")
    ap.add_argument("--kills", type=int, default=3, help="agents killed (and as many stopped) per N, at most N/2")
    ap.add_argument("--guard", default=".build/release/xidlelock guard",
                    help="the guard's command (words naming a built file run as root's installed copies; "
                         "`.build/release/xidlelock-guard` gets --agent PATH); --verbose is added")
    ap.add_argument("--perf", action="store_true", help="profile the guard in the churn window (perf record -g): "
                    "bench/results/guard-scale-N-churn.perf.data, for `perf report -i`")
    ap.add_argument("--keep-users", action="store_true", help="keep the xilbench users for the next run")
    ap.add_argument("--remove-users", action="store_true",
                    help="only remove the bench's users (xilbench001..999 with its comment) that --keep-users left")
    ap.add_argument("--output", default=os.path.join(RESULTS, "guard-scale.md"))
    args = ap.parse_args()
    if args.remove_users:
        remove_users([f"{USER_PREFIX}{i:03d}" for i in range(1, 1000)])
        return 0
    args.window = args.window or (10.0 if args.quick else 60.0)
    args.churn_window = args.churn_window or (10.0 if args.quick else 30.0)
    try:
        ns = sorted({int(x) for x in (args.sessions or ("1,10" if args.quick else "1,10,100,300")).split(",")})
    except ValueError:
        sys.exit(f"guard-scale: --sessions wants numbers separated by commas, not {args.sessions!r}")
    if not ns or ns[0] < 1 or ns[-1] > 999:
        sys.exit("guard-scale: each N must be 1 to 999 (users xilbench001 to xilbench999)")
    missing = bench.guard_missing()
    if missing:
        sys.exit(f"guard-scale: {missing}")
    for tool in ("Xvfb", "useradd", "userdel"):
        if not shutil.which(tool):
            sys.exit(f"guard-scale: {tool} is not installed")
    if not os.path.exists(bench.XIDLELOCK):
        sys.exit(f"guard-scale: {bench.XIDLELOCK} is missing: run `make release` (make bench-guard does)")
    # Each session costs the harness a few descriptors (its Xvfb's pipe, log files).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.makedirs(RESULTS, exist_ok=True)
    # SIGINT too: started in the background by a shell, the script inherits it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, bench._on_signal)
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    first = os.getloadavg()[0]
    results = []
    try:
        print(f"users: {ns[-1]} ...", flush=True)
        users, created = bench_users(ns[-1])
        print(f"users: {len(users)} ({len(created)} created)", flush=True)
        for n in ns:
            try:
                results.append(measure(n, users, args))
            except RuntimeError as e:
                print(f"  N={n}: failed: {e}", flush=True)
                results.append({"n": n, "error": str(e)})
            with open(os.path.join(RESULTS, "guard-scale.json"), "w") as f:
                json.dump(results, f, indent=1, default=str)
    finally:
        bench.stop_all()
        if not args.keep_users:
            remove_users([f"{USER_PREFIX}{i:03d}" for i in range(1, ns[-1] + 1)])
    text = render(results, args, date, first)
    with open(args.output, "w") as f:
        f.write(text)
    print()
    print(text)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_setup":
        child_setup()
    elif len(sys.argv) > 1 and sys.argv[1] == "_churn":
        child_churn(sys.argv[2], float(sys.argv[3]))
    else:
        try:
            sys.exit(main())
        except KeyboardInterrupt as e:
            bench.stop_all()
            sys.exit(f"guard-scale: interrupted ({e}); every process it started has been ended")
