#!/usr/bin/env bash
# 16-broker-redteam.sh - a hostile, prompt-injected agent attacks the broker
# through its own channel (tests/integration/redteam_agent.py, raw msgpack):
# forged, replayed and widened tokens, use limits, path tricks (symlinks,
# /proc, FIFOs, devices, long and odd paths), net.connect address forms,
# proc.exec (environment, output floods, timeouts, orphans), mediated
# handles across revocation, elevation-request text shown to the approver,
# and token minting floods.
#
# Every attack that fails correctly is a regression test.  The review found
# eleven bugs (a signing race that crashed the daemon, use limits multiplied
# through derive, elevations handed to other sandboxes, orphaned proc.exec
# children, a timeout wrap, special files opened before the type check, an
# unbounded mint, forged tokens filling the table, mediated handles cut on
# their last use, the explicit loopback grant not found, raw control bytes
# in the tty prompt); each is now a check that the fix holds.  Do not weaken
# or skip any of them.
. "$(dirname "$0")/../lib.sh"
AG=/t/redteam_agent.py
BIND="$CB_TOP/tests/integration:/t"
SRV=
trap '[ -n "$SRV" ] && { kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; }; t_cleanup' EXIT

# checks LABEL FILE: one assertion per PASS/FAIL line the agent printed, and
# one that it reached the end (a crash or hang mid-way must not look green).
checks() {
	local label=$1 file=$2 line title
	while IFS= read -r line; do
		case $line in
		"PASS "*) t_is "$label: ${line#PASS }" PASS PASS ;;
		"FAIL "*) title=${line#FAIL }; t_is "$label: ${title%% :: *}" "${title#* :: }" "(secure behaviour)" ;;
		esac
	done <"$file"
	t_is "$label: the agent ran every check" "$(tail -n 1 "$file")" DONE
	[ "$(tail -n 1 "$file")" = DONE ] || sed 's/^/#   /' "$file.err" | tail -n 5
}
serve() { # STATEDIR: start a daemon in the background, SRV is its pid
	"$CB_BIN/capbroker" serve --state "$1" 2>"$1.err" & SRV=$!
	for _ in $(seq 200); do [ -S "$1/admin.sock" ] && break; sleep 0.05; done
}
stop() { [ -n "$SRV" ] && { kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; }; SRV=; }

# ---- tokens: forging, widening, use limits, audiences, the table ---------
W="$T_TMP/tok"; mkdir -p "$W"; echo hi >"$W/f"
"$CB_BIN/capbroker" run --tier medium --workspace "$W" --ro-bind "$BIND" \
	--grant "fs.read:$W/**" --grant "fs.write:$W/**" -- \
	/usr/bin/python3 $AG tok "$W" >"$T_TMP/tok.out" 2>"$T_TMP/tok.out.err"
checks tokens "$T_TMP/tok.out"

# ---- file system: symlinks, /proc, FIFOs, devices, odd paths -------------
W="$T_TMP/fs"; mkdir -p "$W/pub" "$W/out" "$W/sub" "$W/pubx"
echo ok >"$W/pub/ok"; echo SECRET >"$W/secret"; echo s >"$W/pubx/ok"
ln -s /etc "$W/pub/esc"; ln -s ../secret "$W/pub/lnk"; ln -s /proc/self/root "$W/pub/procroot"
mkfifo "$W/pub/fifo" "$W/out/fifo"
mknod "$W/pub/null" c 1 3 2>/dev/null || cp /dev/null "$W/pub/null.unused"
echo nfc >"$W/pub/café"; echo t >"$W/a.txt"; echo t >"$W/sub/b.txt"; echo d >"$W/.txt"
ln -s /etc "$W/out/esc"; ln -s "$T_TMP/fs-dangling-target" "$W/out/dangling"
mkfifo "$W/pub/wfifo"
"$PYTHON" -c "
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
print('opened', flush=True)
try:
    os.write(fd, b'x')
