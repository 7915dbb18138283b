#!/usr/bin/env bash
# 941-audit-unlogged-denials.sh - a denial whose line the audit log refuses
# is counted, never silently lost.  On a full disk the log takes lines
# only while its reserve lasts (docs/audit.md, "No operation without room
# for its record"); a denial after that was answered with no line at all
# (brk_budget_deny ignored the refusal).  Now the sandbox counts them, and
# one "audit.unlogged" line says how many and from when to when as soon
# as the log takes lines again; a sandbox that ends first leaves its count
# to the broker's own line; a broker that stops while the log still
# refuses says so on stderr.  Before, 800 distinct denials on a full disk
# left 593 without any trace (207 lines written).  Runs on a small tmpfs in a private
# mount namespace (root).
if [ -z "${CB_IN_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	unshare -m --propagation private true 2>/dev/null; then
	CB_IN_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ -z "${CB_IN_NS:-}" ]; then
	t_skip "denials on a full disk are counted" "needs root and unshare -m for a private tmpfs"
	t_done
	exit
fi
NL=800 NS=50 N=850	# long denials, then short ones (below)
W="$T_TMP/ws"
S="$T_TMP/full"
mkdir -p "$W" "$S" && chmod 0700 "$S"
echo data >"$W/f.txt"
mount -t tmpfs -o size=3m,mode=0700 tmpfs "$S"
cat >"$T_TMP/deny.py" <<'EOT'
import capbroker, sys
cb = capbroker.Client()
print(cb.read_file(sys.argv[1]).decode().strip(), flush=True)
sys.stdin.readline()        # the disk is full now
d = a = 0
long = "x" * 1000            # lines of about 1.3 KB: the reserve holds some 200
for i in range(int(sys.argv[2]) + int(sys.argv[3])):
    try:
        if i < int(sys.argv[2]):
            cb.read_file("/nonexistent/denied-%d/%s" % (i, long))
        else:                # short lines use up what a long one left
            cb.read_file("/nonexistent/denied-s%d" % i)
        a += 1
    except capbroker.Error:
        d += 1
print("denied=%d allowed=%d" % (d, a), flush=True)
sys.stdin.readline()
EOT
# deny_agent ID: an agent that reads once, then makes N distinct denied
# reads when told (GO is the fd that tells it): NL of long paths, NS short
deny_agent() {
	mkfifo "$T_TMP/$1.go"
	adm_nofifos "$CB" run --connect "$S/admin.sock" --id "$1" --tier medium --workspace "$W" \
		--grant "fs.read:$W/**" --ro-bind "$T_TMP:/t" -- /usr/bin/python3 /t/deny.py "$W/f.txt" "$NL" "$NS" \
		<"$T_TMP/$1.go" >"$T_TMP/$1.out" 2>&1 &
	_adm_pids+=("$!")
	APID[$1]=$!
	exec {GO}>"$T_TMP/$1.go"
	wait_for 100 grep -q data "$T_TMP/$1.out"
}
fill() { dd if=/dev/zero of="$S/fill" bs=64k 2>/dev/null; dd if=/dev/zero of="$S/fill2" bs=512 2>/dev/null; }
# denials SANDBOX [UNLOGGED...]: "LINES COUNTED" - denials of the agent's
# paths written as lines (a coalesced line stands for its count), and
# what the audit.unlogged deny lines in the name of each UNLOGGED (default
# SANDBOX; "-" for the broker's own, no sandbox) count
denials() {
	local sb=$1; shift
	"$PYTHON" -c 'import json, sys
def load(l):
    try:
        return json.loads(l)
    except ValueError:        # the torn end of a log that failed
        return {}
ls = [load(l) for l in open(sys.argv[1])]
names = [None if n == "-" else n for n in sys.argv[3:]] or [sys.argv[2]]
d = sum(l.get("count") or 1 for l in ls if l.get("sandbox") == sys.argv[2] and
        l.get("decision") == "deny" and l.get("resource", "").startswith("/nonexistent/denied-"))
u = sum(l["count"] for l in ls if l.get("op") == "audit.unlogged" and l.get("decision") == "deny"
        and l.get("sandbox") in names)
print(d, u)' "$S/audit.jsonl" "$sb" "$@"
}
# every SANDBOX [UNLOGGED...]: the log accounts for all N denials
every() { local d u; read -r d u < <(denials "$@"); [ $((d + u)) -eq "$N" ]; }

