#!/bin/sh
# Tests/Desktop/in-guest-remote.sh: the guest's half of run.sh's scenario (k), bob's remote
# sessions (xrdp's Xorg on :10, TigerVNC on :1). run.sh copies it to /tmp/xdl-remote.sh and
# runs it as root there. N is a display number (bob's processes carry DISPLAY=:N or :N.0).
#
#   xdl-remote.sh sid N SECONDS            waits for bob's logind session on :N (not closing);
#                                          prints its id
#   xdl-remote.sh gone SECONDS             ends bob's sessions; waits until logind lists none
#   xdl-remote.sh agent N                  bob's xidlelock on :N (pid), or 0
#   xdl-remote.sh locker N                 bob's locker on :N (an i3lock not a child of one), or -
#   xdl-remote.sh verified SINCE SECS N    waits until the guard logs bob's agent on :N verified
#                                          after guest time SINCE; prints the pid and the seconds
#                                          from SINCE to the guard's line
#   xdl-remote.sh watch N SECONDS          for SECONDS, every 0.5 s (a sample itself takes about
#                                          1 s under TCG): guest time, :N's X idle (ms), its locker
#   xdl-remote.sh kill9 N                  as bob: kill -9 his agent on :N; prints the guest time
#                                          just before and the pid
#   xdl-remote.sh restart N                the agent started again inside the session on :N
#                                          (through its session runner: its scope, its id)
set -u
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
on_display() {    # PID N: is PID's DISPLAY :N?
    d=$(tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^DISPLAY=//p')
    [ "$d" = ":$2" ] || [ "$d" = ":$2.0" ]
}
agent() {
    for p in $(pgrep -u bob -x xidlelock); do on_display "$p" "$1" && { echo "$p"; return; }; done
    echo 0
}
locker() {
    for p in $(pgrep -u bob -x i3lock); do
        pp=$(ps -o ppid= -p "$p" | tr -d ' ')
        [ "$(ps -o comm= -p "$pp")" = i3lock ] && continue
        on_display "$p" "$1" && { echo "$p"; return; }
    done
    echo -
}
cmd=$1; shift
case $cmd in
sid)
    end=$(($(date +%s) + $2))
    while [ "$(date +%s)" -lt "$end" ]; do
        for s in $(loginctl list-sessions --no-legend | awk '$3 == "bob" { print $1 }'); do
            d=$(loginctl show-session "$s" -p Display --value 2>/dev/null)
            [ "$(loginctl show-session "$s" -p State --value 2>/dev/null)" = closing ] && continue
            [ "$d" = ":$1" ] || [ "$d" = ":$1.0" ] && { echo "$s"; exit 0; }
        done
        sleep 0.3
    done
    exit 1
    ;;
gone)
    systemctl stop tigervncserver@:1.service; loginctl terminate-user bob 2>/dev/null
    end=$(($(date +%s) + $1)) t=$(date +%s)
    while [ "$(date +%s)" -lt "$end" ]; do
        loginctl list-sessions --no-legend | awk '$3 == "bob"' | grep -q . || exit 0
        # what survives 5 s of it (a session left "closing" by a process of its scope) is killed
        [ $(($(date +%s) - t)) -ge 5 ] && { loginctl kill-user bob --signal=KILL 2>/dev/null; t=$end; }
        sleep 0.3
    done
    exit 1
    ;;
agent) agent "$1" ;;
locker) locker "$1" ;;
verified)
    t0=$(now) end=$(($(date +%s) + $2))
    while [ "$(date +%s)" -lt "$end" ]; do
        p=$(agent "$3")
        ts=
        [ "$p" != 0 ] && ts=$(journalctl -b -q --no-pager -o short-unix -u xidlelock-guard.service --since "@${1%.*}" 2>/dev/null |
            awk -v p="agent pid $p verified" 'index($0, p) { print $1; exit }')
        if [ -n "$ts" ]; then echo "$p $(awk -v a="$1" -v b="$ts" 'BEGIN { printf "%.2f", b - a }')"; exit 0; fi
        sleep 0.3
    done
    echo "never $(since "$t0")"; exit 1
    ;;
watch)
    end=$(($(date +%s) + $2))
    while [ "$(date +%s)" -lt "$end" ]; do
        printf '%s %s %s\n' "$(date +%s.%N | cut -c1-14)" \
            "$(runuser -u bob -- env DISPLAY=":$1" XAUTHORITY=/home/bob/.Xauthority xprintidle 2>/dev/null || echo ?)" "$(locker "$1")"
        sleep 0.5
    done
    ;;
kill9)
    p=$(agent "$1")
    [ "$p" = 0 ] && { echo "none 0"; exit 1; }
    runuser -u bob -- sh -c 'date +%s.%N; kill -9 "$1"' kill9 "$p" | head -1 | tr '\n' ' '
    echo "$p"
    ;;
restart)
    /usr/local/lib/xdl/session-run --user bob --display "$1" -- \
        sh -c 'setsid xidlelock </dev/null >>"/tmp/xdl-bob-agent-$1.log" 2>&1 &' restart "$1"
    ;;
*) echo "xdl-remote.sh: unknown command $cmd" >&2; exit 2 ;;
esac
