#!/usr/bin/env bash
# 01-build-fresh.sh - the build on a fresh machine: the packages' flags are
# computed after `deps` has installed them (not when make reads the
# Makefile), and a plain `make` builds the programs into bin/.  A copy of the
# tree stands in for a fresh clone; a stand-in scripts/deps.sh "installs"
# the packages by making a stand-in pkg-config answer, so nothing is really
# installed and nothing is built (make -n).
. "$(dirname "$0")/../lib.sh"
C="$T_TMP/clone"
mkdir -p "$C" "$T_TMP/fakebin"
tar -C "$CB_TOP" --exclude=./build --exclude=./build-san --exclude=./build-fuzz \
	--exclude=./bin --exclude=./.git -cf - . | tar -C "$C" -xf -
# pkg-config knows the packages only once deps.sh has run.
cat >"$T_TMP/fakebin/pkg-config" <<EOT
#!/bin/sh
[ -e "$T_TMP/installed" ] || exit 1
case "\$*" in
*--cflags*) echo "-I/fresh/include" ;;
*libsystemd*) echo "-lfreshsystemd" ;;
*) echo "-lfreshsodium -lfreshmsgpack" ;;
esac
EOT
printf '#!/bin/sh\necho "deps: installing" >&2\n: >"%s/installed"\n' "$T_TMP" >"$C/scripts/deps.sh"
chmod +x "$T_TMP/fakebin/pkg-config" "$C/scripts/deps.sh"
# A plain make, whatever make (check-asan) runs this test under: make exports
# a command-line variable such as SANITIZE to its recipes, MAKEFLAGS aside.
out=$(cd "$C" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SANITIZE PATH="$T_TMP/fakebin:$PATH" make -n 2>&1); rc=$?
t_is "make -n in a fresh tree succeeds" "$rc" 0
t_ok "deps ran before the flags were computed" test -e "$T_TMP/installed"
t_match "the link uses the flags of the packages deps installed" \
	"$(printf '%s\n' "$out" | grep -- '-o bin/capbroker ')" "-lfreshsodium -lfreshmsgpack"
# libsystemd is loaded by serve when it needs it (docs/service.md), not linked.
t_is "... but not libsystemd's" "$(printf '%s\n' "$out" | grep -- '-o bin/capbroker ' | grep -c -- -lfreshsystemd)" 0
t_match "a plain make builds the programs into bin/ (all is the default goal)" \
	"$(printf '%s\n' "$out" | grep -c -- '-o bin/\(capbroker\|capcall\|capctl\|capbroker-stub\) ')" '^4$'
t_ok "make clean needs no packages (and does not run deps)" \
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SANITIZE sh -c "cd '$C' && rm -f '$T_TMP/installed' build/config.mk && PATH='$T_TMP/fakebin:$PATH' make clean >/dev/null && test ! -e '$T_TMP/installed'"
t_done
