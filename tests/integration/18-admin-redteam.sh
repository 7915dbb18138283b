#!/usr/bin/env bash
# 18-admin-redteam.sh - second red-team pass, on the administration side:
# the admin socket and the state directory's modes, what an agent's text can
# do to an administrator's terminal (capctl pending/watch/list and the
# --approve tty prompt), elevation requests (session scope, re-use of a
# decided request id, huge ttls, floods that bury other sandboxes' requests),
# audit tampering after a crash, and kill -9 right after an acknowledgement.
# Attacks that fail correctly are regression assertions.  The six bugs this
# pass found (a reused sandbox id inheriting approved elevations, request
# floods hiding other requests from capctl, C1 controls in capabilities and
# in the audit log, an acknowledged revoke that a crash could leave
# unsealed) are fixed; their checks hold the fixes.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
echo "data" >"$W/f.txt"
err() { cat "$T_TMP/err"; }
mode() { stat -c %a "$1"; }

srv_start "$S"
agent_start a1 --tier medium --workspace "$W"

# -- (2) another uid on the host: modes of everything in the state dir ---------------
t_is "state dir is 0700" "$(mode "$S")" 700
t_is "admin.sock is 0600" "$(mode "$S/admin.sock")" 600
t_is "state.db is 0600" "$(mode "$S/state.db")" 600
t_is "audit.jsonl is 0600" "$(mode "$S/audit.jsonl")" 600
bad=$(find "$S" -mindepth 1 \( -perm /077 \) -printf '%p %m\n' 2>/dev/null)
t_is "nothing in the state dir is open to group or others (keys, -wal, -shm, lock)" "$bad" ""
t_is "the keys dir is 0700" "$(mode "$S/keys")" 700

# `capbroker run` without --state keeps its keys in /dev/shm: private, and gone at exit
# (Found through the files this run's broker holds open, not by listing
# /dev/shm: other runs on the machine may come and go meanwhile.)
"$CB" run --tier high --workspace "$W" -- /bin/sleep 3 >/dev/null 2>&1 &
RUNPID=$!
_adm_pids+=("$RUNPID")
# (looked for while the run lasts: it starts later on a loaded machine)
new=
for _ in $(seq 100); do
	new=$(find /proc/"$RUNPID"/fd -mindepth 1 -printf '%l\n' 2>/dev/null |
		grep -o '^/dev/shm/capbroker-[^/]*' | head -n 1)
	[ -n "$new" ] && break
	kill -0 "$RUNPID" 2>/dev/null || break
	sleep 0.1
done
t_match "run without --state: a private state dir in /dev/shm" "$new" '^/dev/shm/capbroker-'
[ -n "$new" ] && t_is "... mode 0700" "$(mode "$new")" 700
[ -n "$new" ] && t_is "... nothing in it open to others" \
	"$(find "$new" -mindepth 1 -perm /077 -printf '%p %m\n' 2>/dev/null)" ""
wait "$RUNPID"
t_ok "... removed at a normal exit" test ! -e "$new"

# SO_PEERCRED whatever the modes: a world-writable socket elsewhere, peer nobody
mkdir -p "$T_TMP/pub"; chmod 0777 "$T_TMP/pub"
S2="$T_TMP/st2"
"$CB" serve --state "$S2" --socket "$T_TMP/pub/adm.sock" >>"$T_TMP/serve2.log" 2>&1 &
SRV2=$!
_adm_pids+=("$SRV2")
wait_for 100 "$CTL" --socket "$T_TMP/pub/adm.sock" status
chmod 0666 "$T_TMP/pub/adm.sock"
t_exit "nobody on a 0666 socket: refused (3)" 3 runuser -u nobody -- "$PUB/capctl" --socket "$T_TMP/pub/adm.sock" pending
t_exit "nobody cannot approve (3)" 3 runuser -u nobody -- "$PUB/capctl" --socket "$T_TMP/pub/adm.sock" approve 1
t_exit "nobody cannot run a sandbox through the daemon (run --connect)" 125 \
	runuser -u nobody -- "$PUB/capbroker" run --connect "$T_TMP/pub/adm.sock" --tier high -- /bin/true
