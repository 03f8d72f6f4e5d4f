#!/usr/bin/env bash
# Tests/Desktop/build-image.sh: builds the Debian 12 desktop that `make test-desktop` boots,
# under $XDL_DIR (default /var/tmp/xidlelock-desktop), outside the work tree.
#
#   build-image.sh           build, or nothing when the image matches its recipe
#   build-image.sh --force   redo the packages' configuration and the image (keeps the debootstrap)
#   build-image.sh --clean   start again from debootstrap (the .deb cache is kept)
#
# The recipe is this file, common.sh and guest/: their hash is the image's stamp, and
# the image is rebuilt only when it changes. The guest: systemd and logind, polkitd, Xorg
# (modesetting on QEMU's -vga std, libinput), lightdm auto-logging alice into i3, i3lock,
# xsecurelock, xss-lock, mpv with a test video, and openssh-server for the host's
# commands. The apt mirror is read from this machine's apt sources at build time; no
# file keeps it, and the image has no apt source or list.
# Adapted from the team's lab VM (../shared/lab/vm).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/common.sh"
[ "$(id -u)" = 0 ] || xdl_die "run as root (debootstrap, chroot and bind mounts need it)"

MODE=${1:-}
SOURCES=${XDL_APT_SOURCES:-/etc/apt/sources.list.d/debian.sources}
SUITE=bookworm
IMG_SIZE=6G
STATE=$XDL_DIR/state
DEBS=$XDL_DIR/debs                  # .deb cache shared by debootstrap and the chroot's apt
R=$XDL_ROOTFS

# Installed with --no-install-recommends: each one is here on purpose.
PACKAGES=(
    # init, logind, buses, devices; polkitd: logind asks it about delay inhibitors
    systemd systemd-sysv dbus dbus-user-session libpam-systemd udev polkitd
    kmod procps iproute2 kbd psmisc less
    linux-image-amd64 initramfs-tools zstd
    # X: modesetting (in -core) drives bochs-drm (-vga std); libinput reads evdev
    xserver-xorg-core xserver-xorg-input-libinput xauth x11-xkb-utils xkb-data x11-utils xinput
    lightdm lightdm-gtk-greeter
    i3-wm fonts-dejavu-core
    x11-xserver-utils xprintidle xdotool
    # lockers, the anchor (xss-lock), a player that holds the lock off
    i3lock xsecurelock xss-lock mpv ffmpeg
    openssh-server python3
    # the attacks of scenario j: a debugger the session's user runs against the lockers
    gdb
    # scenario k, bob's remote sessions: xrdp with its Xorg backend, TigerVNC's vncsession
    xrdp xorgxrdp tigervnc-standalone-server tigervnc-tools ssl-cert
    # what the xidlelock .deb depends on (installed offline with dpkg -i)
    libc6 libxcb1 libxcb-screensaver0 libx11-6 libxss1 libxi6 libxres1 libsystemd0
)

