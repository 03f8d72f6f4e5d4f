#!/usr/bin/env python3
"""Writes bench/startup.order: the functions of the release binary that
`xidlelock idle` runs, in the order it first runs them.

`make release` links with `--symbol-ordering-file=bench/startup.order`, so that
these functions sit together at the start of .text: a call then touches 16
pages of code instead of 36 (each page fault costs start-up time; see
BENCHMARKS.md). Regenerate after large changes to the start-up path:

    make startup-order

A stale list is harmless: the linker skips names it does not find, and the
functions it still finds are still placed first.

Runs the binary under valgrind's callgrind on a private Xvfb (valgrind 3.19
cannot read DWARF 5, so a copy without debug sections is run).

Then the runtime's variables in .bss that `idle` touches, placed first too: each is
its own section in the C++ part of the runtime, and scattered they cost two page
faults each (a read maps the zero page, the write copies it). They are found by
the page faults themselves (perf), a few at a time: placing those found together
uncovers the ones that shared their pages, so the list is relinked and measured
until no new one appears.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (its Xvfb and process handling)

ORDER = os.path.join(bench.ROOT, "bench", "startup.order")


def functions_run(profile, binary_name):
    """Names (mangled) of the functions of `binary_name` in a callgrind profile,
    in the order they first appear. Callgrind names each object and function in
    full once and by `(id)` afterwards."""
    objects, names = {}, {}
    seen, order = set(), []

    def resolve(text, table):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1))

    current_object = callee_object = None
    with open(profile) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                current_object = resolve(line[3:], objects)
            elif line.startswith("cob="):
                callee_object = resolve(line[4:], objects)
            elif line.startswith(("fn=", "cfn=")):
                callee = line.startswith("cfn=")
                name = resolve(line[4:] if callee else line[3:], names)
                obj = (callee_object or current_object) if callee else current_object
                callee_object = None
                # A bare address is a function without a symbol: nothing to order by.
                if name and obj and os.path.basename(obj) == binary_name and not name.startswith("0x"):
                    name = re.sub(r"'\d+$", "", name)  # callgrind's recursion suffix
                    if name not in seen:
                        seen.add(name)
                        order.append(name)
    return order


def relink():
    os.remove(bench.XIDLELOCK)  # the build does not track the order file
    subprocess.run(["make", "-s", "release"], cwd=bench.ROOT, check=True, stdout=subprocess.DEVNULL)


def bss_faulted(x, known):
    """The .bss symbols of the release binary whose pages `idle` faults in, not in `known`."""
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        x.run(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o", data, bench.XIDLELOCK, "idle"])
        script = subprocess.run(["perf", "script", "-i", data, "--show-mmap-events", "-F", "addr"],
                                check=True, capture_output=True, text=True).stdout
    base = min(int(m.group(1), 16) for m in re.finditer(r"\[(0x[0-9a-f]+)\(0x[0-9a-f]+\) @ 0 .*/xidlelock$", script, re.M))
    sections = subprocess.run(["readelf", "-SW", bench.XIDLELOCK], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\] \.bss\s+NOBITS\s+([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+)", sections)
    low, high = int(m.group(1), 16), int(m.group(1), 16) + int(m.group(2), 16)
    symbols = []
    for line in subprocess.run(["nm", "-S", bench.XIDLELOCK], check=True, capture_output=True, text=True).stdout.splitlines():
        fields = line.split()
        if len(fields) == 4 and low <= int(fields[0], 16) < high:
            symbols.append((int(fields[0], 16), int(fields[1], 16), fields[3]))
    found = []
    for line in script.splitlines():
        if not re.fullmatch(r"\s*[0-9a-f]+", line):
            continue
        address = int(line, 16) - base
        for start, size, name in symbols:
            if start <= address < start + max(size, 1) and name not in known and name not in found:
                found.append(name)
    return found


def order_bss(order):
    """`order` with the .bss variables `idle` touches after it (see above)."""
    if not shutil.which("perf"):
        print("startup-order: no perf (apt-get install linux-perf): the .bss variables are left unordered")
        return order
    variables = []
    x = bench.Xvfb()
    try:
        for _ in range(10):
            with open(ORDER, "w") as f:
                f.write("".join(name + "\n" for name in order + variables))
            relink()
            found = bss_faulted(x, set(order + variables))
            if not found:
                break
            variables += found
    finally:
        x.close()
    return order + variables


def main():
    if not os.path.exists(bench.XIDLELOCK):
        sys.exit("startup-order: build the release binary first (make release)")
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "xidlelock")
        subprocess.run(["objcopy", "--strip-debug", bench.XIDLELOCK, binary], check=True)
        profile = os.path.join(tmp, "callgrind.out")
        x = bench.Xvfb()
        try:
            x.run(["valgrind", "--tool=callgrind", "--demangle=no",
                   f"--callgrind-out-file={profile}", binary, "idle"])
        finally:
            x.close()
        order = functions_run(profile, "xidlelock")
    if len(order) < 50:
        sys.exit(f"startup-order: only {len(order)} functions seen; the profile looks wrong")
    functions = len(order)
    order = order_bss(order)
    with open(ORDER, "w") as f:
        f.write("".join(name + "\n" for name in order))
    print(f"startup-order: {functions} functions and {len(order) - functions} variables written to {os.path.relpath(ORDER, bench.ROOT)}")


if __name__ == "__main__":
    main()
