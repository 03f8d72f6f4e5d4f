#!/usr/bin/env bash
# Tests/Desktop/shutdown.sh: stops the VM: wakes it if suspended, asks the guest to power off
# (systemctl poweroff, then the ACPI button), and only then stops QEMU (QMP quit, then
# SIGTERM/SIGKILL to the pid in this VM's pidfile, nothing else). Removes the overlay.
#
#   shutdown.sh [--now]      --now: no clean shutdown of the guest
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"
QMP=(python3 "$HERE/qmp.py" --socket "$XDL_QMP")

gone() { ! kill -0 "$1" 2>/dev/null; }
wait_gone() { local i; for ((i = 0; i < $2 * 10; i++)); do gone "$1" && return 0; sleep 0.1; done; return 1; }

if pid=$(xdl_qemu_pid); then
    if [ "${1:-}" != --now ]; then
        if [ "$("${QMP[@]}" status 2>/dev/null)" = suspended ]; then
            "${QMP[@]}" wakeup && "${QMP[@]}" wait-status running -t 10 >/dev/null
        fi
        timeout 10 bash -c ". '$HERE/common.sh'; xdl_ssh root systemctl poweroff" 2>/dev/null || true
        wait_gone "$pid" 45 || { "${QMP[@]}" powerdown 2>/dev/null; wait_gone "$pid" 30; } || true
    fi
    if ! gone "$pid"; then
        xdl_log "the guest did not power off; stopping QEMU"
        "${QMP[@]}" quit 2>/dev/null; wait_gone "$pid" 5 \
            || { kill "$pid"; wait_gone "$pid" 5; } || { kill -9 "$pid"; wait_gone "$pid" 5; }
    fi
    gone "$pid" && xdl_log "stopped (qemu pid $pid)" || xdl_die "qemu pid $pid is still there"
fi
for c in "$XDL_SSHDIR"/ctl-*; do
    [ -e "$c" ] || continue
    ssh -q -o ControlPath="$c" -O exit "$XDL_NAME" 2>/dev/null || true
    rm -f "$c"
done
rm -f "$XDL_RUN"/{disk.qcow2,qmp.sock,qmp-events.sock,qemu.pid}