# ---- host tools ---------------------------------------------------------------------
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v mke2fs >/dev/null || need+=(e2fsprogs)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    xdl_log "installing host tools: ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# ---- up to date? ----------------------------------------------------------------------
STAMP=$( { cat "$0" "$HERE/common.sh" "$HERE"/guest/*; printf '%s\n' "${PACKAGES[@]}"; } | sha256sum | cut -c1-16)
mkdir -p "$XDL_DIR" "$STATE" "$DEBS" "$XDL_SSHDIR" "$XDL_RUN"
if [ -z "$MODE" ] && [ -f "$XDL_IMG" ] && [ -f "$XDL_KERNEL" ] && [ -f "$XDL_INITRD" ] \
   && [ "$(cat "$STATE/image.stamp" 2>/dev/null)" = "$STAMP" ]; then
    xdl_log "image up to date ($XDL_IMG, recipe $STAMP)"
    exit 0
fi
if pid=$(xdl_qemu_pid); then
    xdl_die "the VM is running (pid $pid); run Tests/Desktop/shutdown.sh first"
fi

# ---- mounts (always undone; rm -rf never runs while anything is mounted under $R) ----
MOUNTS=()
umount_all() {
    local i
    for ((i=${#MOUNTS[@]}-1; i>=0; i--)); do
        umount "${MOUNTS[$i]}" 2>/dev/null || umount -l "${MOUNTS[$i]}" 2>/dev/null || true
    done
    MOUNTS=()
    { findmnt -rn -o TARGET | grep -F "$R/" || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
}
trap umount_all EXIT
bind() { [ -e "$2" ] || mkdir -p "$2"; mount "$@"; MOUNTS+=("$2"); }
mounted_under_rootfs() { findmnt -rn -o TARGET | grep -qF "$R/"; }

if [ "$MODE" = --clean ]; then
    umount_all
    mounted_under_rootfs && xdl_die "something is still mounted under $R; not removing it"
    rm -rf "$R" "$STATE"/*.done "$STATE"/packages.hash
fi

# ---- the mirror, from this machine's apt sources (deb822), written nowhere ------------------
mirror=$(awk 'BEGIN { RS = "" }
    { uri = ""; ok = 0; n = split($0, L, "\n")
      for (i = 1; i <= n; i++) {
          if (L[i] ~ /^URIs:/) { split(L[i], a, /[ \t]+/); uri = a[2] }
          if (L[i] ~ /^Suites:/ && (L[i] " ") ~ /[ \t]bookworm[ \t]/) ok = 1
      }
      if (ok && uri != "") { print uri; exit } }' "$SOURCES")
[ -n "$mirror" ] || xdl_die "no URIs for suite $SUITE in $SOURCES"
# the logs are kept with the archive's host names blanked out
scrub_expr=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$SOURCES" \
    | sed -E 's|^[a-z+]+://||; s|[/:].*||; s|\.|\\.|g' | sort -u | sed 's/.*/s|&|<mirror>|g/')
scrub() { sed -e "$scrub_expr"; }

# ---- 1. debootstrap ---------------------------------------------------------------------
t0=$SECONDS
if [ ! -f "$STATE/debootstrap.done" ] || [ ! -x "$R/usr/bin/dpkg" ]; then
    umount_all
    mounted_under_rootfs && xdl_die "something is still mounted under $R; not removing it"
    rm -rf "$R"
    xdl_log "debootstrap $SUITE (minbase) into $R"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus \
        --cache-dir="$DEBS" "$SUITE" "$R" "$mirror" 2>&1 | scrub >"$STATE/debootstrap.log" \
        || { tail -20 "$STATE/debootstrap.log" >&2; xdl_die "debootstrap failed (log: $STATE/debootstrap.log)"; }
    rm -f "$R/etc/apt/sources.list" "$R/var/log/bootstrap.log"   # they name the mirror
    touch "$STATE/debootstrap.done"
    xdl_log "debootstrap took $((SECONDS - t0)) s"
fi

# ---- chroot environment -----------------------------------------------------------------
bind proc "$R/proc" -t proc
bind sysfs "$R/sys" -t sysfs
bind /dev "$R/dev" --bind
bind /dev/pts "$R/dev/pts" --bind
mkdir -p "$R/var/cache/apt/archives"
bind "$DEBS" "$R/var/cache/apt/archives" --bind
# apt in the chroot reads this machine's sources file, bind-mounted read-only for the build
mkdir -p "$R/etc/apt/sources.list.d"
: >"$R/etc/apt/sources.list.d/xdl-build.sources"
bind "$SOURCES" "$R/etc/apt/sources.list.d/xdl-build.sources" --bind -o ro
mount -o remount,bind,ro "$R/etc/apt/sources.list.d/xdl-build.sources" 2>/dev/null || true
cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"; chmod +x "$R/usr/sbin/policy-rc.d"
in_root() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }
APT=(apt-get -q -y -o Acquire::Check-Valid-Until=false -o Acquire::Check-Date=false
     -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confdef
     -o Dpkg::Options::=--force-confold)

# ---- 2. packages --------------------------------------------------------------------------
pkghash=$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-16)
if [ "$(cat "$STATE/packages.hash" 2>/dev/null)" != "$pkghash" ]; then
    t1=$SECONDS
    xdl_log "installing ${#PACKAGES[@]} packages in the chroot"
    echo "lightdm shared/default-x-display-manager select lightdm" | in_root debconf-set-selections
    {
        in_root dpkg --configure -a
        in_root "${APT[@]}" update
        in_root "${APT[@]}" --no-install-recommends install "${PACKAGES[@]}"
    } 2>&1 | scrub >"$STATE/apt.log" || { tail -30 "$STATE/apt.log" >&2; xdl_die "apt-get failed (log: $STATE/apt.log)"; }
    echo "$pkghash" >"$STATE/packages.hash"
    xdl_log "packages took $((SECONDS - t1)) s"