except OSError as e:
    print('write failed', e.errno, flush=True)" "$W/pub/wfifo" >"$T_TMP/fifo-writer.out" 2>&1 & FW=$!
"$CB_BIN/capbroker" run --tier medium --workspace "$W" --ro-bind "$BIND" \
	--grant "fs.read:$W/pub/**" --grant "fs.list:$W/**" --grant "fs.write:$W/out/**" \
	--grant "fs.delete:$W/out/**" --grant "fs.read:$W/*.txt" -- \
	/usr/bin/python3 $AG fs "$W" >"$T_TMP/fs.out" 2>"$T_TMP/fs.out.err"
checks fs "$T_TMP/fs.out"
sleep 0.3
t_is "fs.read of a FIFO never opens it: a writer blocked on it stays blocked (brk_fs_open opens first and checks the type after; for a device such as /dev/watchdog the open itself acts)" \
	"$(cat "$T_TMP/fifo-writer.out")" ""
kill $FW 2>/dev/null; wait $FW 2>/dev/null
t_ok "fs: the dangling symlink's target was not created" test ! -e "$T_TMP/fs-dangling-target"
t_is "fs: W/secret is intact" "$(cat "$W/secret")" SECRET

# ---- mediated handles and use limits -------------------------------------
W="$T_TMP/med"; mkdir -p "$W"; echo hello >"$W/f"
"$CB_BIN/capbroker" run --tier medium --workspace "$W" --ro-bind "$BIND" --grant "fs.read:$W/**" -- \
	/usr/bin/python3 $AG mediated "$W" >"$T_TMP/med.out" 2>"$T_TMP/med.out.err"
checks mediated "$T_TMP/med.out"

# ---- net.connect: address forms against a live loopback listener ---------
W="$T_TMP/net"; mkdir -p "$W"
PORT=$((20000 + RANDOM % 20000))
"$PYTHON" -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $PORT)); s.listen(128)
try:
    s6 = socket.socket(socket.AF_INET6); s6.bind(('::1', $PORT)); s6.listen(128)
except OSError:
    pass
time.sleep(120)" & LST=$!
sleep 0.3
"$CB_BIN/capbroker" run --tier high --workspace "$W" --ro-bind "$BIND" \
	--grant "net.connect:*:*" --grant "net.connect:127.0.0.1:$PORT" -- \
	/usr/bin/python3 $AG net "$W" "$PORT" >"$T_TMP/net.out" 2>"$T_TMP/net.out.err"
kill $LST 2>/dev/null; wait $LST 2>/dev/null
checks net "$T_TMP/net.out"

# ---- proc.exec: what the child sees, floods, argv tricks ----------------
W="$T_TMP/proc"; mkdir -p "$W/pub"; echo ok >"$W/pub/ok"; echo SECRET >"$W/secret"; ln -s /etc "$W/pub/esc"
"$CB_BIN/capbroker" run --tier high --workspace "$W" --ro-bind "$BIND" \
	--grant "proc.exec:/usr/bin/*" --grant "fs.read:$W/pub/**" -- \
	/usr/bin/python3 $AG proc "$W" >"$T_TMP/proc.out" 2>"$T_TMP/proc.out.err"
checks proc "$T_TMP/proc.out"
W="$T_TMP/pbind"; mkdir -p "$W/pub" "$T_TMP/pbind-outside"; echo SECRET >"$W/secret"
echo TOPSECRET >"$T_TMP/pbind-outside/topsecret"
ln -s ../secret "$W/pub/lnk"; ln -s "$T_TMP/pbind-outside" "$W/pub/out"
"$CB_BIN/capbroker" run --tier medium --workspace "$W" --ro-bind "$BIND" \
	--grant "fs.read:$W/pub/**" --grant "proc.exec:/usr/bin/cat" -- \
	/usr/bin/python3 $AG proc-bind "$W" >"$T_TMP/pbind.out" 2>"$T_TMP/pbind.out.err"
checks proc-bind "$T_TMP/pbind.out"

