#!/bin/sh
# Tests/Desktop/in-guest-remote.sh: the guest's half of run.sh's remote scenarios: (k), bob's
# remote sessions (xrdp's Xorg on :10, TigerVNC on :1), and (l), alice's remote sessions beside
# her local one (:0). run.sh copies it to /tmp/xdl-remote.sh and runs it as root there. The
# user is XDL_REMOTE_USER (default bob). N is a display number (the user's processes carry
# DISPLAY=:N or :N.0).
#
#   xdl-remote.sh sid N SECONDS            waits for the user's logind session on :N (not
#                                          closing); prints its id
#   xdl-remote.sh gone SECONDS             ends all the user's sessions; waits until logind
#                                          lists none
#   xdl-remote.sh end N SECONDS            ends the user's session on :N only (the VNC unit
#                                          first for :1); waits until logind lists it no more
#   xdl-remote.sh agent N                  the user's xidlelock on :N (pid), or 0
#   xdl-remote.sh answering N              the pid of the agent that answers for :N (its
#                                          control socket's lock file; a user unit's agent keeps
#                                          the DISPLAY it was started with in its environment
#                                          even when it watches another), or 0 (none alive)
#   xdl-remote.sh locker N                 the user's locker on :N (a process named $XDL_LOCKER,
#                                          default i3lock, not a child of one), or -
#   xdl-remote.sh lockstart N              that locker's pid and its start on the guest's
#                                          clock (from /proc: the fork), or "- -"
#   xdl-remote.sh lastinput SECONDS N...   waits (up to SECONDS) until every :N has been idle
#                                          2 s (input sent just before has arrived), then
#                                          prints N:TIME for each, TIME the guest clock's
#                                          instant of its last input (now - the X idle)
#   xdl-remote.sh status N                 the agent on :N's status --json, asked as the user
#   xdl-remote.sh covered N                exit 0 when that agent says its locker covers
#   xdl-remote.sh verified SINCE SECS N    waits until the guard logs the agent on :N verified
#                                          after guest time SINCE; prints the pid and the seconds
#                                          from SINCE to the guard's line
#   xdl-remote.sh watch N SECONDS          for SECONDS, every 0.5 s (a sample itself takes about
#                                          1 s under TCG): guest time, :N's X idle (ms), its locker
#   xdl-remote.sh kill9 N                  as the user: kill -9 the agent on :N; prints the guest
#                                          time just before and the pid
#   xdl-remote.sh restart N                the agent started again inside the session on :N
#                                          (through its session runner: its scope, its id)
#   xdl-remote.sh reload N                 as the user: SIGUSR1 to the agent answering for :N
#                                          (it executes itself again in place and reads its
#                                          config anew)
#   xdl-remote.sh setting N NAME           the value of setting NAME the agent on :N reports
#   xdl-remote.sh prepare                  gives the user bob's remote set-up (the image's, for
#                                          bob): his ~/.xsession (its agent's log
#                                          /tmp/xdl-USER-agent-N.log), i3 config (as
#                                          ~/.config/i3/remote-config: the user's own one is the
#                                          local session's), a VNC password (the user's name),
#                                          and TigerVNC's :1
#   xdl-remote.sh unprepare                undoes prepare (:1 bob's again)
set -u
U=${XDL_REMOTE_USER:-bob}
LK=${XDL_LOCKER:-i3lock}
UID_=$(id -u "$U") || exit 2
# the user's X clients as the session's have them (each server's cookie in ~/.Xauthority)
as_user() { runuser -u "$U" -- env XDG_RUNTIME_DIR="/run/user/$UID_" XAUTHORITY="/home/$U/.Xauthority" "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
on_display() {    # PID N: is PID's DISPLAY :N?
    d=$(tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^DISPLAY=//p')
    [ "$d" = ":$2" ] || [ "$d" = ":$2.0" ]
}
agent() {
    for p in $(pgrep -u "$U" -x xidlelock); do on_display "$p" "$1" && { echo "$p"; return; }; done
    echo 0
}
answering() {
    p=$(tr -dc 0-9 <"/run/user/$UID_/xidlelock/$1.sock.lock" 2>/dev/null)
    [ -n "$p" ] && [ -d "/proc/$p" ] && echo "$p" || echo 0
}
locker() {
    for p in $(pgrep -x "$LK"); do
        pp=$(ps -o ppid= -p "$p" | tr -d ' ')
        [ "$(ps -o comm= -p "$pp")" = "$LK" ] && continue
        # the user's, or started by the user's agent (slock drops its root to nobody)
        [ "$(ps -o user= -p "$p")" = "$U" ] || [ "$(ps -o user= -p "$pp")" = "$U" ] || continue
        on_display "$p" "$1" && { echo "$p"; return; }
    done
    echo -
}
session_on() {    # N [open]: the user's logind session on :N (with open: not closing)
    for s in $(loginctl list-sessions --no-legend | awk -v u="$U" '$3 == u { print $1 }'); do
        d=$(loginctl show-session "$s" -p Display --value 2>/dev/null)
        [ "${2:-}" = open ] && [ "$(loginctl show-session "$s" -p State --value 2>/dev/null)" = closing ] && continue
        [ "$d" = ":$1" ] || [ "$d" = ":$1.0" ] && { echo "$s"; return 0; }
    done
    return 1
}
cmd=$1; shift
case $cmd in
sid)
    end=$(($(date +%s) + $2))
    while [ "$(date +%s)" -lt "$end" ]; do
        session_on "$1" open && exit 0
        sleep 0.3
    done
    exit 1
    ;;
gone)
    systemctl stop tigervncserver@:1.service; loginctl terminate-user "$U" 2>/dev/null
    end=$(($(date +%s) + $1)) t=$(date +%s)
    while [ "$(date +%s)" -lt "$end" ]; do
        loginctl list-sessions --no-legend | awk -v u="$U" '$3 == u' | grep -q . || exit 0
        # what survives 5 s of it (a session left "closing" by a process of its scope) is killed
        [ $(($(date +%s) - t)) -ge 5 ] && { loginctl kill-user "$U" --signal=KILL 2>/dev/null; t=$end; }
        sleep 0.3
    done
    exit 1
    ;;
