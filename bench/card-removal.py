#!/usr/bin/python3
"""Removal-to-lock latency of --lock-on-card-removal on a real pcscd with
vsmartcard's virtual reader (vpcd) and card (vicc): N removals (default 20),
each timed from vicc's kill to the agent's card-removed event (pcscd's detection
plus the agent's delivery) and to the locker's start. Needs root (pcscd listens
on /run/pcscd) and no other pcscd running.

    python3 bench/card-removal.py [N] [path/to/xidlelock]
"""
import json, os, random, signal, socket, statistics, subprocess, sys, tempfile, threading, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, ".build/debug/xidlelock")
locker_bin = os.path.join(os.path.dirname(binary), "TestLocker")
work = tempfile.mkdtemp(prefix="card-bench-")
procs = []


def free_port_pair():
    while True:
        port = random.randint(20000, 60000)
        try:
            for p in (port, port + 1):
                with socket.socket() as s:
                    s.bind(("", p))
            return port
        except OSError:
            pass


def wait(what, condition, timeout=20):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def start(args, **kw):
    p = subprocess.Popen(args, cwd=work, **kw)
    procs.append(p)
    return p


try:
    read, write = os.pipe()
    start(["Xvfb", "-displayfd", str(write), "-noreset", "-nolisten", "tcp"], pass_fds=[write],
          stderr=subprocess.DEVNULL)
    os.close(write)
    display = ":" + os.read(read, 64).decode().strip()
    env = dict(os.environ, DISPLAY=display)
    env.pop("PCSCLITE_CSOCK_NAME", None)

    port = free_port_pair()
    os.makedirs(f"{work}/conf")
    with open(f"{work}/conf/vpcd", "w") as f:
        f.write(f'FRIENDLYNAME "Virtual PCD"\nDEVICENAME /dev/null:{port}\n'
                f"LIBPATH /usr/lib/pcsc/drivers/serial/libifdvpcd.so\nCHANNELID {port}\n")
    for stale in ("/run/pcscd/pcscd.comm", "/run/pcscd/pcscd.pid"):
        if os.path.exists(stale):
            os.unlink(stale)
    os.makedirs("/run/pcscd", exist_ok=True)
    pcscd_log = open(f"{work}/pcscd.log", "w")
    start(["pcscd", "--foreground", "-c", f"{work}/conf"], stdout=pcscd_log, stderr=pcscd_log)
    wait("pcscd", lambda: os.path.exists("/run/pcscd/pcscd.comm"))

    sock = f"{work}/agent.sock"
    locker = f"date +%s%6N >> started; exec {locker_bin} --hold 1100 --unlock unlock"
    agent_log = open(f"{work}/agent.log", "w")
    start([binary, "--lock-after", "1h", "--lock-on-card-removal", "--no-logind", "--no-screensaver-service",
           "--locker", locker, "--socket", sock], env=env, stdout=agent_log, stderr=agent_log)
    wait("the agent", lambda: os.path.exists(sock))

    def status():
        out = subprocess.run([binary, "status", "--json", "--socket", sock], capture_output=True, text=True).stdout
        return json.loads(out) if out else {}

    removed_events = []
    events = start([binary, "events", "--json", "--socket", sock], stdout=subprocess.PIPE, text=True)

    def follow():
        for line in events.stdout:
            if '"card-removed"' in line:
                removed_events.append(time.time())
    threading.Thread(target=follow, daemon=True).start()

    pypath = f"/usr/lib/python3/site-packages/virtualsmartcard:{work}/py"
    os.makedirs(f"{work}/py")
    os.symlink("/usr/lib/python3/dist-packages/Cryptodome", f"{work}/py/Crypto")

    def card(state):
        readers = status().get("card", {}).get("readers", [])
        return any(r["name"] == "Virtual PCD 00 00" and r["card"] == state for r in readers)

    to_event, to_locker = [], []
    for k in range(N):
        vicc = start(["/usr/bin/python3", "/usr/bin/vicc", "-P", str(port)], env=dict(env, PYTHONPATH=pypath),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait("the card", lambda: card("present"))
        time.sleep(random.uniform(0, 0.5))  # a removal at any phase of pcscd's polling
        before = len(removed_events)
        lines = len(open(f"{work}/started").read().split()) if os.path.exists(f"{work}/started") else 0
        t0 = time.time()
        vicc.kill()
        vicc.wait()
        wait("the locker", lambda: os.path.exists(f"{work}/started") and len(open(f"{work}/started").read().split()) > lines)
        wait("the event", lambda: len(removed_events) > before)
        started = int(open(f"{work}/started").read().split()[-1]) / 1e6
        to_event.append((removed_events[before] - t0) * 1000)
        to_locker.append((started - t0) * 1000)
        print(f"removal {k + 1}: event {to_event[-1]:.0f} ms, locker started {to_locker[-1]:.0f} ms", flush=True)
        open(f"{work}/unlock", "w").close()
        wait("the unlock", lambda: status().get("state") == "active")
        os.unlink(f"{work}/unlock")

    def summary(name, xs):
        print(f"{name}: median {statistics.median(xs):.0f} ms, worst {max(xs):.0f} ms, best {min(xs):.0f} ms over {len(xs)}")
    summary("removal to card-removed event (pcscd's detection + delivery)", to_event)
    summary("removal to locker start", to_locker)
finally:
    for p in reversed(procs):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
