#!/usr/bin/env bash
# 58-admin-durable.sh - nothing acknowledged is lost (issue 11): a revoke
# that failed on a full disk really is written by its retry; issue and
# retire-key are in the log when acknowledged (kill -9 right after the
# reply); a state rolled back behind its log (the SQLite WAL deleted, cut or
# garbled while stopped; state.db deleted or emptied) is refused with a clear
# message instead of reviving a revoked token or starting with a new key.
# Full-disk cases run on a small tmpfs mounted in a private mount namespace.
if [ -z "${CB_IN_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	unshare -m --propagation private true 2>/dev/null; then
	CB_IN_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
mkdir -p "$W"
echo data >"$W/f.txt"
jl() { "$CTL" --state "$1" --json list; }
state_of() { jl "$1" | jget '[t["state"] for t in d if t["id"] == "'"$2"'"][0]'; }
issue() { "$CTL" --state "$1" --json issue --sandbox a1 --cap "fs.read:$W/**" | jget 'd["id"]'; }

# -- 1. a revoke on a full disk ----------------------------------------------------
if [ -n "${CB_IN_NS:-}" ]; then
	S="$T_TMP/full"
	mkdir -p "$S" && chmod 0700 "$S"
	mount -t tmpfs -o size=3m,mode=0700 tmpfs "$S"
	srv_start "$S"
	agent_start a1 --tier medium --workspace "$W"
	I1=$(issue "$S")
	t_match "a token to revoke" "$I1" '^[0-9a-f]{32}$'
	# fill the disk to the last byte
	dd if=/dev/zero of="$S/fill" bs=64k 2>/dev/null
	dd if=/dev/zero of="$S/fill2" bs=512 2>/dev/null
	t_exit "revoke on a full disk fails (not acknowledged)" 1 "$CTL" --state "$S" revoke "$I1"
	t_match "... saying nothing changed" "$(cat "$T_TMP/err")" "nothing was changed"
	t_is "... and the token is not revoked in memory either" "$(state_of "$S" "$I1")" active
	rm -f "$S/fill" "$S/fill2"
	t_ok "space back: the retry revokes" "$CTL" --state "$S" --json revoke "$I1"
	t_is "... and really writes (1 revoked, not 'already')" "$(jget 'd["revoked"]' <"$T_TMP/out")" 1
	srv_kill9
	agent_stop a1
	t_ok "restart after kill -9" srv_start "$S"
	t_is "the revoke survived the restart" "$(state_of "$S" "$I1")" revoked
	t_exit "the audit log verifies" 0 "$CTL" --state "$S" audit verify
	srv_stop
	umount -l "$S"

	# -- 1b. every operation performed has its line; new sandboxes refused ----
	S="$T_TMP/full2"
	mkdir -p "$S" && chmod 0700 "$S"
	mount -t tmpfs -o size=3m,mode=0700 tmpfs "$S"
	srv_start "$S"
	cat >"$T_TMP/reads.py" <<'EOT'
import capbroker, sys
cb = capbroker.Client()
print(cb.read_file(sys.argv[1]).decode().strip(), flush=True)
sys.stdin.readline()        # the disk is full now
a = d = 0
for i in range(3000):
    try:
        cb.read_file(sys.argv[1]); a += 1
    except capbroker.Error as e:
        d += 1
        if d >= 20: break
print("allowed=%d denied=%d" % (a, d), flush=True)
EOT
	mkfifo "$T_TMP/go"
	"$CB" run --connect "$S/admin.sock" --id a1 --tier medium --workspace "$W" --grant "fs.read:$W/**" \
		--ro-bind "$T_TMP:/t" -- /usr/bin/python3 /t/reads.py "$W/f.txt" <"$T_TMP/go" >"$T_TMP/reads.out" 2>&1 &
	RP=$!
	_adm_pids+=("$RP")
	exec {GO}>"$T_TMP/go"
	wait_for 100 grep -q data "$T_TMP/reads.out"
	t_is "a read before the disk fills" "$(head -n 1 "$T_TMP/reads.out")" data
	dd if=/dev/zero of="$S/fill" bs=64k 2>/dev/null
	dd if=/dev/zero of="$S/fill2" bs=512 2>/dev/null
	echo go >&$GO
	wait_for 300 grep -q allowed= "$T_TMP/reads.out"
	AOUT=$(cat "$T_TMP/reads.out")
	ALLOWED=$(printf '%s' "$AOUT" | sed -n 's/.*allowed=\([0-9]*\).*/\1/p')
	t_match "the agent's reads on a full disk: some denied" "$AOUT" "denied=[1-9]"
	"$CTL" --state "$S" status >/dev/null 2>&1
	t_exit "a new sandbox on the full disk is refused (125)" 125 \
		"$CB" run --connect "$S/admin.sock" --id a2 --tier medium --workspace "$W" -- /bin/true
	t_match "... with a one-line reason" "$(cat "$T_TMP/err")" "refusing new sandboxes"
	exec {GO}>&-
	wait "$RP"
	srv_stop
	LINES=$(grep -c '"op":"fs.read","resource":"'"$W"'/f.txt",.*"decision":"allow"' "$S/audit.jsonl")
	t_is "every read performed has its audit line (reads + 1 = lines)" "$LINES" "$((ALLOWED + 1))"
	rm -f "$S/fill" "$S/fill2"
	t_exit "space back: the log verifies" 0 "$CTL" --state "$S" audit verify
	umount -l "$S"
else
	t_skip "revoke on a full disk" "needs root and unshare -m for a private tmpfs"
fi

# -- 2. issue and retire-key are in the log when acknowledged -------------------------
S="$T_TMP/ack"
miss_issue=0 miss_retire=0
for i in 1 2 3 4; do
	srv_start "$S"
	agent_start a1 --tier medium --workspace "$W"
	I=$(issue "$S")
	srv_kill9
	grep -q "\"op\":\"issue\",\"resource\":\"fs.read:$W/\*\*\",\"token\":\"$I\"" "$S/audit.jsonl" ||
		miss_issue=$((miss_issue + 1))
	agent_stop a1
	srv_start "$S"
	"$CTL" --state "$S" rotate-key >/dev/null
	OLD=$("$CTL" --state "$S" --json status >/dev/null; ls "$S/keys" | sed -n 's/\.key$//p' | while read -r k; do
		[ "$k" != "$("$CTL" --state "$S" --json rotate-key 2>/dev/null | jget 'd["kid"]' 2>/dev/null)" ] && echo "$k"; done | head -n 1)
	srv_kill9
	srv_start "$S"
	"$CTL" --state "$S" retire-key "$OLD" >/dev/null 2>&1
	srv_kill9
	grep -q "\"op\":\"retire-key\",\"resource\":\"$OLD\"" "$S/audit.jsonl" || miss_retire=$((miss_retire + 1))
done
t_is "every acknowledged issue is in the log after kill -9 (4 trials)" "$miss_issue" 0
t_is "every acknowledged retire-key is in the log after kill -9 (4 trials)" "$miss_retire" 0
t_ok "the state starts again" srv_start "$S"
t_exit "... and the log verifies against it" 0 "$CTL" --state "$S" audit verify
srv_stop

# -- 3. a state rolled back behind its log is refused --------------------------------
S="$T_TMP/roll"
srv_start "$S"
agent_start a1 --tier medium --workspace "$W"
I1=$(issue "$S")
srv_stop	# a clean stop: the token is in state.db itself, the WAL is folded in
agent_stop a1
srv_start "$S"
"$CTL" --state "$S" revoke "$I1" >/dev/null
srv_kill9
t_ok "the revoke's transaction is still in the WAL" test -s "$S/state.db-wal"
cp -a "$S" "$T_TMP/roll.orig"
damage() { # NAME: fresh copy, then damage it
	rm -rf "$S"; cp -a "$T_TMP/roll.orig" "$S"
	case $1 in
	wal-deleted) rm -f "$S/state.db-wal" ;;
	wal-truncated) truncate -s 4000 "$S/state.db-wal" ;;
	wal-garbled) sz=$(stat -c %s "$S/state.db-wal")
		printf 'garbage!garbage!' | dd of="$S/state.db-wal" bs=1 seek=100 conv=notrunc 2>/dev/null ;;
	db-deleted) rm -f "$S/state.db" "$S/state.db-wal" "$S/state.db-shm" ;;
	db-emptied) : >"$S/state.db"; rm -f "$S/state.db-wal" "$S/state.db-shm" ;;
	db-garbled) rm -f "$S/state.db-wal" "$S/state.db-shm"	# page 2: the keys table
		printf 'garbage!%.0s' $(seq 32) | dd of="$S/state.db" bs=1 seek=4096 conv=notrunc 2>/dev/null ;;
	esac
}
for d in wal-deleted wal-truncated wal-garbled; do
	damage $d
	t_exit "$d: capctl audit verify is not intact" 1 "$CTL" --state "$S" audit verify
	t_match "... it names the state behind the log" "$(cat "$T_TMP/out" "$T_TMP/err")" "state-behind"
	t_exit "$d: the broker refuses to start (125)" 125 "$CB" run --state "$S" --tier low -- /bin/true
	t_match "... saying the state is behind its log" "$(cat "$T_TMP/err")" "behind its audit log.*state rebuild"