# the other user's gid being in the supplementary groups of a non-admin does not help either
kill "$SRV2" 2>/dev/null; wait "$SRV2" 2>/dev/null

# A local user squats the socket path of a broker that is not running: capctl and
# `run --connect` should refuse a server that is neither root nor themselves.
cat >"$T_TMP/fakebroker.py" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(4)
open(sys.argv[2], "w").close()
s.settimeout(30)	# never outlive the test
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    try:
        data = c.recv(65536)
        with open(sys.argv[2], "ab") as f: f.write(b"got %d bytes\n" % len(data))
    except OSError:
        pass
    c.close()
PY
# setpriv execs: $! is the squatter itself, so the EXIT trap kills it
setpriv --reuid=65534 --regid=65534 --clear-groups "$PYTHON" "$T_TMP/fakebroker.py" \
	"$T_TMP/pub/squat.sock" "$T_TMP/pub/squat.log" </dev/null >/dev/null 2>&1 &
_adm_pids+=("$!")
wait_for 50 test -S "$T_TMP/pub/squat.sock"
t_exit "capctl refuses an admin socket served by another uid (3)" 3 "$CTL" --socket "$T_TMP/pub/squat.sock" approve 1
t_exit "capbroker run --connect refuses it too (125)" 125 "$CB" run --connect "$T_TMP/pub/squat.sock" -- /bin/true
sleep 0.3
t_is "... and the squatter received no command from either" \
	"$(grep -v '^got 0 bytes$' "$T_TMP/pub/squat.log" 2>/dev/null)" ""

# -- (1) a hostile agent and the approver's terminal ------------------------------
ESC=$'\033'
C1=$'\302\233'
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 5 --reason \"ok${ESC}[2J${ESC}]0;pwned${C1}31m\""
NQ=$ASEQ
RID=$(pending_rid fs.read:/etc/hostname)
t_match "a request with escape sequences in its reason is pending" "$RID" '^[0-9]+$'
"$CTL" --state "$S" pending >"$T_TMP/p.txt" 2>&1
t_ok "capctl pending shows no raw ESC" sh -c "! grep -q \"\$(printf '\\033')\" '$T_TMP/p.txt'"
t_ok "capctl pending shows no raw C1 CSI (U+009B)" sh -c "! grep -qa \"\$(printf '\\302\\233')\" '$T_TMP/p.txt'"
t_match "... but shows them visibly" "$(cat "$T_TMP/p.txt")" 'ok\\x1b\[2J'
"$CTL" --state "$S" --json pending >"$T_TMP/p.json" 2>&1
t_ok "capctl --json pending shows no raw ESC" sh -c "! grep -q \"\$(printf '\\033')\" '$T_TMP/p.json'"
t_is "... and round-trips the reason exactly" \
	"$(jget '[r["reason"] for r in d if r["rid"] == int(sys.argv[2])][0] == sys.argv[3]' "$RID" "ok${ESC}[2J${ESC}]0;pwned${C1}31m" <"$T_TMP/p.json")" True
# watch: answer "n" through stdin and look at what it printed
printf 'n\n' | timeout 5 "$CTL" --state "$S" watch >"$T_TMP/w.txt" 2>&1
t_ok "capctl watch showed the request" grep -q "request $RID" "$T_TMP/w.txt"
t_ok "capctl watch shows no raw ESC" sh -c "! grep -q \"\$(printf '\\033')\" '$T_TMP/w.txt'"
agent_wait a1 "$NQ"
t_is "the agent was denied (77)" "$ARC" 77

