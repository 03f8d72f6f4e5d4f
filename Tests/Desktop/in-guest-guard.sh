#!/bin/sh
# Tests/Desktop/in-guest-guard.sh: the guest's half of run.sh's scenario (i), the guard. run.sh
# copies it to /tmp/xdl-guard.sh in the guest and runs it as root there, so that a wait
# polls in the guest (no ssh round trip a try) and a figure is taken on one clock.
#
#   xdl-guard.sh verified SINCE SECONDS    waits until the guard logs alice's unit's agent (its
#                                          MainPID) verified after guest time SINCE; prints
#                                          the pid and the seconds waited
#   xdl-guard.sh logoff SID SECONDS CMD... runs CMD as alice (her session's environment), then
#                                          waits until logind has session SID closing or gone;
#                                          prints the seconds from before CMD to that, and the state
#   xdl-guard.sh killer SECONDS            as alice, in the background: pkill -9 her agent
#                                          every 0.2 s for SECONDS (its pid in /tmp/xdl-killer.pid)
#   xdl-guard.sh gone SECONDS              waits until alice has no agent process; prints the seconds
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
        p=$(alice systemctl --user show -p MainPID --value xidlelock.service 2>/dev/null)
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
    t0=$(now)
    alice "$@" >/dev/null 2>&1
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
    alice sh -c 'echo $$ >/tmp/xdl-killer.pid; end=$(($(date +%s) + $1))
        while [ "$(date +%s)" -lt "$end" ]; do pkill -9 -u alice -x xidlelock; sleep 0.2; done' killer "$1" \
        </dev/null >/dev/null 2>&1 &
    for i in 1 2 3 4 5 6 7 8 9 10; do [ -s /tmp/xdl-killer.pid ] && break; sleep 0.1; done
    ;;
gone)
    t0=$(now) end=$(($(date +%s) + $1))
    while [ "$(date +%s)" -lt "$end" ]; do
        pgrep -u alice -x xidlelock >/dev/null || { since "$t0"; echo; exit 0; }
        sleep 0.1
    done
    exit 1
    ;;
*) echo "xdl-guard.sh: unknown command $cmd" >&2; exit 2 ;;
esac