done
for d in db-deleted db-emptied; do
	damage $d
	t_exit "$d: the broker refuses to start (125)" 125 "$CB" run --state "$S" --tier low -- /bin/true
	t_match "... naming the database and --new-state" "$(cat "$T_TMP/err")" "state.db is missing or empty.*--new-state"
	t_is "... and made no new key" "$(ls "$S/keys" | wc -l)" "$(ls "$T_TMP/roll.orig/keys" | wc -l)"
done
t_ok "--new-state starts a new state deliberately" "$CB" run --state "$S" --new-state --tier low -- /bin/true
t_ok "... and the log says so" grep -q '"op":"state.new"' "$S/audit.jsonl"
damage none
t_ok "the undamaged copy starts" "$CB" run --state "$S" --tier low -- /bin/true

# -- 3b. capbroker state rebuild -----------------------------------------------------------
damage wal-deleted
t_ok "capbroker state rebuild brings the state back to its log" "$CB" state rebuild --state "$S"
t_match "... and says what it applied" "$(cat "$T_TMP/out")" "rebuilt from its audit log: .*1 revocation"
t_ok "the rebuilt state starts" srv_start "$S"
t_is "the acknowledged revoke is back" "$(state_of "$S" "$I1")" revoked
t_exit "... and capctl audit verify says intact" 0 "$CTL" --state "$S" audit verify
srv_stop
damage db-deleted
t_ok "a deleted state.db is rebuilt too" "$CB" state rebuild --state "$S"
t_match "... saying which tokens it cannot restore" "$(cat "$T_TMP/out")" "not in the state and stay refused"
t_ok "... and starts with the old signing key, no new one" \
	sh -c "'$CB' run --state '$S' --tier low -- /bin/true && [ \$(ls '$S/keys' | wc -l) = $(ls "$T_TMP/roll.orig/keys" | wc -l) ]"