# the audit log keeps the bytes, escaped: `capctl audit` prints no raw ESC
"$CTL" --state "$S" audit >"$T_TMP/a.txt" 2>&1
t_ok "capctl audit prints no raw ESC from the agent's reason" sh -c "! grep -q \"\$(printf '\\033')\" '$T_TMP/a.txt'"
t_ok "capctl audit prints the agent's C1 control (U+009B CSI) raw: the log escapes only C0 and DEL" sh -c "! grep -qa \"\$(printf '\\302\\233')\" '$T_TMP/a.txt'"

# derive lets the agent choose a token's audience, which `capctl list` shows
"$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.read:$W/**" >"$T_TMP/t0.json"
T0=$(jget 'd["token"]' <"$T_TMP/t0.json"); I0=$(jget 'd["id"]' <"$T_TMP/t0.json")
agent_do a1 "capcall --token $T0 derive --aud 'x${ESC}[2Jy' fs.read:$W/f.txt"
"$CTL" --state "$S" list >"$T_TMP/l.txt" 2>&1
t_ok "capctl list shows no raw ESC (audience chosen by the agent)" sh -c "! grep -q \"\$(printf '\\033')\" '$T_TMP/l.txt'"

# -- (1) decided request ids, ttl overflow, session scope -------------------------
# (issue 10: ttls above 366 days are refused, not clamped)
agent_do a1 "capcall request fs.read:/etc/hostname --ttl 4294967295 --reason big"
t_is "a ttl of 2^32-1 is a usage error (64)" "$ARC" 64
t_match "... saying the maximum" "$AOUT" "at most 31622400"
agent_send a1 "capcall request fs.read:/etc/hostname --ttl 31622400 --reason big"
NQ=$ASEQ
RID=$(pending_rid fs.read:/etc/hostname)
t_is "the maximum ttl is clamped to the policy's maximum (3600)" \
	"$("$CTL" --state "$S" --json pending | jget '[r["ttl"] for r in d if r["rid"] == int(sys.argv[2])][0]' "$RID")" 3600
t_exit "approve --ttl 2^64-1: a usage error (64)" 64 "$CTL" --state "$S" approve "$RID" --ttl 18446744073709551615
t_exit "approve --ttl 31622400: 0" 0 "$CTL" --state "$S" approve "$RID" --ttl 31622400
agent_wait a1 "$NQ"
t_is "the agent got it" "$ARC" 0
"$CTL" --state "$S" --json list --sandbox a1 >"$T_TMP/l.json"
t_is "... for at most the asked ttl (no wrap-around)" \
	"$(jget '[t["exp"] - t["nbf"] for t in d if t["elevated"]][-1]' <"$T_TMP/l.json")" 3600
t_exit "approving the same request id again: refused (1)" 1 "$CTL" --state "$S" approve "$RID"
t_exit "denying it after approval: refused (1)" 1 "$CTL" --state "$S" deny "$RID"
t_exit "an id never issued: unknown (2)" 2 "$CTL" --state "$S" approve 999999
n=$("$CTL" --state "$S" --json list --sandbox a1 | jget 'len([t for t in d if t["elevated"]])')
t_is "one approval minted exactly one elevated token" "$n" 1

"$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.read:$W/**" --ttl 18446744073709551615 >"$T_TMP/big.json" 2>"$T_TMP/err"
rc=$?
[ $rc = 0 ] || echo "# issue --ttl 2^64-1: exit $rc: $(head -c 200 "$T_TMP/err")"
if [ $rc = 0 ]; then
	t_ok "capctl issue --ttl 2^64-1 does not mint an already-expired token (now + ttl must not wrap)" \
		"$PYTHON" -c 'import json,sys,time; d=json.load(open(sys.argv[1])); sys.exit(0 if d["exp"] > time.time() else 1)' "$T_TMP/big.json"
else
	t_ok "capctl issue --ttl 2^64-1 is refused, no token printed" sh -c "! grep -q cap1 '$T_TMP/big.json'"
fi

