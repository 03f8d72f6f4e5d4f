#!/bin/sh
# Builds dist/xidlelock_VERSION_ARCH.deb from `make install DESTDIR=... PREFIX=/usr`
# and the release binary (`make deb` builds that first).
#
# Depends is worked out from the libraries the binary needs (dpkg-shlibdeps reads
# their symbols files and gives the lowest versions that have every symbol used);
# packaging/check.sh checks it again against `dpkg -S` of each NEEDED library.
#
# Maintainer is "$DEBFULLNAME <$DEBEMAIL>", the variables dch and debmake read; the
# default, "xidlelock developers <xidlelock@users.noreply.github.com>", is only a
# default: set both when you build a package you hand out.
#
# The package is native (Version is the program's, no Debian revision: upstream
# builds it from its own tree), so its one changelog is packaging/changelog, in
# Debian's format, installed as /usr/share/doc/xidlelock/changelog.gz (lintian wants
# that name for a native package, not changelog.Debian.gz). Its top entry must name
# the binary's version. /usr/share/doc/xidlelock/copyright is packaging/copyright
# (DEP-5, the MIT licence of LICENSE).
set -eu
cd "$(dirname "$0")/.."

bin=.build/release/xidlelock
[ -x "$bin" ] || { echo "build-deb: $bin is missing: run 'make deb'" >&2; exit 1; }
version=$("$bin" --version | awk '{ print $2 }')
arch=$(dpkg --print-architecture)
maintainer="${DEBFULLNAME:-xidlelock developers} <${DEBEMAIL:-xidlelock@users.noreply.github.com}>"
changelog_version=$(dpkg-parsechangelog -l packaging/changelog -S Version)
[ "$changelog_version" = "$version" ] ||
    { echo "build-deb: packaging/changelog's top entry is $changelog_version, the binary is $version" >&2; exit 1; }

# dpkg-shlibdeps wants a source-package layout: work/debian/control, the files
# under work/debian/xidlelock.
work=.build/deb
stage=$work/debian/xidlelock
rm -rf "$work"
mkdir -p "$stage/DEBIAN" dist

# The system unit goes where Debian 12's packages put theirs (dh_installsystemd),
# /lib/systemd/system; /usr/lib/systemd/user is already the place for user units.
${MAKE:-make} --no-print-directory install DESTDIR="$PWD/$stage" PREFIX=/usr \
    ZSHCOMPDIR=/usr/share/zsh/vendor-completions SYSTEMUNITDIR=/lib/systemd/system >/dev/null

# Debian policy: stripped binaries, compressed manual pages.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/usr/bin/xidlelock" \
    "$stage/usr/libexec/xidlelock-guard"
gzip -9n "$stage/usr/share/man/man1/xidlelock.1"
doc=$stage/usr/share/doc/xidlelock
# Debian policy 12.3: documentation in /usr/share/doc compressed (README.md and the
# guides in docs/, which make install put there); all of it, not only what is over
# 4 kB, so that the file list does not change with a guide's length.
find "$doc" -maxdepth 2 -name '*.md' -exec gzip -9n {} +
install -m 644 packaging/copyright "$doc/copyright"
# make install's 0711 on the binary is on purpose (see the Makefile): said to lintian.
install -d "$stage/usr/share/lintian/overrides"
install -m 644 packaging/lintian-overrides "$stage/usr/share/lintian/overrides/xidlelock"
gzip -9nc packaging/changelog > "$doc/changelog.gz"
chmod 644 "$doc/changelog.gz"

printf 'Source: xidlelock\n\nPackage: xidlelock\nArchitecture: any\n' > "$work/debian/control"
depends=$(cd "$work" && dpkg-shlibdeps -O debian/xidlelock/usr/bin/xidlelock debian/xidlelock/usr/libexec/xidlelock-guard 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
# A binary linked with DT_RELR (make release: -z pack-relative-relocs) needs glibc's
# GLIBC_ABI_DT_RELR, new in 2.36: a version node, not a symbol, so the symbols file
# dpkg-shlibdeps reads does not know it.
if readelf -V "$stage/usr/bin/xidlelock" | grep -q GLIBC_ABI_DT_RELR; then
    depends=$(echo "$depends" | sed 's/libc6 (>= [^)]*)/libc6 (>= 2.36)/')
    case $depends in *"libc6 (>= 2.36)"*) ;; *) depends="libc6 (>= 2.36), $depends" ;; esac
fi
# libX11, libX11-xcb, libXss, libXi and libXRes are loaded at run time by the agent (`xidlelock
# idle` speaks through libxcb and starts faster without them), so dpkg-shlibdeps
# cannot see them; the agent needs them (without libXRes it runs, but cannot tell
# the locker's keyboard grab from another client's). The versions are what
# dpkg-shlibdeps would write for the functions used (their symbols files and shlibs).
for dep in "libx11-6 (>= 2:1.6.0)" "libx11-xcb1" "libxss1" "libxi6 (>= 2:1.2.99.4)" "libxres1 (>= 2:1.2.1)"; do
    case $depends in *"${dep%% *}"*) ;; *) depends="$depends, $dep" ;; esac
done

# Files under /etc are configuration: an upgrade keeps the administrator's changes.
(cd "$stage" && find etc -type f | sed 's|^|/|') > "$stage/DEBIAN/conffiles"

# The maintainer scripts enable and start xidlelock-guard.service, restart it on an
# upgrade, stop it on remove and forget it on purge: written by hand in
# packaging/deb/ (no debhelper at build time), each one saying why.
for script in postinst prerm postrm; do
    install -m 755 "packaging/deb/$script" "$stage/DEBIAN/$script"
done

# --lock-on-card-removal loads libpcsclite (PC/SC) at run time and needs pcscd: only
# for those who turn it on, so suggested, not recommended.
installed_size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: xidlelock
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_size
Depends: $depends
Recommends: xsecurelock | i3lock | slock, libsystemd0, xdg-desktop-portal-gtk
Suggests: brightnessctl | xbacklight, pcscd, libpcsclite1
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
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
chmod 644 "$stage/DEBIAN/md5sums" "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles"
deb=dist/xidlelock_${version}_${arch}.deb
dpkg-deb --build --root-owner-group -Zxz "$stage" "$deb" >/dev/null
echo "built $deb ($(du -k "$deb" | cut -f1) KiB), Depends: $depends"