fi
# the list files' names and apt's binary caches carry the mirror's name
rm -rf "$R"/var/lib/apt/lists/* "$R"/var/cache/apt/*.bin "$R/var/log/bootstrap.log"
mkdir -p "$R/var/lib/apt/lists/partial"

# ---- 3. configuration (cheap; redone on every build) --------------------------------------
xdl_log "configuring"
echo "$XDL_NAME" >"$R/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$XDL_NAME" >"$R/etc/hosts"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$R/etc/fstab"
[ -s "$R/etc/machine-id" ] && ! grep -q uninitialized "$R/etc/machine-id" || { rm -f "$R/etc/machine-id"; in_root systemd-machine-id-setup >/dev/null; }

# alice: the desktop user (password alice: i3lock unlocks by typing it through QMP)
in_root id alice >/dev/null 2>&1 || in_root useradd -m -u 1000 -s /bin/bash -G audio,video,plugdev,users alice
echo alice:alice | in_root chpasswd

# ssh: the host's key for root; the guest's host key is pinned for the host
[ -f "$XDL_SSHDIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C "$XDL_NAME-host" -f "$XDL_SSHDIR/id_ed25519"
install -d -m 700 "$R/root/.ssh"
install -m 600 "$XDL_SSHDIR/id_ed25519.pub" "$R/root/.ssh/authorized_keys"
mkdir -p "$R/etc/ssh/sshd_config.d"
cat >"$R/etc/ssh/sshd_config.d/xdl.conf" <<'EOF'
# make test-desktop: key-only root logins from the host's port forward
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
MaxSessions 64
MaxStartups 64:30:128
EOF
echo "$XDL_NAME $(cut -d' ' -f1,2 "$R/etc/ssh/ssh_host_ed25519_key.pub")" >"$XDL_SSHDIR/known_hosts"

# network: the one NIC (QEMU user net, restrict=on) gets slirp's fixed guest address
mkdir -p "$R/etc/systemd/network"
printf '[Match]\nName=en*\n\n[Network]\nAddress=10.0.2.15/24\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n' \
    >"$R/etc/systemd/network/10-xdl.network"
in_root systemctl enable systemd-networkd.service >/dev/null 2>&1 || xdl_die "cannot enable systemd-networkd"
in_root systemctl mask systemd-networkd-wait-online.service >/dev/null 2>&1 || xdl_die "cannot mask wait-online"
# no network anyway: keep the periodic jobs from running (e2scrub_reap alone cost 25 s of boot)
for t in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer; do
    in_root systemctl disable "$t" >/dev/null 2>&1 || true
done
mkdir -p "$R/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=volatile\n' >"$R/etc/systemd/journald.conf.d/xdl.conf"

# display manager: lightdm on vt7, autologin alice into i3 at once
mkdir -p "$R/etc/lightdm/lightdm.conf.d"
cat >"$R/etc/lightdm/lightdm.conf.d/50-xdl.conf" <<'EOF'
[Seat:*]
autologin-user=alice
autologin-user-timeout=0
autologin-session=i3
user-session=i3
EOF
echo /usr/sbin/lightdm >"$R/etc/X11/default-display-manager"
ln -sf /lib/systemd/system/lightdm.service "$R/etc/systemd/system/display-manager.service"
in_root systemctl set-default graphical.target >/dev/null 2>&1 || xdl_die "cannot set graphical.target"

# alice's i3: no bar, no wizard; a solid green root (a frame showing the desktop is a
# green frame); the session runner; and the README's start-up lines for a bare window
# manager (the unit exists once the test installs the .deb)
install -D -m 755 "$HERE/guest/session-runner" "$R/usr/local/lib/xdl/session-runner"
install -D -m 755 "$HERE/guest/session-run" "$R/usr/local/lib/xdl/session-run"
install -d -m 755 "$R/home/alice/.config/i3"
cat >"$R/home/alice/.config/i3/config" <<'EOF'
# i3 config file (v4)
# make test-desktop: a minimal i3 (no bar, no wizard, no xss-lock)
font pango:DejaVu Sans Mono 8
set $mod Mod4
floating_modifier $mod
exec --no-startup-id xsetroot -solid '#00ff00'
# the player check's video plays in a small floating window (scaling it costs an emulated CPU)
for_window [class="mpv"] floating enable
exec --no-startup-id /usr/local/lib/xdl/session-runner
exec --no-startup-id sh -c 'systemctl --user import-environment DISPLAY XAUTHORITY; systemctl --user start xidlelock.service'
EOF
in_root chown -R alice:alice /home/alice

# a test video for the player check (10 s, small enough for one emulated CPU)
if [ ! -s "$R/usr/local/share/xdl/test.mkv" ]; then
    mkdir -p "$R/usr/local/share/xdl"
    in_root ffmpeg -loglevel error -f lavfi -i testsrc=size=320x240:rate=15 -t 10 \
        -pix_fmt yuv420p -c:v mpeg4 -q:v 5 /usr/local/share/xdl/test.mkv || xdl_die "ffmpeg could not make the test video"
fi

# bob: scenario (k)'s remote user (password bob), beside alice's local session. Both remote
# servers end in /etc/X11/Xsession, which runs his ~/.xsession: xrdp's startwm.sh (Xorg with
# the xorgxrdp driver on :10) and TigerVNC's Xtigervnc-session (Xtigervnc on :1). The agent is
# started there, as a child of the session (its scope, its XDG_SESSION_ID), not by the .deb's
# user unit: both sessions belong to one user manager, whose one xidlelock.service has one
# DISPLAY, and a bare Xsession runs no XDG autostart. A session runner per display (its
# socket named by the display) lets the test run commands inside each session.
in_root id bob >/dev/null 2>&1 || in_root useradd -m -u 1001 -s /bin/bash -G users bob
echo bob:bob | in_root chpasswd
install -d -m 755 "$R/home/bob/.config/i3" "$R/home/bob/.vnc"
install -m 644 "$HERE/guest/bob-i3-config" "$R/home/bob/.config/i3/config"
install -m 755 "$HERE/guest/bob-xsession" "$R/home/bob/.xsession"
# VNC: password bob (VncAuth, the one type vncdotool speaks), reachable from the NIC (QEMU's
# forward arrives on 10.0.2.15, not on the guest's loopback); started by scenario (k) once
# the .deb is in (tigervncserver@:1.service), not at boot
printf 'bob\nbob\n' | in_root vncpasswd -f >"$R/home/bob/.vnc/passwd"
chmod 600 "$R/home/bob/.vnc/passwd"
in_root chown -R bob:bob /home/bob
grep -q '^:1=bob' "$R/etc/tigervnc/vncserver.users" || echo ':1=bob' >>"$R/etc/tigervnc/vncserver.users"
printf '%s\n' '# make test-desktop (k)' '$localhost = "no";' '$SecurityTypes = "VncAuth";' \
    '$geometry = "1024x768";' '1;' >"$R/etc/tigervnc/vncserver-config-mandatory"
# xrdp: straight into the Xorg (xorgxrdp) session when the client gives user and password
sed -i 's/^autorun=.*/autorun=Xorg/' "$R/etc/xrdp/xrdp.ini"
in_root systemctl enable xrdp.service >/dev/null 2>&1 || xdl_die "cannot enable xrdp"
in_root adduser xrdp ssl-cert >/dev/null 2>&1 || true