# session scope: approving fs.read:/etc/issue for the session must not cover wider requests
agent_send a1 "capcall request fs.read:/etc/issue --ttl 20 --reason one"
NQ=$ASEQ
RID=$(pending_rid fs.read:/etc/issue)
"$CTL" --state "$S" approve "$RID" --session >/dev/null
agent_wait a1 "$NQ"
t_is "session approval of fs.read:/etc/issue" "$ARC" 0
for wide in 'fs.read:/etc/*' 'fs.read:/etc/**' 'fs.read:/**' 'fs.write:/etc/issue' 'fs.read:/etc/issue*' 'fs.read:/etc/issue/**' 'fs.list:/etc/issue'; do
	agent_send a1 "capcall request '$wide' --ttl 20 --reason wider"
	NQ=$ASEQ
	r=$(pending_rid "$wide")
	[ -n "$r" ] && "$CTL" --state "$S" deny "$r" >/dev/null 2>&1
	agent_wait a1 "$NQ"
	t_is "session scope does not widen to $wide (the agent waits for a human, who denies: 77)" "$ARC" 77
	[ "$ARC" = 77 ] || echo "#   $AOUT" | head -n 3
done
agent_do a1 "capcall request fs.read:/etc/issue --ttl 99999 --reason again"
t_is "the same capability again is granted by the session" "$ARC" 0
t_is "... but never for longer than the session approval's ttl" \
	"$("$CTL" --state "$S" --json list --sandbox a1 | jget '[t["exp"] - t["nbf"] for t in d if t["elevated"] and t["by"] == "session"][-1]')" 20

# -- (1) an elevation outlives its sandbox when a later sandbox reuses the id -------
# The human approved it for sandbox e1 "having seen its command"; tokens are bound
# to the id string, and only a *running* sandbox's id is refused by run --connect.
agent_start e1 --tier medium --workspace "$W"
agent_send e1 "capcall request fs.read:/etc/hostname --ttl 600 --reason 'first task'"
NQ=$ASEQ
RID=$(pending_rid fs.read:/etc/hostname)
"$CTL" --state "$S" approve "$RID" >/dev/null
agent_wait e1 "$NQ"
t_is "e1 got an elevation approved" "$ARC" 0
agent_do e1 "capcall derive fs.read:/etc/hostname"
ET=$(printf '%s\n' "$AOUT" | grep '^cap1\.' | head -n 1)
t_match "e1 derived a copy of its elevated token (the agent holds its text)" "$ET" '^cap1\.'
agent_stop e1
wait_for 50 sh -c "! '$CTL' --state '$S' --json sandboxes | grep -q '\"e1\"'"
agent_start e1 --tier medium --workspace "$W"
agent_do e1 "capcall --token $ET fs.read /etc/hostname"
t_is "a new sandbox that reuses the id e1 cannot use the elevation approved for the old e1 (77)" "$ARC" 77
agent_stop e1

# -- (1) a flood of pending requests must not hide other sandboxes' requests -------
agent_start v1 --tier medium --workspace "$W"
agent_send v1 "capcall request fs.read:/etc/hosts --ttl 5 --reason 'honest request'"
NV=$ASEQ
VR=$(pending_rid fs.read:/etc/hosts)
t_match "an honest sandbox's request is pending" "$VR" '^[0-9]+$'
LONGR=$(head -c 1000 /dev/zero | tr '\0' R)
SEG=$(head -c 200 /dev/zero | tr '\0' a)
for k in 1 2 3 4; do
	agent_start "h$k" --tier medium --workspace "$W"
	agent_send "h$k" "i=0; while [ \$i -lt 32 ]; do i=\$((i+1)); capcall request fs.read:/x/$SEG/$SEG/$SEG/$SEG/$k.\$i --ttl 5 --reason $LONGR >/dev/null 2>&1 & done; echo started"
