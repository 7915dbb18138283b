# tests/lib.sh - helpers for the shell integration tests (sourced).
# Each assertion prints one TAP line; t_done prints the plan.
# Environment from tests/run.sh: CB_BIN (programs), CB_BUILD, CB_TOP, PYTHON.
: "${CB_BIN:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bin}"
: "${CB_TOP:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
# A test run alone (not by tests/run.sh): the build directory of CB_BIN's
# build (the Makefile's B: build/, or build-san/ for build-san/bin).
case "$CB_BIN" in
*/build-san/bin) : "${CB_BUILD:=${CB_BIN%/bin}}" ;;
*) : "${CB_BUILD:=$CB_TOP/build}" ;;
esac
: "${PYTHON:=/usr/bin/python3}"
_t_n=0 _t_failed=0
# Files the tests write (policies above all) must not be group-writable
# whatever the caller's umask: the broker refuses such a policy.
umask 022
# Not under /tmp: sandboxes reserve /tmp for their own private tmpfs, so host
# paths there cannot be shown to them.  Not under the build directory either:
# the tree may sit in a private (0700) directory (CI clones into mktemp -d),
# which the sandbox user and the tests' other users cannot search.
T_TMP=$(mktemp -d "${CB_TEST_TMPDIR:-/var/tmp}/cbtest.XXXXXX")
chmod 0755 "$T_TMP"
trap 't_cleanup' EXIT
t_cleanup() { [ -n "${T_KEEP:-}" ] || rm -rf "$T_TMP"; }
# t_public PROG... : copy built programs where other users may run them
# (runuser/setpriv tests: the tree itself may be private); prints the directory.
t_public() { mkdir -p -m 0755 "$T_TMP/pub-bin" && install -m 0755 "$@" "$T_TMP/pub-bin/" &&
	echo "$T_TMP/pub-bin"; }

_t_report() { # cond title
	_t_n=$((_t_n + 1))
	if [ "$1" = 0 ]; then echo "ok $_t_n - $2"; else echo "not ok $_t_n - $2"; _t_failed=$((_t_failed + 1)); fi
}
# t_ok TITLE CMD... : CMD succeeds
t_ok() { local t=$1; shift; "$@" >"$T_TMP/out" 2>"$T_TMP/err"; local rc=$?
	_t_report $([ $rc = 0 ] && echo 0 || echo 1) "$t"
	[ $rc = 0 ] || { echo "#   exit $rc: $*"; sed 's/^/#   /' "$T_TMP/err" | head -n 10; }; }
# t_exit TITLE WANT CMD... : CMD exits with WANT
t_exit() { local t=$1 want=$2; shift 2; "$@" >"$T_TMP/out" 2>"$T_TMP/err"; local rc=$?
	_t_report $([ "$rc" = "$want" ] && echo 0 || echo 1) "$t"
	[ "$rc" = "$want" ] || { echo "#   exit $rc, want $want: $*"; sed 's/^/#   /' "$T_TMP/err" | head -n 10; }; }
# t_is TITLE GOT WANT
t_is() { _t_report $([ "$2" = "$3" ] && echo 0 || echo 1) "$1"
	[ "$2" = "$3" ] || { echo "#   got:  '$2'"; echo "#   want: '$3'"; }; }
# t_match TITLE TEXT REGEX
t_match() { if printf '%s' "$2" | grep -qE -- "$3"; then _t_report 0 "$1"; else _t_report 1 "$1"; echo "#   '$2' !~ /$3/" | head -n 10; fi; }
t_skip() { _t_n=$((_t_n + 1)); echo "ok $_t_n - $1 # SKIP $2"; }
t_done() { echo "1..$_t_n"; [ "$_t_failed" = 0 ]; }
