# Tests/Desktop/common.sh: settings shared by the `make test-desktop` scripts (sourced, not run).
# shellcheck shell=bash disable=SC2034
# Everything large or stateful lives outside the work tree, under $XDL_DIR.

XDL_DIR=${XDL_DIR:-/var/tmp/xidlelock-desktop}
XDL_ROOTFS=$XDL_DIR/rootfs          # the debootstrapped tree the image is made from
XDL_IMG=$XDL_DIR/base.img           # raw ext4 image; a boot never writes it (qcow2 overlay)
XDL_KERNEL=$XDL_DIR/vmlinuz
XDL_INITRD=$XDL_DIR/initrd.img
XDL_SSHDIR=$XDL_DIR/ssh             # the host's key, the pinned host key, ssh control sockets
XDL_RUN=$XDL_DIR/run                # one boot's state: overlay, QMP sockets, pidfile, console log
XDL_QMP=$XDL_RUN/qmp.sock           # QMP for commands and screendumps
XDL_QMP_EVENTS=$XDL_RUN/qmp-events.sock  # a second monitor, for an event watcher beside them
XDL_PIDFILE=$XDL_RUN/qemu.pid
XDL_NAME=xidlelock-desktop          # QEMU's -name: how the scripts recognise their own QEMU
XDL_USER=alice                      # the test user lightdm logs into i3 (password: alice)
XDL_SSH_PORT=${XDL_SSH_PORT:-10122} # 127.0.0.1 only: the VM's one way in
XDL_RDP_PORT=${XDL_RDP_PORT:-10389} # 127.0.0.1 only: the guest's xrdp (3389), scenario (k)'s client
XDL_VNC_PORT=${XDL_VNC_PORT:-10901} # 127.0.0.1 only: the guest's TigerVNC :1 (5901)

xdl_die() { echo "${0##*/}: $*" >&2; exit 1; }
xdl_log() { echo "[${0##*/} $(date +%T)] $*" >&2; }

# The running QEMU's pid, only when the pidfile names a live QEMU these scripts started.
xdl_qemu_pid() {
    local pid
    [ -s "$XDL_PIDFILE" ] || return 1
    pid=$(cat "$XDL_PIDFILE")
    [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "-name $XDL_NAME" || return 1
    echo "$pid"
}

xdl_port() { cat "$XDL_RUN/ssh-port" 2>/dev/null || echo "$XDL_SSH_PORT"; }

# ssh into the guest as $1 with the build's key; the guest's host key is pinned at build
# time. Multiplexed (ControlMaster): a call costs milliseconds, not a handshake.
xdl_ssh() { xdl_ssh_argv "$1"; shift; "${XDL_SSH_ARGV[@]}" "$@"; }
xdl_ssh_argv() {
    XDL_SSH_ARGV=(ssh -q -p "$(xdl_port)" -i "$XDL_SSHDIR/id_ed25519"
        -o IdentitiesOnly=yes -o BatchMode=yes
        -o HostKeyAlias="$XDL_NAME" -o UserKnownHostsFile="$XDL_SSHDIR/known_hosts"
        -o StrictHostKeyChecking=yes -o LogLevel=ERROR
        -o ControlMaster=auto -o ControlPath="$XDL_SSHDIR/ctl-%r" -o ControlPersist=600
        -o ConnectTimeout=3 -o ServerAliveInterval=30 -o ServerAliveCountMax=10
        "$1@127.0.0.1")
}

# Quote an argv so that the guest's login shell (bash) rebuilds exactly that argv.
xdl_quote() { local a out=; for a in "$@"; do out+=" $(printf '%q' "$a")"; done; echo "${out# }"; }