damage none
echo '{"prev":"00","seq":1}' >>"$S/audit.jsonl"
t_exit "a damaged log rebuilds nothing (1)" 1 "$CB" state rebuild --state "$S"
t_match "... saying the log is not intact" "$(cat "$T_TMP/err")" "not intact"

# -- 3c. a crash between the state's commit and the log's sync ------------------------
# The state is one decision ahead of its log (what kill -9 in that window
# leaves): the next start writes the record the state kept, and the log
# verifies against the state.
damage none
"$PYTHON" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(n,) = db.execute("SELECT v FROM meta WHERE k = \"dseq\"").fetchone()
db.execute("UPDATE meta SET v = ? WHERE k = \"dseq\"", (n + 1,))
db.execute("INSERT OR REPLACE INTO last_decision(one, dseq, op, resource, actor, decision, reason)"
           " VALUES(1, ?, \"revoke\", \"00112233445566778899aabbccddeeff\", \"uid:0\", 0, 0)", (n + 1,))
db.commit()' "$S/state.db"
t_ok "a state one decision ahead of its log starts" "$CB" run --state "$S" --tier low -- /bin/true
t_ok "... and the log gets the kept record, marked recovered" \
	grep -q '"op":"revoke","resource":"00112233445566778899aabbccddeeff","actor":"uid:0","detail":"recovered at start' "$S/audit.jsonl"
