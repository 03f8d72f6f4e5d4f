#!/bin/sh
# Builds dist/xidlelock_VERSION_ARCH.deb from `make install DESTDIR=... PREFIX=/usr`
# and the release binary (`make deb` builds that first).
#
# Depends is worked out from the libraries the binary needs (dpkg-shlibdeps reads
# their symbols files and gives the lowest versions that have every symbol used);
# packaging/check.sh checks it again against `dpkg -S` of each NEEDED library.
set -eu
cd "$(dirname "$0")/.."

bin=.build/release/xidlelock
[ -x "$bin" ] || { echo "build-deb: $bin is missing: run 'make deb'" >&2; exit 1; }
version=$("$bin" --version | awk '{ print $2 }')
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-xidlelock developers <xidlelock@invalid>}

# dpkg-shlibdeps wants a source-package layout: work/debian/control, the files
# under work/debian/xidlelock.
work=.build/deb
stage=$work/debian/xidlelock
rm -rf "$work"
mkdir -p "$stage/DEBIAN" dist

${MAKE:-make} --no-print-directory install DESTDIR="$PWD/$stage" PREFIX=/usr \
    ZSHCOMPDIR=/usr/share/zsh/vendor-completions >/dev/null

# Debian policy: stripped binaries, compressed manual pages.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/xidlelock"
gzip -9n "$stage/usr/share/man/man1/xidlelock.1"

printf 'Source: xidlelock\n\nPackage: xidlelock\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/xidlelock/usr/bin/xidlelock 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

# Files under /etc are configuration: an upgrade keeps the administrator's changes.
(cd "$stage" && find etc -type f | sed 's|^|/|') > "$stage/DEBIAN/conffiles"

installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: xidlelock
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $depends
Recommends: xsecurelock | i3lock | slock, libsystemd0
Suggests: brightnessctl | xbacklight
Section: x11
Priority: optional
Description: idle-lock agent for X11 sessions
 xidlelock watches for user input in an X11 session and runs a screen locker
 (or a logout command) once the user has been idle for a set time. It is made
 for window managers without a desktop environment (i3, bspwm, Openbox,
 xmonad) and for places where locking an unattended screen is a security
 control: it fails closed and never kills the locker.
 .
 It counts time spent suspended as idle time, can warn before locking, and
 keeps the screen on while a video plays. 'xidlelock idle' prints the idle
 time like xprintidle.
EOF

find "$stage" -type d -exec chmod 755 {} +
deb=dist/xidlelock_${version}_${arch}.deb
dpkg-deb --build --root-owner-group -Zxz "$stage" "$deb" >/dev/null
echo "built $deb ($(du -k "$deb" | cut -f1) KiB), Depends: $depends"