# ---- one daemon: revocation mid-stream, proc.exec orphans ---------------
S="$T_TMP/st1"; serve "$S"
t_ok "serve is listening" test -S "$S/admin.sock"
fds_before=$(ls /proc/$SRV/fd | wc -l)
W="$T_TMP/rev"; mkdir -p "$W" "$T_TMP/flag"; chmod 0755 "$T_TMP/flag"; echo hello >"$W/f"
"$CB_BIN/capbroker" run --connect "$S/admin.sock" --id rt-rev --tier medium --workspace "$W" \
	--ro-bind "$BIND" --ro-bind "$T_TMP/flag:/flag" --grant "fs.read:$W/**" -- \
	/usr/bin/python3 $AG revoke "$W" /flag/go >"$T_TMP/rev.out" 2>"$T_TMP/rev.out.err" & A=$!
for _ in $(seq 300); do grep -q '^TID ' "$T_TMP/rev.out" && break; sleep 0.05; done
tid=$(sed -n 's/^TID //p' "$T_TMP/rev.out")
t_ok "revoke: capctl revokes the agent's grant mid-stream" "$CB_BIN/capctl" --socket "$S/admin.sock" revoke "$tid"
touch "$T_TMP/flag/go"
wait $A
checks revoke "$T_TMP/rev.out"
# the forging, derive, table and handle attacks again, through the daemon
W="$T_TMP/tok2"; mkdir -p "$W"; echo hi >"$W/f"
"$CB_BIN/capbroker" run --connect "$S/admin.sock" --id rt-tok --tier medium --workspace "$W" \
	--ro-bind "$BIND" --grant "fs.read:$W/**" --grant "fs.write:$W/**" -- \
	/usr/bin/python3 $AG tok "$W" >/dev/null 2>&1
"$CB_BIN/capbroker" run --connect "$S/admin.sock" --id rt-med --tier medium --workspace "$W" \
	--ro-bind "$BIND" --grant "fs.read:$W/**" -- /usr/bin/python3 $AG mediated "$W" >/dev/null 2>&1
# Capability roots' fds are kept while in use and closed at the tick once
# idle for 1-2 s (docs/broker.md, "Root fds"): a leak never settles.
sleep 0.5
for _ in $(seq 40); do
	fds_after=$(ls /proc/$SRV/fd | wc -l)
	[ "$fds_after" -le "$((fds_before + 1))" ] && break
	sleep 0.1
done
t_ok "the daemon leaked no descriptor over the token, handle and revocation attacks ($fds_before before, $fds_after after)" \
	test "$fds_after" -le "$((fds_before + 1))"

# An elevation approved for sandbox rt-a, handed to rt-b (which never asked)
# through derive's aud.  The token travels through the test script here;
# in real life through any shared file, repository or message.
W="$T_TMP/elev"; mkdir -p "$W"
"$CB_BIN/capbroker" run --connect "$S/admin.sock" --id rt-a --tier medium --workspace "$W" \
	--ro-bind "$BIND" -- /usr/bin/python3 $AG elev-give "$W" rt-b >"$T_TMP/give.out" 2>"$T_TMP/give.out.err" & A=$!
rid=
for _ in $(seq 100); do
	rid=$("$CB_BIN/capctl" --socket "$S/admin.sock" --json pending 2>/dev/null |
		sed -n 's/.*"rid":\([0-9]*\),"sandbox":"rt-a".*/\1/p' | head -n 1)
	[ -n "$rid" ] && break; sleep 0.1
done
t_ok "elevation: a human approves rt-a's request (${rid:-none})" "$CB_BIN/capctl" --socket "$S/admin.sock" approve "${rid:-0}"
wait $A
checks elev-give "$T_TMP/give.out"
gift=$(sed -n 's/^GIVE //p' "$T_TMP/give.out")
"$CB_BIN/capbroker" run --connect "$S/admin.sock" --id rt-b --tier medium --workspace "$W" \
	--ro-bind "$BIND" -- /usr/bin/python3 $AG elev-take "$W" "${gift:-none}" >"$T_TMP/take.out" 2>"$T_TMP/take.out.err"
