#!/usr/bin/env bash
# 918-fs-served-name-limits.sh - a served path no capability can name says
# why.  The capability grammar (docs/tokens.md) holds paths of at most
# CAP_STR_MAX bytes and CAP_MAX_COMPONENTS components, without control or
# bidirectional characters, so no token can cover a deeper or longer path
# or such a name; the file server refused them as it refuses a path no
# token covers, EACCES, and an agent whose `mkdir -p` of a deep tree failed
# with "Permission denied" went looking for a grant that cannot exist.  Now
# too long or too deep is ENAMETOOLONG ("File name too long") and an odd
# name EINVAL ("Invalid argument"), as from a file system that cannot hold
# them, each still refused and audited; what fits is served as before.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "paths no capability can name" "needs root and /dev/fuse"
	t_done
	exit
fi

MAXC=$(sed -n 's/^#define CAP_MAX_COMPONENTS[[:space:]]*\([0-9]*\).*/\1/p' "$CB_TOP/caps/caps.h")
MAXB=$(sed -n 's/^#define CAP_STR_MAX[[:space:]]*\([0-9]*\).*/\1/p' "$CB_TOP/caps/caps.h")
W="$T_TMP/ws"
mkdir -p "$W"
# Components the workspace's own path already has; the tree may hold the rest.
WC=$(printf '%s' "$W" | tr -cd / | wc -c)
ROOM=$((MAXC - WC))
# A name with a newline, made on the host: the agent sees it listed.
touch "$W/nl"$'\n'"name"

S="$T_TMP/st"
run() { timeout 120 "$CB" run --state "$S" --tier medium --workspace "$W" --approve deny -- \
	/bin/bash -c "$1" 2>&1; }

out=$(run "p=.; for i in \$(seq $ROOM); do p=\$p/d; done; mkdir -p \$p && echo made; mkdir \$p/d")
t_match "a tree as deep as a capability can name is made" "$out" "^made$"
t_match "... one level deeper is 'File name too long', not 'Permission denied'" "$out" \
	"mkdir: cannot create directory .*: File name too long$"
t_is "... and the host has exactly the levels that fit" \
	"$(find "$W/d" -type d | awk -F/ '{ print NF - 1 }' | sort -n | tail -1)" "$MAXC"
long=$(printf '%0200d' 0)
n=$(((MAXB - ${#W}) / 201 + 1))
out=$(run "p=.; for i in \$(seq $n); do p=\$p/$long; done; mkdir -p \$p")
t_match "a path longer than a capability can name: 'File name too long'" "$out" "File name too long$"
t_match "a name with a control character: 'Invalid argument'" \
	"$(run "touch \$'a\\x01b'; ls nl* >/dev/null")" \
	"touch: cannot touch 'a'\\$'\\\\001''b': Invalid argument"$'\n'"ls: cannot access 'nl'\\$'\\\\n''name': Invalid argument"
t_match "... or a bidirectional override" "$(run "touch \$'x\\u202ey'")" "Invalid argument$"
t_is "... and none is made on the host" "$(ls "$W" | grep -c '^a\|^x')" 0
t_match "each refusal is audited with its reason" \
	"$(grep '"decision":"deny"' "$S/audit.jsonl" | grep -o '"detail":"[^"]*"' | sort -u | tr '\n' ' ')" \
	'"detail":"a name no capability can name \(a control or bidirectional character\)" "detail":"deeper than a capability can name"'
t_match "a change no token covers is still 'Permission denied'" \
	"$(timeout 120 "$CB" run --tier medium --workspace "$W" --grant "fs.read:$W/**" \
	--grant "fs.list:$W/**" --approve deny -- /bin/sh -c 'touch new' 2>&1)" "Permission denied$"
t_done
