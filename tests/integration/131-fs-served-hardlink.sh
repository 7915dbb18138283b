#!/usr/bin/env bash
# 131-fs-served-hardlink.sh - the hardlink rule holds in served trees too.
# capcall's fs.* refuse a regular file with more than one link whose owner
# is not the owner of the grant's root (someone may have linked it in who
# could not read it: fs.protected_hardlinks off).  The file server did not:
# a root-owned tree is served as root, and an agent read, appended to,
# chmod'ed and truncated another user's 0600 file through a hard link in it
# (red team, docs/threat-model.md "Pull files in through hardlinks").  Both
# a tree of the start and one granted while the sandbox runs (a slot, which
# gets its root later).  Needs root (the broker mounts FUSE, the test makes
# the link a local user could make with protected_hardlinks off).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "the hardlink rule in served trees" "needs root and /dev/fuse"
	t_done
	exit
fi

VIC=4297
P="$T_TMP/pub"			# root-owned, served as root
L="$T_TMP/later"		# root-owned, granted while the sandbox runs
V="$T_TMP/victim"
mkdir -p "$P" "$L" "$V"
echo "victim's secret" >"$V/secret"
chown -R "$VIC:$VIC" "$V"
chmod 0700 "$V"
chmod 0600 "$V/secret"
ln "$V/secret" "$P/link"
ln "$V/secret" "$L/link"
echo mine >"$P/own"
ln "$P/own" "$P/own2"		# the root's owner's: allowed
chmod 0755 "$T_TMP" "$P" "$L"

G=()
for op in read list write; do G+=(--grant "fs.$op:$P/**"); done
out=$(timeout 60 "$CB" run --tier high --approve deny "${G[@]}" -- /bin/sh -c "
	cd '$P'
	cat link >/dev/null 2>&1; echo r=\$?
	{ echo pwned >>link; } 2>/dev/null; echo a=\$?
	chmod 0666 link 2>/dev/null; echo c=\$?
	touch link 2>/dev/null; echo t=\$?
	truncate -s 0 link 2>/dev/null; echo z=\$?
	capcall fs.read '$P/link' >/dev/null 2>&1; echo cc=\$?
	cat own2 && echo more >>own2 && echo o=\$?
	ln own2 own3 && cat own3" 2>&1)
t_match "reading another user's file through a hard link in a root-served tree fails" "$out" "r=1"
t_match "... appending to it" "$out" "a=[12]"
t_match "... chmod" "$out" "c=1"
t_match "... touch" "$out" "t=1"
t_match "... truncate" "$out" "z=1"
t_match "... as capcall fs.read is refused" "$out" "cc=77"
t_match "a hard link of the root's owner's file still reads and writes" "$out" "o=0"
t_is "... and links again" "$(printf '%s' "$out" | tail -n 1)" "more"
t_is "the victim's file is unchanged" "$(cat "$V/secret")" "victim's secret"
t_is "... and keeps its mode" "$(stat -c %a "$V/secret")" "600"

# A later tree: a slot gets its root when the grant comes.
S="$T_TMP/st"
srv_start "$S"
agent_start h1 --tier high --workspace "$P"
"$CTL" --state "$S" issue --sandbox h1 --cap "fs.read:$L/**" --cap "fs.write:$L/**" >/dev/null
agent_do h1 "for i in \$(seq 50); do test -e '$L/link' && break; sleep 0.1; done; cat '$L/link'"
t_is "in a tree granted later the link is seen but not read" "$ARC" 1
t_ok "... in a slot" grep -q "\"op\":\"fs.serve\",\"resource\":\"$L\".*may write" "$S/audit.jsonl"
agent_do h1 "echo pwned >>'$L/link'"
t_is "... nor written" "$ARC" 2
t_is "the victim's file is still unchanged" "$(cat "$V/secret")" "victim's secret"
agent_stop h1
t_done
