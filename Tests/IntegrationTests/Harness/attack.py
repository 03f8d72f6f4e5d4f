"""The session's own user against the guard (GuardAttackTests), run as that user with
Debian's /usr/bin/python3: what the kernel lets any process of the user do (DESIGN.md,
"What the kernel lets that user do"). Each prints what it did, one line at a time, and
stays (holding what it took: a socket, a descriptor) until it is killed; the tests'
clean-up ends every process of the user.

    attack.py proxy-register SOCKET XIDLELOCK DISPLAY STATUS_FILE
        connects to the guard's SOCKET, forks a helper that keeps the connection, and
        execs `XIDLELOCK --help` with stdout on a full pipe (it blocks in write for ever,
        under the connect()'s pid). Once that process runs XIDLELOCK and sleeps, the
        helper sends `register DISPLAY`, `status JSON` (STATUS_FILE's JSON, or {} when
        empty) and `locked`; prints `exec'd PID`, `sent`, then `guard: LINE` for every
        line the guard sends, and `guard closed` at its end
    attack.py traced-agent LOG AGENT ARGS...
        forks; the child asks to be traced (PTRACE_TRACEME) and executes AGENT ARGS
        (stdout and stderr into LOG); at its exec stop the parent opens /proc/PID/mem
        for writing and prints `agent PID`, then `open ok` or `open failed ERRNO_NAME`;
        then detaches (patching nothing, keeping the descriptor) and prints `detached`
    attack.py mem-window PID SECONDS
        tries to open /proc/PID/mem for writing; sends PID SIGUSR1 (the agent's reload:
        it executes itself again in place) and tries again as fast as it can for
        SECONDS; prints `before: ok|ERRNO_NAME`, then `after: attempts N opened M first
        T_MS last T_MS` (times in ms after the signal) and keeps what it opened
"""
import ctypes
import errno
import json
import os
import signal
import socket
import sys
import time

PTRACE_TRACEME = 0
PTRACE_DETACH = 17


def say(text):
    print(text, flush=True)


def libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.ptrace.restype = ctypes.c_long
    lib.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def open_mem(pid):
    """A descriptor of /proc/PID/mem opened for writing, or the errno's name."""
    try:
        return os.open(f'/proc/{pid}/mem', os.O_RDWR), None
    except OSError as e:
        return None, errno.errorcode.get(e.errno, str(e.errno))


def stay():
    while True:
        signal.pause()


def proxy_register(args):
    path, program, display, status_file = args
    with open(status_file, encoding='utf-8') as f:
        text = f.read().strip()
    status = json.dumps(json.loads(text), separators=(',', ':')) if text else '{}'
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)  # SO_PEERCRED: this process, whatever it becomes
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b'x' * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    parent = os.getpid()
    if os.fork() == 0:
        # The helper: keeps the connection (and the pipe's read end, never read).
        os.close(write_end)
        deadline = time.monotonic() + 10
        while True:
            with open(f'/proc/{parent}/comm') as f:
                comm = f.read().strip()
            with open(f'/proc/{parent}/stat') as f:
                state = f.read().rsplit(')', 1)[1].split()[0]
            if comm == os.path.basename(program)[:15] and state == 'S':
                break
            if time.monotonic() > deadline:
                say(f'the exec did not happen (comm {comm}, state {state})')
                sys.exit(1)
            time.sleep(0.005)
        say(f"exec'd {parent}")
        conn.sendall(f'register {display}\nstatus {status}\nlocked\n'.encode())
        say('sent')
        buffer = b''
        while True:
            chunk = conn.recv(4096)
            if not chunk:
                say('guard closed')
                stay()
            buffer += chunk
            while b'\n' in buffer:
                line, buffer = buffer.split(b'\n', 1)
                say('guard: ' + line.decode(errors='replace'))
    os.close(read_end)
    os.dup2(write_end, 1)
    os.close(write_end)
    os.execv(program, [program, '--help'])


def traced_agent(args):
    log, program, *rest = args
    lib = libc()
    child = os.fork()
    if child == 0:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        if lib.ptrace(PTRACE_TRACEME, 0, None, None) != 0:
            os._exit(70)
        os.execv(program, [program] + rest)
    _, status = os.waitpid(child, 0)
    if not os.WIFSTOPPED(status):
        say(f'no exec stop (wait status {status})')
        sys.exit(1)
    say(f'agent {child}')
    fd, error = open_mem(child)
    say('open ok' if fd is not None else f'open failed {error}')
    # Patches nothing: the test asks what the guard makes of an agent whose memory the
    # user could write (and still can: the descriptor stays open).
    if lib.ptrace(PTRACE_DETACH, child, None, None) != 0:
        say(f'detach failed {errno.errorcode.get(ctypes.get_errno())}')
        sys.exit(1)
    say('detached')
    stay()


def mem_window(args):
    pid, seconds = int(args[0]), float(args[1])
    fd, error = open_mem(pid)
    say(f'before: {"ok" if fd is not None else error}')
    kept = [fd] if fd is not None else []
    attempts = opened = 0
    first = last = None
    os.kill(pid, signal.SIGUSR1)
    start = time.monotonic()
    while (now := time.monotonic()) - start < seconds:
        attempts += 1
        fd, _ = open_mem(pid)
        if fd is not None:
            opened += 1
            at = round((now - start) * 1000, 2)
            first = first if first is not None else at
            last = at
            if len(kept) < 4:
                kept.append(fd)
            else:
                os.close(fd)
    say(f'after: attempts {attempts} opened {opened} first {first} last {last}')
    stay()


def main():
    command, args = sys.argv[1], sys.argv[2:]
    {'proxy-register': proxy_register, 'traced-agent': traced_agent, 'mem-window': mem_window}[command](args)


if __name__ == '__main__':
    main()
