#!/bin/sh
# A notifier for xidlelock: dims the screen as a warning before the lock, and puts
# the brightness back when input returns.
#
#   xidlelock --lock-after 10m --notify-before 30s \
#             --notifier /usr/share/doc/xidlelock/examples/dim-screen.sh
#
# xidlelock sends SIGTERM to the notifier's process group when input returns or
# the screen is unlocked; that is when the brightness found at the start is put
# back. DIM_PERCENT (default 30) is how bright the dimmed screen is.
#
# Tries, in order: xbacklight (RandR backlight), brightnessctl (sysfs backlight),
# and xrandr --brightness (software gamma, works on any X server with RandR,
# including external monitors without a backlight control).
set -u
dim=${DIM_PERCENT:-30}
restore=

is_number() {
    case $1 in
        '' | *[!0-9.]*) return 1 ;;
        *) return 0 ;;
    esac
}

if command -v xbacklight >/dev/null 2>&1 && saved=$(xbacklight -get 2>/dev/null) && is_number "$saved"; then
    xbacklight -set "$dim" && restore="xbacklight -set $saved"
fi
if [ -z "$restore" ] && command -v brightnessctl >/dev/null 2>&1 && saved=$(brightnessctl get 2>/dev/null) && is_number "$saved"; then
    brightnessctl -q set "$dim%" && restore="brightnessctl -q set $saved"
fi
if [ -z "$restore" ] && command -v xrandr >/dev/null 2>&1; then
    # One "OUTPUT BRIGHTNESS" line per connected output.
    outputs=$(xrandr --current --verbose 2>/dev/null | awk '
        / connected/ { output = $1 }
        /^[ \t]+Brightness:/ && output != "" { print output, $2; output = "" }')
    if [ -n "$outputs" ]; then
        level=$(awk -v p="$dim" 'BEGIN { printf "%.2f", p / 100 }')
        restore=:
        while read -r output brightness; do
            xrandr --output "$output" --brightness "$level" &&
                restore="$restore; xrandr --output '$output' --brightness $brightness"
        done <<OUTPUTS
$outputs
OUTPUTS
    fi
fi
if [ -z "$restore" ]; then
    echo "dim-screen.sh: found no way to dim the screen (xbacklight, brightnessctl, xrandr)" >&2
    exit 1
fi

# The sleep goes too: xidlelock signals the whole process group, but a signal to
# this shell alone would leave it behind for up to a minute.
put_back() {
    trap - TERM INT HUP
    kill "$sleeper" 2>/dev/null
    eval "$restore"
    exit 0
}
trap put_back TERM INT HUP

# Wait for the signal. `wait` returns as soon as a trapped signal arrives.
sleeper=
while :; do
    sleep 60 &
    sleeper=$!
    wait "$sleeper"
done
