#!/usr/bin/env bash
# 84-fs-served-audit-room.sh - the served workspace, like every explicit
# operation, acts only while the audit log has room for the line: once the
# disk under the log is full, a create through the served mount is refused
# (nothing done), so every file the agent created has its fs.create line.
# Before, the file server never asked the log: creates went on after the
# log could no longer take their lines.  Needs root (FUSE, a small tmpfs).
. "$(dirname "$0")/../lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "the served workspace and the log's room" "needs root and /dev/fuse"
	t_done
	exit
fi
S="$T_TMP/state"; W="$T_TMP/ws"; mkdir -p "$S" "$W"
mount -t tmpfs -o size=640k,mode=0700 tmpfs "$S" || { t_skip "tmpfs" "mount failed"; t_done; exit; }
trap 'umount -l "$S" 2>/dev/null; t_cleanup' EXIT

out=$(timeout 120 "$CB_BIN/capbroker" run --state "$S" --tier medium --workspace "$W" -- /bin/sh -c \
	'i=0; while [ $i -lt 20000 ]; do echo x >"f$i" 2>/dev/null || { echo "refused at $i"; break; }; i=$((i+1)); done; echo "ended at $i"' 2>"$T_TMP/err")
rc=$?
echo "# $(echo "$out" | tr '\n' ' ')"
t_ok "the run finished (no hang)" test "$rc" != 124
t_match "creates stopped once the log had no room" "$out" "^refused at [0-9]+"
files=$(find "$W" -maxdepth 1 -name 'f*' | wc -l)
lines=$(grep -c '"op":"fs.create".*"decision":"allow"' "$S/audit.jsonl")
t_ok "every file created has its line ($files files, $lines lines)" test "$files" -le "$lines"
t_ok "the log still verifies" "$CB_BIN/capctl" --state "$S" audit verify
t_done
