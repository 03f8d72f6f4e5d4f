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
#                                          waits until logind has removed session SID; prints the
#                                          seconds from just before CMD (alice's shell's clock) to
#                                          the session closing (logind ending it), and to it gone,
#                                          and that clock's time just before CMD
#   xdl-guard.sh killer SECONDS [unit|i3]  as alice, in the background: kill -9 her agent (each
#                                          xidlelock in the unit's cgroup; with i3, the one running)
#                                          every 0.2 s for SECONDS (its pid in /tmp/xdl-killer.pid,
#                                          the guest time before its first kill in /tmp/xdl-killer.t0)
# Scenario (j), the session's user's attacks with kernel.yama.ptrace_scope=1:
#   xdl-guard.sh freeze AGENTPID           as alice, from a scope of her own user manager (a
#                                          process of hers can only move between cgroups of her
#                                          delegated tree): a sleep into the unit's cgroup (it
#                                          stays populated), the agent into a sibling
#                                          (app.slice/xdl-sideways), that frozen; prints the
#                                          guest time just before the freeze
#   xdl-guard.sh thaw AGENTPID             undoes it: thawed, the agent back, the sleep ended
#   xdl-guard.sh killlocker PID SECONDS    as alice kill -9 PID (the agent's locker); waits until
#                                          another i3lock runs in the agent's cgroup; prints its
#                                          pid, the seconds from just before the kill (never) and
#                                          that guest time
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
    # logind's session file (/run/systemd/sessions/SID) is read, not loginctl: it takes 0.3 s a
    # call here, and while logind tears a session down even longer, so that a 1 s "closing" went
    # unseen. STATE=closing is written as logind begins to end the session (its scope stopping).
    sid=$1 secs=$2; shift 2
    f=/run/systemd/sessions/$sid
    t0=$(alice sh -c 'date +%s.%N; exec "$@" >/dev/null 2>&1' logoff "$@" | head -1)
    end=$(($(date +%s) + secs)) closing=never
    while [ "$(date +%s)" -lt "$end" ]; do
        if [ ! -e "$f" ]; then echo "$closing $(since "$t0") $t0"; exit 0; fi
        [ "$closing" = never ] && grep -q '^STATE=closing' "$f" 2>/dev/null && closing=$(since "$t0")
        sleep 0.05
    done
    echo "$closing never $t0"
    exit 1
    ;;
killer)
    # Builtins only in the loop (read, kill) but its sleep: pkill's /proc scan every 0.2 s took
    # 0.9 s for the first kill here and slowed the guard's locker by seconds (1 vCPU, TCG).
    rm -f /tmp/xdl-killer.pid /tmp/xdl-killer.t0 /tmp/xdl-killer.procs
    if [ "${2:-unit}" = i3 ]; then
        procs=/tmp/xdl-killer.procs
        pgrep -o -u alice -x xidlelock >"$procs"; chmod 644 "$procs"
    else
        procs=/sys/fs/cgroup$(alice systemctl --user show -p ControlGroup --value xidlelock.service)/cgroup.procs
    fi
    alice sh -c 'echo $$ >/tmp/xdl-killer.pid; n=$(($2 * 5)) i=0; date +%s.%N >/tmp/xdl-killer.t0
        while [ $i -lt $n ]; do
            while read -r p; do read -r c </proc/$p/comm && [ "$c" = xidlelock ] && kill -9 "$p"; done <"$1"
            i=$((i + 1)); sleep 0.2
        done' killer "$procs" "$1" </dev/null >/dev/null 2>&1 &
    for i in $(seq 50); do [ -s /tmp/xdl-killer.t0 ] && break; sleep 0.1; done
    ;;
freeze|thaw)
    svc=/sys/fs/cgroup$(alice systemctl --user show -p ControlGroup --value xidlelock.service)
    x=/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/xdl-sideways
    if [ "$cmd" = freeze ]; then
        alice systemd-run --user --scope --quiet sh -c '
            sleep 900 </dev/null >/dev/null 2>&1 & echo $! >/tmp/xdl-sideways.sleep
            echo $! >"$1/cgroup.procs" || exit 3
            mkdir -p "$2" && echo "$3" >"$2/cgroup.procs" || exit 4
            date +%s.%N; echo 1 >"$2/cgroup.freeze" || exit 5' freeze "$svc" "$x" "$1"
    else
        alice systemd-run --user --scope --quiet sh -c '
            echo 0 >"$2/cgroup.freeze"; echo "$3" >"$1/cgroup.procs"
            kill "$(cat /tmp/xdl-sideways.sleep)"; rm -f /tmp/xdl-sideways.sleep
            for i in 1 2 3 4 5 6 7 8 9 10; do rmdir "$2" 2>/dev/null && exit 0; sleep 0.2; done; exit 6' thaw "$svc" "$x" "$1"
    fi
    ;;
killlocker)
    # the agent's cgroup.procs read with builtins: pgrep's /proc scan costs most of a second here
    old=$1 procs=/sys/fs/cgroup$(alice systemctl --user show -p ControlGroup --value xidlelock.service)/cgroup.procs
    t0=$(alice sh -c 'date +%s.%N; kill -9 "$1"' killlocker "$old" | head -1)   # the shell's kill: no exec after the clock
    end=$(($(date +%s) + $2))
    while [ "$(date +%s)" -lt "$end" ]; do
        while read -r p; do
            # an i3lock, not a child of another (i3lock's own fork)
            [ "$p" != "$old" ] && read -r c </proc/$p/comm 2>/dev/null && [ "$c" = i3lock ] &&
                read -r _ _ _ pp _ </proc/$p/stat 2>/dev/null && read -r pc </proc/$pp/comm 2>/dev/null &&
                [ "$pc" != i3lock ] && { echo "$p $(since "$t0") $t0"; exit 0; }
        done <"$procs"
        sleep 0.02
    done
    echo "none never $t0"
    exit 1
    ;;
*) echo "xdl-guard.sh: unknown command $cmd" >&2; exit 2 ;;
esac