checks elev-take "$T_TMP/take.out"

# proc.exec with timeout 2^32-1 ms: (timeout_ms + 999) wraps to 0 in
# brk_op_proc, 0 means "no --timeout", and the stub's default is 3600 s:
# past the low tier's 600 s wall.  The agent exits at once; its children
# must not outlive its sandbox.
W="$T_TMP/orph"; mkdir -p "$W"
ORPH_TAG=$$	# the children's mark: other runs of this suite use other pids
"$CB_BIN/capbroker" run --connect "$S/admin.sock" --id rt-orphan --tier high --workspace "$W" \
	--ro-bind "$BIND" --grant "proc.exec:/usr/bin/sleep" -- \
	/usr/bin/python3 $AG proc-orphan "$W" "$ORPH_TAG" >"$T_TMP/orph.out" 2>"$T_TMP/orph.out.err" &
ORPH=$!
for _ in $(seq 100); do grep -q SENT "$T_TMP/orph.out" 2>/dev/null && break; sleep 0.1; done
stubs=$(for p in $(pgrep -f 'capbroker-stub --tier low --id rt-orphan-x'); do
	tr '\0' ' ' </proc/$p/cmdline 2>/dev/null; echo; done)
wrapped=$(printf '%s\n' "$stubs" | grep -- "97\\.$ORPH_TAG " | head -n 1)
t_match "proc.exec timeout 2^32-1 ms is clamped to the low tier's wall (600 s), no 32-bit wrap" \
	"${wrapped:-no such child (the broker did not start it)}" "--timeout 600 "
wait $ORPH
t_is "orphan: the agent sent its proc.exec requests and exited" "$(head -n 1 "$T_TMP/orph.out")" SENT
# The broker ends the sandbox and its children a moment after the agent
# exits (later on a loaded machine): wait for it, bounded, then check.
orph_gone() { ! "$CB_BIN/capctl" --socket "$S/admin.sock" sandboxes | grep -q rt-orphan &&
	! pgrep -f "sleep (97|86)\\.$ORPH_TAG( |\$)" >/dev/null; }
for _ in $(seq 100); do orph_gone && break; sleep 0.1; done
t_ok "orphan: its sandbox is gone from capctl sandboxes" \
	sh -c "! '$CB_BIN/capctl' --socket '$S/admin.sock' sandboxes | grep -q rt-orphan"
t_ok "proc.exec children do not outlive their agent's sandbox" \
	sh -c "! pgrep -f 'sleep (97|86)\\.$ORPH_TAG( |\$)' >/dev/null"
stop
for _ in $(seq 100); do pgrep -f "sleep (97|86)\\.$ORPH_TAG( |\$)" >/dev/null || break; sleep 0.1; done
t_ok "orphan: stopping the daemon ends the children (PDEATHSIG)" \
	sh -c "! pgrep -f 'sleep (97|86)\\.$ORPH_TAG( |\$)' >/dev/null"

# ---- the tty approval prompt: agent text must not drive the terminal -----
# The reason is the agent's: ESC[2J clears the approver's screen, ESC[H and
# CR move the cursor, and a fake request drawn over the real one gets
# approved.  C1 CSI (U+009B, UTF-8 c2 9b) does the same on terminals that
# honour C1.  (Fixed in brk_tty_prompt_next with brk_tty_clean.)
if command -v script >/dev/null; then
	W="$T_TMP/tty"; mkdir -p "$W"
	(sleep 3; printf 'n\n') | timeout 60 script -qefc "'$CB_BIN/capbroker' run --approve tty --tier medium \
		--workspace '$W' --ro-bind '$BIND' -- /usr/bin/python3 $AG request '$W' 'ok@ESC@[2J@ESC@[H@CR@FAKE@C1@2J'" \
		"$T_TMP/typescript" >/dev/null 2>&1
	t_match "tty: the prompt showed the request" "$(tr -d '\r' <"$T_TMP/typescript")" "asks for"
	t_ok "tty: the approval prompt never sends the agent's ESC bytes to the approver's terminal" \
		sh -c "! grep -q \"because: ok$(printf '\033')\" '$T_TMP/typescript'"
	t_ok "tty: ... nor its carriage return, nor a UTF-8 C1 CSI" \
		sh -c "! grep -q \"$(printf '\rFAKE')\" '$T_TMP/typescript' && ! grep -q \"$(printf '\302\233')\" '$T_TMP/typescript'"