end)
    [ "$1" = 1 ] && systemctl stop tigervncserver@:1.service
    s=$(session_on "$1") && loginctl terminate-session "$s" 2>/dev/null
    end=$(($(date +%s) + $2)) t=$(date +%s)
    while [ "$(date +%s)" -lt "$end" ]; do
        s=$(session_on "$1") || exit 0
        [ $(($(date +%s) - t)) -ge 5 ] && { loginctl kill-session "$s" --signal=KILL 2>/dev/null; t=$end; }
        sleep 0.3
    done
    exit 1
    ;;
agent) agent "$1" ;;
answering) answering "$1" ;;
locker) locker "$1" ;;
lockstart)
    p=$(locker "$1")
    [ "$p" = - ] && { echo "- -"; exit 0; }
    # field 22: the start in clock ticks after the boot (CLOCK_BOOTTIME, as /proc/uptime)
    awk -v p="$p" -v tck="$(getconf CLK_TCK)" -v now="$(now)" -v up="$(cut -d' ' -f1 /proc/uptime)" \
        '{ printf "%s %.2f\n", p, now - up + $22 / tck }' "/proc/$p/stat"
    ;;
lastinput)
    end=$(($(date +%s) + $1)); shift
    while :; do
        out='' ok=1
        for n in "$@"; do
            # the server reads its idle time between a and b (runuser costs up to 0.5 s here)
            a=$(now); i=$(as_user DISPLAY=":$n" xprintidle 2>/dev/null) || i=0; b=$(now)
            [ "$i" -ge 2000 ] || ok=0
            out="$out $n:$(awk -v a="$a" -v b="$b" -v i="$i" 'BEGIN { printf "%.2f", (a + b) / 2 - i / 1000 }')"
        done
        [ "$ok" = 1 ] || [ "$(date +%s)" -ge "$end" ] && break
        sleep 0.3
    done
    echo "${out# }"
    [ "$ok" = 1 ]
    ;;
status) as_user DISPLAY=":$1" xidlelock status --json ;;
covered) as_user DISPLAY=":$1" xidlelock status --json 2>/dev/null | grep -q '"covers_screen": *true' ;;
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
            "$(as_user DISPLAY=":$1" xprintidle 2>/dev/null || echo ?)" "$(locker "$1")"
        sleep 0.5
    done
    ;;
kill9)
    p=$(agent "$1")
    [ "$p" = 0 ] && { echo "none 0"; exit 1; }
    runuser -u "$U" -- sh -c 'date +%s.%N; kill -9 "$1"' kill9 "$p" | head -1 | tr '\n' ' '
    echo "$p"
    ;;
restart)
    /usr/local/lib/xdl/session-run --user "$U" --display "$1" -- \
        sh -c 'setsid xidlelock </dev/null >>"/tmp/xdl-$2-agent-$1.log" 2>&1 &' restart "$1" "$U"
    ;;
reload)
    p=$(answering "$1")
    [ "$p" = 0 ] && exit 1
    runuser -u "$U" -- kill -USR1 "$p"
    ;;
setting)
    as_user DISPLAY=":$1" xidlelock status --json 2>/dev/null | python3 -c 'import json, sys
try: s = json.load(sys.stdin).get("settings", [])
except Exception: sys.exit(1)
print(next((i.get("value") for i in s if i.get("name") == sys.argv[1]), ""))' "$2"
    ;;
prepare)
    h=/home/$U
    sed "s|/tmp/xdl-bob-agent-|/tmp/xdl-$U-agent-|; s|^i3\$|i3 -c $h/.config/i3/remote-config|" /home/bob/.xsession >"$h/.xsession"
    grep -q "^i3 -c " "$h/.xsession" || { echo "xdl-remote.sh: bob's ~/.xsession does not end in i3" >&2; exit 1; }
    install -d -o "$U" -g "$U" "$h/.config/i3" "$h/.vnc"
    install -m 644 -o "$U" -g "$U" /home/bob/.config/i3/config "$h/.config/i3/remote-config"
    printf '%s\n%s\n' "$U" "$U" | vncpasswd -f >"$h/.vnc/passwd"
    chmod 755 "$h/.xsession"; chmod 600 "$h/.vnc/passwd"; chown "$U:$U" "$h/.xsession" "$h/.vnc/passwd"
    sed -i "s/^:1=.*/:1=$U/" /etc/tigervnc/vncserver.users
    ;;
unprepare)
    h=/home/$U
    rm -f "$h/.xsession" "$h/.config/i3/remote-config" "$h/.vnc/passwd"
    sed -i 's/^:1=.*/:1=bob/' /etc/tigervnc/vncserver.users
    ;;
*) echo "xdl-remote.sh: unknown command $cmd" >&2; exit 2 ;;
esac
