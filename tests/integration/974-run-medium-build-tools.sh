#!/usr/bin/env bash
# 974-run-medium-build-tools.sh - the build systems, interpreters and
# everyday tools a project's own scripts call start in the medium tier:
# cmake with ninja (and ctest), pkg-config, perl, zstd, zip and unzip,
# sqlite3, file, jq, bc, hostname, getent, ps, tput and less.  None was on
# the default exec list: each failed "Permission denied".  Each runs
# under the tier's limits and reaches only what the tokens allow (the list
# bounds which binaries start, not what they may touch); running a
# program they build still needs a proc.exec token.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "build tools in the medium tier" "needs root and /dev/fuse"
	out=$(run 'echo "$USER $LOGNAME $(id -un)"' 2>&1)
t_match "USER and LOGNAME name the agent as its /etc/passwd does (they were unset)" "$out" \
	'^(agent agent agent|nobody nobody nobody)$'
t_done
	exit
fi

OWN=4263
W="$T_TMP/ws"
mkdir -p "$W/src"
printf 'int main(void) { return 0; }\n' >"$W/src/m.c"
printf 'cmake_minimum_required(VERSION 3.13)\nproject(t C)\nadd_executable(t m.c)\nenable_testing()\nadd_test(NAME t COMMAND t)\n' \
	>"$W/src/CMakeLists.txt"
chown -R "$OWN:$OWN" "$W"

run() { timeout 300 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "$1"; }
have() { for p in "$@"; do [ -x "/usr/bin/$p" ] || return 1; done; }

if have cmake ninja; then
	out=$(run 'cmake -S src -B build -G Ninja >/dev/null && ninja -C build >/dev/null && ls build/t' 2>&1)
	t_is "cmake configures and ninja builds a C project in the workspace" "$out" "build/t"
	t_match "... the program is the workspace owner's" "$(stat -c %u "$W/build/t" 2>&1)" "^$OWN$"
	out=$(run 'cd build && ctest 2>&1' 2>&1)
	t_match "... ctest runs the test, and running what was built is refused (no proc.exec token)" "$out" \
		"0% tests passed, 1 tests failed out of 1"
else
	t_skip "cmake and ninja" "not installed"
fi
have perl && t_is "perl runs a one-liner" "$(run 'perl -e "print 6*7, qq(\n)"' 2>&1)" "42"
have pkg-config && t_match "pkg-config answers" "$(run 'pkg-config --version' 2>&1)" '^[0-9]+\.[0-9]+'
have zstd && t_is "zstd compresses and zstdcat restores a workspace file" \
	"$(run 'seq 1000 >n && zstd -q n -o n.zst && zstdcat n.zst | tail -n 1' 2>&1)" "1000"
have zip unzip && t_is "zip and unzip round trip" \
	"$(run 'echo hi >z.txt && zip -q z.zip z.txt && rm z.txt && unzip -q z.zip && cat z.txt' 2>&1)" "hi"
have sqlite3 && t_is "sqlite3 makes and queries a database in the workspace" \
	"$(run 'sqlite3 d.db "create table t(x); insert into t values(41); select x+1 from t;"' 2>&1)" "42"
have file && t_match "file names what a file is" "$(run 'file z.txt n.zst' 2>&1)" "Zstandard"
have jq && t_is "jq filters JSON" "$(run 'echo "{\"a\": [1, 2, 3]}" | jq ".a | add"' 2>&1)" "6"
have bc && t_is "bc computes" "$(run 'echo "2^10" | bc' 2>&1)" "1024"
have hostname && t_ok "hostname prints the sandbox's name" run 'test -n "$(hostname)"'
have getent && t_match "getent finds localhost" "$(run 'getent hosts localhost' 2>&1)" "localhost"
have ps && t_match "ps lists the sandbox's own processes" "$(run 'ps -e -o comm=' 2>&1)" "^ps$"
have tput && t_ok "tput answers for a terminal type" run 'TERM=xterm tput cols >/dev/null'
have less && t_is "less pages a file (not a terminal: it copies)" "$(run 'seq 3 | less | tail -n 1' 2>&1)" "3"
out=$(run 'echo "$USER $LOGNAME $(id -un)"' 2>&1)
t_match "USER and LOGNAME name the agent as its /etc/passwd does (they were unset)" "$out" \
	'^(agent agent agent|nobody nobody nobody)$'
t_done