else
	t_skip "tty: approval prompt" "no script(1)"
	t_skip "tty: the approval prompt never sends the agent's control bytes" "no script(1)"
	t_skip "tty: ... nor its carriage return, nor a UTF-8 C1 CSI" "no script(1)"
fi

# ---- minting floods: quota, and the signing-key race ---------------------
S="$T_TMP/st2"; serve "$S"
W="$T_TMP/flood"; mkdir -p "$W"; echo payload >"$W/f"
"$CB_BIN/capbroker" run --connect "$S/admin.sock" --id rt-quota --tier medium --workspace "$W" \
	--ro-bind "$BIND" --grant "fs.read:$W/**" -- /usr/bin/python3 $AG flood-derive "$W" 3000 \
	>"$T_TMP/quota.out" 2>&1
minted=$(sed -n 's/^MINTED \([0-9]*\).*/\1/p' "$T_TMP/quota.out")
t_ok "one sandbox cannot mint tokens without bound (${minted:-?} of 3000 derives minted, each a durable state row and audit line; want a per-sandbox quota <= 1024)" \
	test "${minted:-0}" -le 1024 -a -n "$minted"
# The audit writer thread signs checkpoints under st->mu; token signing on
# the loop thread does not take it, and each cap_sign flips the key page
# between PROT_READ and PROT_NONE: the writer's mprotect(NONE) lands in the
# middle of the other thread's crypto_sign and the broker dies of SIGSEGV.
# Three malformed frames after each derive (cheap audited denials) make
# checkpoints frequent: without a fix this dies within a second or two.
alive=yes round=0 t_end=$((SECONDS + 30))
while [ $SECONDS -lt $t_end ]; do
	round=$((round + 1))
	timeout 60 "$CB_BIN/capbroker" run --connect "$S/admin.sock" --id "rt-flood$round" --tier medium \
		--workspace "$W" --ro-bind "$BIND" --grant "fs.read:$W/**" -- \
		/usr/bin/python3 $AG flood-derive "$W" 10000 3 >"$T_TMP/flood$round.out" 2>&1
	kill -0 $SRV 2>/dev/null || { alive="no (died in round $round)"; break; }
done
t_is "the daemon survives 30 s of pipelined derives mixed with malformed frames (cap_sign races the audit writer's checkpoint signature on the key's mprotect; $round rounds)" "$alive" yes
# The same race without the broker, deterministic: two threads, one keyring.
LIBS="${CB_BUILD:-$CB_TOP/build}"
if [ -f "$LIBS/libcaps.a" ] && command -v cc >/dev/null &&
	cc -std=c17 -D_GNU_SOURCE -I"$CB_TOP" -o "$T_TMP/signrace" "$CB_TOP/tests/integration/redteam_signrace.c" \
		"$LIBS/libcaps.a" "$LIBS/libwire.a" "$LIBS/libcommon.a" -lsodium -lmsgpackc -lpthread 2>"$T_TMP/cc.err"; then
	t_exit "cap_sign is safe on two threads at once (token and audit-checkpoint signing share one key page; caps/key.c cap_sign)" \
		0 "$T_TMP/signrace" 100000
else
	t_skip "cap_sign is safe on two threads at once" "cannot build the helper ($(head -n 1 "$T_TMP/cc.err" 2>/dev/null))"
fi
stop
t_done
