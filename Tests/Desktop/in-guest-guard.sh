#!/bin/sh
# Tests/Desktop/in-guest-guard.sh: the guest's half of run.sh's scenario (i), the guard. run.sh
# copies it to /tmp/xdl-guard.sh in the guest and runs it as root there, so that a wait
# polls in the guest (no ssh round trip a try) and a figure is taken on one clock.
#
#   xdl-guard.sh verified SINCE SECONDS [unit|i3]
#                                          waits until the guard logs alice's agent (the unit's
#                                          MainPID; with i3, her oldest xidlelock) verified after
#                                          guest time SINCE; prints the pid and the seconds waited
#   xdl-guard.sh logoff SID SECONDS CMD... runs CMD as alice (her session's environment), then
#                                          waits until logind has session SID closing or gone;
#                                          prints the seconds from just before CMD (alice's shell's
#                                          clock) to that, and the state
#   xdl-guard.sh killer SECONDS            as alice, in the background: pkill -9 her agent
#                                          every 0.2 s for SECONDS (its pid in /tmp/xdl-killer.pid,
#                                          the guest time before its first kill in /tmp/xdl-killer.t0)
set -u
ENV='DISPLAY=:0 XAUTHORITY=/home/alice/.Xauthority XDG_RUNTIME_DIR=/run/user/1000 DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus'
alice() { runuser -u alice -- env $ENV "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

cmd=$1; shift
case $cmd in
verified)
    t0=$(now) end=$(($(date +%s) + $2))
    while [ "$(date +%s)" -lt "$end" ]; do
        if [ "${3:-unit}" = i3 ]; then p=$(pgrep -o -u alice -x xidlelock)
        else p=$(alice systemctl --user show -p MainPID --value xidlelock.service 2>/dev/null); fi
        if [ "${p:-0}" != 0 ] && journalctl -b -q --no-pager -u xidlelock-guard.service --since "@${1%.*}" 2>/dev/null |
            grep -q "agent pid $p verified"; then
            echo "$p $(since "$t0")"
            exit 0
        fi
        sleep 0.3
    done
    echo "never $(since "$t0")"
    exit 1
    ;;
logoff)
    sid=$1 secs=$2; shift 2
    t0=$(alice sh -c 'date +%s.%N; exec "$@" >/dev/null 2>&1' logoff "$@" | head -1)
    end=$(($(date +%s) + secs)) st=
    while [ "$(date +%s)" -lt "$end" ]; do
        st=$(loginctl show-session "$sid" -p State --value 2>/dev/null) || st=gone
        [ -n "$st" ] || st=gone
        case $st in closing | gone) echo "$(since "$t0") $st"; exit 0 ;; esac
        sleep 0.1
    done
    echo "never ${st:-?}"
    exit 1
    ;;
killer)
    rm -f /tmp/xdl-killer.pid /tmp/xdl-killer.t0
    alice sh -c 'echo $$ >/tmp/xdl-killer.pid; date +%s.%N >/tmp/xdl-killer.t0; end=$(($(date +%s) + $1))
        while [ "$(date +%s)" -lt "$end" ]; do pkill -9 -u alice -x xidlelock; sleep 0.2; done' killer "$1" \
        </dev/null >/dev/null 2>&1 &
    for i in $(seq 50); do [ -s /tmp/xdl-killer.t0 ] && break; sleep 0.1; done
    ;;
*) echo "xdl-guard.sh: unknown command $cmd" >&2; exit 2 ;;
esac
