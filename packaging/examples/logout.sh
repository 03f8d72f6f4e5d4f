#!/bin/sh
# A "locker" for xidlelock that logs the user out instead (automatic logoff on a
# shared computer):
#
#   xidlelock --lock-after 15m --locker /usr/share/doc/xidlelock/examples/logout.sh
#
# It fails closed: when the session cannot be ended, it runs a screen locker
# instead (xsecurelock, i3lock -n or slock), so the screen is never left open.
set -u

session=${XDG_SESSION_ID:-}
if [ -z "$session" ]; then
    # A systemd user unit runs outside the session and has no XDG_SESSION_ID:
    # ask logind for the user's graphical session.
    session=$(loginctl show-user "$(id -un)" --property=Display --value 2>/dev/null) || session=
fi

if [ -n "$session" ] && loginctl terminate-session "$session"; then
    # logind now ends every process of the session, perhaps this one and the agent.
    # Wait for it: to the agent, the exit of this command means "unlocked".
    waited=0
    while [ "$waited" -lt 30 ]; do
        state=$(loginctl show-session "$session" --property=State --value 2>/dev/null) || exit 0
        case $state in
            active | online) ;;
            *) exit 0 ;;
        esac
        sleep 1
        waited=$((waited + 1))
    done
    echo "logout.sh: session $session is still $state 30 s after it was told to end" >&2
else
    echo "logout.sh: could not end session '${session:-unknown}'" >&2
fi

for locker in xsecurelock "i3lock -n" slock; do
    if command -v "${locker%% *}" >/dev/null 2>&1; then
        echo "logout.sh: locking the screen with $locker instead" >&2
        # shellcheck disable=SC2086 # the locker's words are meant to be split
        exec $locker
    fi
done
echo "logout.sh: no locker found either: the screen is NOT locked" >&2
exit 1