# ---- 4. kernel, initrd, image -------------------------------------------------------------
kver=$(basename "$(ls -d "$R"/lib/modules/* | sort -V | tail -1)")
[ -f "$R/boot/initrd.img-$kver" ] || in_root update-initramfs -c -k "$kver" >/dev/null
rm -f "$R/usr/sbin/policy-rc.d" "$R/etc/resolv.conf"
umount_all
mounted_under_rootfs && xdl_die "something is still mounted under $R"
rm -f "$R/etc/apt/sources.list.d/xdl-build.sources"
install -m 644 "$R/boot/vmlinuz-$kver" "$XDL_KERNEL"
install -m 644 "$R/boot/initrd.img-$kver" "$XDL_INITRD"

t2=$SECONDS
xdl_log "making a $IMG_SIZE ext4 image from the $(du -sh "$R" | cut -f1) rootfs"
rm -f "$XDL_IMG.tmp"
mke2fs -q -t ext4 -L xdlroot -E root_owner=0:0 -d "$R" -F "$XDL_IMG.tmp" "$IMG_SIZE"
mv -f "$XDL_IMG.tmp" "$XDL_IMG"
echo "$STAMP" >"$STATE/image.stamp"
xdl_log "image took $((SECONDS - t2)) s; kernel $kver; build $((SECONDS - t0)) s in all"