done
sleep 3
"$CTL" --state "$S" --json pending >"$T_TMP/flood.json" 2>"$T_TMP/err"
rc=$?
echo "# pending under the flood: exit $rc, $(wc -c <"$T_TMP/flood.json") bytes of JSON; stderr: $(head -c 300 "$T_TMP/err")"
t_is "capctl pending still answers under a flood of long requests from 4 sandboxes" "$rc" 0
t_ok "... and still shows the honest sandbox's request" \
	"$PYTHON" -c 'import json,sys
try: d = json.load(open(sys.argv[1]))
except ValueError: sys.exit(1)
sys.exit(0 if any(r["rid"] == int(sys.argv[2]) for r in d) else 1)' "$T_TMP/flood.json" "$VR"
t_exit "the honest request can still be approved by id" 0 "$CTL" --state "$S" approve "$VR"
agent_wait v1 "$NV"
t_is "... and the honest agent gets it" "$ARC" 0
for k in 1 2 3 4; do
	"$CTL" --state "$S" kill "h$k" >/dev/null 2>&1
done

# -- (4) kill -9 right after an acknowledgement ----------------------------------
"$CTL" --state "$S" --json issue --sandbox a1 --cap "fs.read:$W/**" >"$T_TMP/r.json"
IR=$(jget 'd["id"]' <"$T_TMP/r.json")
TR=$(jget 'd["token"]' <"$T_TMP/r.json")
agent_do a1 "capcall --token $TR derive fs.read:$W/f.txt"
CR=$(printf '%s\n' "$AOUT" | grep '^cap1\.')
"$CTL" --state "$S" revoke "$IR" >/dev/null && srv_kill9
LINES_AT_CRASH=$(wc -l <"$S/audit.jsonl")
srv_start "$S"
t_is "after kill -9 right after the revoke ack: revoked" \
	"$("$CTL" --state "$S" --json list | jget '[t["state"] for t in d if t["id"] == sys.argv[2]][0]' "$IR")" revoked
agent_start a2 --tier medium --workspace "$W"
agent_do a2 "capcall --token $CR fs.read $W/f.txt"
t_is "... and its derived child is refused after the restart" "$ARC" 77
t_exit "audit verify after the crash: intact" 0 "$CTL" --state "$S" audit verify

