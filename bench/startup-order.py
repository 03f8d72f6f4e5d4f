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
"""
import os
import re
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
    with open(ORDER, "w") as f:
        f.write("".join(name + "\n" for name in order))
    print(f"startup-order: {len(order)} functions written to {os.path.relpath(ORDER, bench.ROOT)}")


if __name__ == "__main__":
    main()