t_exit "... and verifies against the state" 0 "$CTL" --state "$S" audit verify

# -- 3d. the same after a batch of decisions committed together ----------------------
# Revocations decided together (st_revoke_many: one transaction, each its
# own decision, docs/cluster.md "Group commit") leave the state as many
# decisions ahead when the crash comes before the log's sync; each record
# is kept, and the next start writes them all.
batch_ahead() { # GAP: 1 leaves the middle record out
	"$PYTHON" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(n,) = db.execute("SELECT v FROM meta WHERE k = \"dseq\"").fetchone()
db.execute("UPDATE meta SET v = ? WHERE k = \"dseq\"", (n + 3,))
for k in (1, 2, 3):
    if k == 2 and sys.argv[2] == "1":
        continue
    db.execute("INSERT INTO batch_decisions(dseq, op, resource, actor, detail, decision, reason)"
               " VALUES(?, \"revoke\", ?, \"uid:0\", \"in the cluster\", 0, 0)",
               (n + k, "%032x" % (0xb0 + k)))
db.execute("INSERT OR REPLACE INTO last_decision(one, dseq, op, resource, actor, detail, decision, reason)"
           " VALUES(1, ?, \"revoke\", ?, \"uid:0\", \"in the cluster\", 0, 0)", (n + 3, "%032x" % 0xb3))
db.commit()' "$S/state.db" "$1"
}
damage none
batch_ahead 0
t_ok "a state three decisions (one batch) ahead of its log starts" "$CB" run --state "$S" --tier low -- /bin/true
t_is "... and the log gets the three kept records, in order, marked recovered" \
	"$(grep -o '"resource":"0*b[123]","actor":"uid:0","detail":"recovered at start[^"]*: in the cluster"' "$S/audit.jsonl" | cut -c14-45 | tr -d '0"' | tr '\n' ' ')" "b1 b2 b3 "
t_exit "... and verifies against the state" 0 "$CTL" --state "$S" audit verify
damage none
batch_ahead 1
t_exit "a batch ahead with a kept record missing is refused: 125" 125 "$CB" run --state "$S" --tier low -- /bin/true
t_match "... saying the log is behind the state" "$(cat "$T_TMP/err")" "is behind the state"

# -- 4. errors that name their file ------------------------------------------------------
damage db-garbled
t_exit "a damaged database page: 125" 125 "$CB" run --state "$S" --tier low -- /bin/true
t_match "... names the database and SQLite's diagnosis, not a stale errno" "$(cat "$T_TMP/err")" \
	"state.db: database disk image is malformed"
damage none
K=$(ls "$S/keys"/*.key | head -n 1)
mv "$K" "$K.moved"
t_exit "a missing key file: 125" 125 "$CB" run --state "$S" --tier low -- /bin/true
t_match "... names the file" "$(cat "$T_TMP/err")" "key file .*\.key: No such file"
t_done