# st_use of an ancestor chain across kill -9: a child's use is a use of its parent
"$CTL" --state "$S" --json issue --sandbox a2 --cap "fs.read:$W/**" --uses 2 >"$T_TMP/u.json"
TU=$(jget 'd["token"]' <"$T_TMP/u.json")
agent_do a2 "capcall --token $TU derive fs.read:$W/f.txt --uses 2"
CU=$(printf '%s\n' "$AOUT" | grep '^cap1\.' | head -n 1)
t_match "a2 derived a limited child of a 2-use parent" "$CU" '^cap1\.'
agent_do a2 "capcall --token $CU fs.read $W/f.txt"
t_is "one use through the child" "$ARC" 0
srv_kill9
srv_start "$S"
agent_start a4 --tier medium --workspace "$W"
"$CTL" --state "$S" --json list --sandbox a2 >"$T_TMP/ul.json"
t_is "after kill -9 the parent has 1 use left (the child's use was spent on it)" \
	"$(jget '[t["uses"] for t in d if t["caps"] == [sys.argv[2]] and t["parent"] is None and t["uses"] is not None][-1]' "fs.read:$W/**" <"$T_TMP/ul.json")" 1

# -- (3) someone who can edit audit.jsonl after a crash -------------------------------
# The revoke above was acknowledged (on disk, audit flushed) but not sealed by a
# checkpoint before the crash: cut the log back to just before the revoke line.
srv_stop
srv_start "$S"
agent_start a3 --tier medium --workspace "$W"
"$CTL" --state "$S" --json issue --sandbox a3 --cap "fs.read:$W/**" >"$T_TMP/r2.json"
IR2=$(jget 'd["id"]' <"$T_TMP/r2.json")
"$CTL" --state "$S" revoke "$IR2" >/dev/null && srv_kill9
L=$(grep -n '"op":"revoke"' "$S/audit.jsonl" | tail -n 1 | cut -d: -f1)
last_cp=$(grep -n '"ev":"checkpoint"' "$S/audit.jsonl" | tail -n 1 | cut -d: -f1)
t_ok "the acknowledged revoke is sealed by a checkpoint after it" test "$L" -lt "$last_cp"
head -n $((L - 1)) "$S/audit.jsonl" >"$T_TMP/cut" && cat "$T_TMP/cut" >"$S/audit.jsonl"
t_exit "a broker restarted on the cut log refuses to start (125)" 125 \
	"$CB" run --state "$S" --tier low -- /bin/true
"$CTL" --state "$S" audit verify >"$T_TMP/v.txt" 2>&1
rc=$?
t_is "an acknowledged revoke cut from the audit log after kill -9 is caught by audit verify" "$rc" 1
mv "$S/audit.jsonl" "$T_TMP/cut-log"
srv_start "$S" --new-audit-log
t_is "... and the revocation itself survives in the state" \
	"$("$CTL" --state "$S" --json list | jget '[t["state"] for t in d if t["id"] == sys.argv[2]][0]' "$IR2")" revoked

# -- (1) the --approve tty prompt: the capability text is the agent's too ----------
# cap_parse refuses C0 and DEL but not C1 (U+0080-U+009F, valid UTF-8), and every
# fs.*:/** is requestable by default; brk_tty_clean is applied to the command and
# the reason, not to the capability.
cat >"$T_TMP/ptyprompt.py" <<'PY'
# ptyprompt.py ANSWER CMD...: run CMD on a pty, answer the first "Approve?"
# prompt with ANSWER, print the prompt's bytes (from "asks for" to "Approve?")
# as Python bytes repr, then "EXIT n".
import os, pty, select, sys, time
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
out, answered, deadline = b"", False, time.time() + 30
while time.time() < deadline:
    r, _, _ = select.select([fd], [], [], 0.2)
    if not r:
        continue
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
    if not answered and b"Approve?" in out:
        answered = True
        time.sleep(0.1)
        os.write(fd, (sys.argv[1] + "\n").encode())
_, status = os.waitpid(pid, 0)
a = out.find(b"asks for"); z = out.find(b"Approve?")
print(repr(out[a:z]) if a >= 0 and z > a else "NO PROMPT")
print("EXIT", os.waitstatus_to_exitcode(status))
PY
"$PYTHON" "$T_TMP/ptyprompt.py" n "$CB" run --approve tty --tier medium --workspace "$W" -- \
	/bin/sh -c "capcall request 'fs.read:/etc/xy' --ttl 5 --reason 'r${ESC}[2J${C1}2J' >/dev/null 2>&1" >"$T_TMP/pty.txt" 2>&1
t_match "the tty prompt was shown" "$(head -n 1 "$T_TMP/pty.txt")" '^b'
# (pty.txt holds Python's repr of the bytes: a backslash shows doubled)
t_ok "the tty prompt shows the reason with ESC and C1 as visible escapes" \
	grep -qF 'because: r\\x1b[2J\\u009b2J' "$T_TMP/pty.txt"
# A capability holding a C1 CSI (\xc2\x9b) never reaches the prompt: cap_parse refuses it.
"$PYTHON" "$T_TMP/ptyprompt.py" n "$CB" run --approve tty --tier medium --workspace "$W" -- \
	/bin/sh -c "capcall request 'fs.read:/etc/x${C1}2Jy' --ttl 5 --reason r; echo rc=\$?" >"$T_TMP/pty2.txt" 2>&1
t_ok "a capability with a C1 control is refused before any prompt" grep -q "NO PROMPT" "$T_TMP/pty2.txt"
t_ok "... and never reaches the approver's terminal raw" sh -c "! grep -q \"$(printf '\\302\\233')\" '$T_TMP/pty2.txt'"

t_done
