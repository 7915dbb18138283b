#!/usr/bin/env bash
# 972-run-medium-small-tools.sh - the small tools that scripts, build
# systems and a user's own checks call start in the medium tier: ldd (of a
# program and library built in the workspace), locale, getconf, which,
# flock and fallocate.  None was on the default exec list, so each failed
# "Permission denied" (ldd: "/bin/bash: bad interpreter: Permission
# denied", as it is a script), though each only reads the system's own
# files or does what the agent may already do another way: ldd runs the
# ELF loader, which the tier already lets run a workspace program (docs/
# sandbox.md, "The medium tier's programs"), flock runs a command that is
# itself held to the list, and fallocate is a write the file server checks.
# Running the workspace program itself still needs a proc.exec token.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "small system tools in the medium tier" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4262
W="$T_TMP/ws"
mkdir -p "$W"
printf 'int add(int a, int b) { return a + b; }\n' >"$W/lib.c"
printf 'int add(int, int);\nint main(void) { return add(1, 2) - 3; }\n' >"$W/m.c"
chown -R "$OWN:$OWN" "$W"

run() { timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "$1"; }
have() { for p in "$@"; do [ -x "/usr/bin/$p" ] || return 1; done; }

if have ldd; then
	out=$(run 'cc -shared -fPIC -o libadd.so lib.c && cc -o prog m.c -L. -ladd &&
		LD_LIBRARY_PATH=$PWD ldd ./prog' 2>&1)
	t_match "ldd of a program built in the workspace names its workspace library" "$out" \
		"libadd.so => $W/libadd.so"
	t_match "... and libc" "$out" "libc.so.6 => "
else
	t_skip "ldd of a workspace program" "no /usr/bin/ldd"
fi
have locale && t_match "locale prints the locale in force" "$(run 'LANG=C.UTF-8 locale' 2>&1)" \
	'^LC_CTYPE="C.UTF-8"$'
have getconf && t_is "getconf _NPROCESSORS_ONLN is nproc" \
	"$(run 'test "$(getconf _NPROCESSORS_ONLN)" = "$(nproc)" && getconf PAGESIZE' 2>&1)" "$(getconf PAGESIZE)"
have which && t_is "which finds cc and git" "$(run 'which cc git' 2>&1)" "/usr/bin/cc
/usr/bin/git"
if have flock; then
	t_is "flock runs a command under a lock in the workspace" "$(run 'flock lk -c "echo locked"' 2>&1)" "locked"
	t_is "... and a second flock -n cannot have it while it is held" \
		"$(run '(flock 9; flock -n lk true; echo rc=$?) 9>lk' 2>&1)" "rc=1"
else
	t_skip "flock" "no /usr/bin/flock"
fi
# In /tmp: fallocate in the workspace is the file server's (tests/971).
have fallocate && t_is "fallocate -l reserves space" "$(run 'fallocate -l 64K /tmp/r && stat -c %s /tmp/r' 2>&1)" 65536
out=$(run 'LD_LIBRARY_PATH=$PWD ./prog; echo rc=$?' 2>&1)
t_match "the workspace program itself is still refused" "$out" "prog: Permission denied"
t_match "... with 126" "$out" "rc=126$"
t_done