# let_deny NAME TITLE WANT: agent NAME makes its denials; its report matches WANT
let_deny() {
	echo go >&$GO
	wait_for 300 grep -q denied= "$T_TMP/$1.out"
	t_match "$2" "$(cat "$T_TMP/$1.out")" "$3"
}
# agent_end NAME: agent NAME exits
agent_end() {
	echo >&$GO
	exec {GO}>&-
	wait "${APID[$1]}"
}

srv_start "$S"

# -- 1. the count is written as soon as the log takes lines again ------------
deny_agent a1
t_is "a read before the disk fills" "$(head -n 1 "$T_TMP/a1.out")" data
fill
let_deny a1 "the agent was denied $N times on the full disk" "denied=$N allowed=0"
read -r lines counted < <(denials a1)
echo "# on the full disk: $lines denial lines, $counted counted"
t_ok "... and the log refused some of their lines ($lines of $N written)" test "$lines" -lt "$N"
rm -f "$S/fill" "$S/fill2"
# (a count may be written on the full disk already: a short line can fit
# in what is left of the reserve when a denial's line does not)
wait_for 100 every a1
read -r lines counted < <(denials a1)
echo "# space back: $lines denial lines, $counted counted by audit.unlogged"
t_is "space back: lines and the audit.unlogged count together are every denial ($lines + $counted)" \
	"$((lines + counted))" "$N"
t_match "... a line saying how many and when, first and last" \
	"$(grep '"op":"audit.unlogged"' "$S/audit.jsonl" | tail -n 1)" \
	'"sandbox":"a1","op":"audit.unlogged","decision":"deny","actor":"broker","detail":"[^"]+","count":[1-9][0-9]*,"first":"[-0-9T:.]+Z","last":"[-0-9T:.]+Z"\}$'
t_match "capctl audit shows it" "$("$CTL" --state "$S" audit --sandbox a1 --op audit.unlogged)" \
	"audit.unlogged.*\([0-9]+ not logged, [-0-9T:.]+Z to [-0-9T:.]+Z\)"
t_ok "the log verifies" "$CTL" --state "$S" audit verify
agent_end a1

# -- 2. a sandbox that ends first leaves its count to the broker -------------
deny_agent a2
fill
let_deny a2 "a second agent denied $N times on the full disk" "denied=$N"
agent_end a2
gone() { ! "$CTL" --state "$S" sandboxes 2>/dev/null | grep -q a2; }
wait_for 100 gone
rm -f "$S/fill" "$S/fill2"
broker_line() { grep '"op":"audit.unlogged","decision":"deny"' "$S/audit.jsonl" | grep -vq '"sandbox"'; }
t_ok "it ended with the disk full; space back: the broker's own line counts its denials" \
	wait_for 100 broker_line
wait_for 100 every a2 a2 -
read -r lines counted < <(denials a2 a2 -)
echo "# a2: $lines denial lines, $counted counted by audit.unlogged (its own and the broker's)"
t_is "... lines and counts together are every denial ($lines + $counted)" "$((lines + counted))" "$N"
t_ok "the log verifies" "$CTL" --state "$S" audit verify

# -- 3. a broker stopped while the log still refuses says so -----------------
# (a full disk still takes a short count line in what is left of the
# reserve, so the log is made to fail for good instead: a file size limit)
deny_agent a3
prlimit --pid "$SRV" --fsize=$(($(stat -c %s "$S/audit.jsonl") + 2000))
let_deny a3 "a third agent denied $N times once the log failed" "denied=$N"
agent_end a3
srv_stop
said=$(sed -n 's/^capbroker: \([0-9]*\) denials not logged, from .* to .*: the audit log refused.*/\1/p' "$T_TMP/serve.log")
echo "# stderr: $(grep 'not logged' "$T_TMP/serve.log" | tr '\n' ' ')"
read -r lines counted < <(denials a3)
t_ok "the broker stopped says on stderr how many denials the log lacks ($said)" test "${said:-0}" -gt 0
t_ok "... no more than it lacks ($lines + $counted in the log)" test $((lines + counted + said)) -le "$N"
t_ok "the log still verifies (its torn end is not tampering)" "$CTL" --state "$S" audit verify
umount -l "$S"
t_done
