#!/bin/bash
# Issue #31's players measurement (bench/players.py): each real player or presenter
# from Debian on Xvfb with a private session bus, under xidlelock and xss-lock:
# held while it plays, and the time to the lock after `kill -9`.
#   bench/players.sh [--rows mpv,vlc,...] [--agents xidlelock,xss-lock] [--lock 8] [--out FILE]
# XIDLELOCK=path picks the binary (default .build/release/xidlelock, else .build/debug/).
# Installs nothing; says what is missing. The packages: see `bench/players.sh --packages`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = "--packages" ]; then
    echo "xvfb dbus dbus-bin x11-xserver-utils xdotool ffmpeg xss-lock xdg-utils x11-utils mpv vlc totem totem-plugins" \
         "evince clapper libreoffice-impress gnome-session-bin xdg-desktop-portal xdg-desktop-portal-gtk" \
         "gstreamer1.0-plugins-good gstreamer1.0-plugins-base gstreamer1.0-gl gstreamer1.0-gtk3 gstreamer1.0-libav"
    exit 0
fi
exec /usr/bin/python3 "$here/players.py" "$@"
