#!/usr/bin/env bash
# Tests/Desktop/boot.sh: boots the image (1 vCPU, 2 GiB, S3 on, two QMP sockets, direct kernel
# boot) from a throw-away qcow2 overlay, then waits until alice's i3 session is active in
# logind and a command inside it reaches X.
#
#   boot.sh [--timeout SECONDS]
#
# The guest's one network: QEMU user net with restrict=on and forwards on the host's loopback
# only: 127.0.0.1:$XDL_SSH_PORT (default 10122) -> guest port 22, and for scenario (k)'s
# clients 127.0.0.1:$XDL_RDP_PORT (10389) -> 3389 (xrdp), 127.0.0.1:$XDL_VNC_PORT (10901) -> 5901.
# KVM when the CPU has VT-x/AMD-V (and /dev/kvm is not kvm_pvm, which cannot run a stock
# Debian kernel); TCG otherwise. XDL_ACCEL=kvm|tcg chooses.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"

TIMEOUT=300
[ "${1:-}" = --timeout ] && TIMEOUT=$2

if pid=$(xdl_qemu_pid); then xdl_die "the VM is already running (pid $pid): Tests/Desktop/shutdown.sh"; fi
[ -f "$XDL_IMG" ] && [ -f "$XDL_KERNEL" ] && [ -f "$XDL_INITRD" ] || xdl_die "no image: run Tests/Desktop/build-image.sh"
port=$XDL_SSH_PORT
for p in "$port" "$XDL_RDP_PORT" "$XDL_VNC_PORT"; do
    if ss -Hltn "sport = :$p" | grep -q .; then xdl_die "127.0.0.1:$p is taken; set XDL_SSH_PORT, XDL_RDP_PORT, XDL_VNC_PORT"; fi
done

accel=${XDL_ACCEL:-auto}
if [ "$accel" = auto ]; then
    if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo && [ ! -d /sys/module/kvm_pvm ]; then
        accel=kvm
    else
        accel=tcg
    fi
fi
case $accel in
    kvm) accel_opts=(-accel kvm) cpu=host ;;
    tcg) accel_opts=(-accel "tcg,tb-size=256") cpu=max ;;
    *) xdl_die "XDL_ACCEL must be auto, kvm or tcg" ;;
esac

mkdir -p "$XDL_RUN"
for c in "$XDL_SSHDIR"/ctl-*; do
    [ -S "$c" ] && ssh -q -o ControlPath="$c" -O exit "$XDL_NAME" 2>/dev/null || true
    rm -f "$c"
done
rm -f "$XDL_RUN"/{disk.qcow2,qmp.sock,qmp-events.sock,serial.log,qemu.pid,boot-times}
qemu-img create -q -f qcow2 -F raw -b "$XDL_IMG" "$XDL_RUN/disk.qcow2"
echo "$port" >"$XDL_RUN/ssh-port"
printf '%s %s\n' "$XDL_RDP_PORT" "$XDL_VNC_PORT" >"$XDL_RUN/remote-ports"

t0=$(date +%s.%N)
qemu-system-x86_64 \
    -name "$XDL_NAME" -nodefaults -no-user-config \
    -machine pc "${accel_opts[@]}" -cpu "$cpu" -smp 1 -m 2048 \
    -global PIIX4_PM.disable_s3=0 -global PIIX4_PM.disable_s4=1 \
    -kernel "$XDL_KERNEL" -initrd "$XDL_INITRD" \
    -append "root=/dev/vda rw console=ttyS0,115200 quiet" \
    -drive file="$XDL_RUN/disk.qcow2",if=virtio,format=qcow2,cache=writeback,discard=unmap \
    -vga std -display none \
    -netdev user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:"$port"-:22,hostfwd=tcp:127.0.0.1:"$XDL_RDP_PORT"-:3389,hostfwd=tcp:127.0.0.1:"$XDL_VNC_PORT"-:5901 \
    -device virtio-net-pci,netdev=net0 \
    -device virtio-rng-pci \
    -rtc base=utc \
    -qmp unix:"$XDL_QMP",server=on,wait=off \
    -qmp unix:"$XDL_QMP_EVENTS",server=on,wait=off \
    -serial file:"$XDL_RUN/serial.log" \
    -pidfile "$XDL_PIDFILE" -daemonize
pid=$(cat "$XDL_PIDFILE")
echo "$accel" >"$XDL_RUN/accel"
xdl_log "qemu pid $pid ($accel, -cpu $cpu); ssh 127.0.0.1:$port; console $XDL_RUN/serial.log"

fail() {
    kill -0 "$pid" 2>/dev/null && "$HERE/shutdown.sh" --now >/dev/null 2>&1
    xdl_die "$*"
}
since() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
alive() { kill -0 "$pid" 2>/dev/null || fail "qemu exited; see $XDL_RUN/serial.log"; }
deadline=$((SECONDS + TIMEOUT))

until xdl_ssh root true 2>/dev/null; do
    alive; [ $SECONDS -lt $deadline ] || fail "no ssh after ${TIMEOUT}s; see $XDL_RUN/serial.log"
    sleep 0.5
done
t_ssh=$(since)
check='sid=$(loginctl show-user alice -p Display --value 2>/dev/null) && [ -n "$sid" ] &&
  [ "$(loginctl show-session "$sid" -p Active --value)" = yes ] && echo "$sid"'
until sid=$(xdl_ssh root "$check" 2>/dev/null); do
    alive; [ $SECONDS -lt $deadline ] || fail "alice's session not active after ${TIMEOUT}s"
    sleep 0.5
done
t_active=$(since)
until xdl_ssh root /usr/local/lib/xdl/session-run -- xprintidle >/dev/null 2>&1; do
    alive; [ $SECONDS -lt $deadline ] || fail "no X inside alice's session after ${TIMEOUT}s"
    sleep 0.5
done
t_x=$(since)
echo "accel=$accel ssh=${t_ssh}s session_active=${t_active}s x=${t_x}s session=$sid" | tee "$XDL_RUN/boot-times" >&2
