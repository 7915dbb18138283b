#!/bin/sh
# scripts/deps.sh WHAT - make sure the Debian packages that WHAT needs are
# installed.  As root, installs what is missing with apt-get; otherwise stops
# with the exact apt-get line to run.  WHAT: build | check | fuzz | bench |
# power-cut.
# `scripts/deps.sh --list WHAT` only prints the packages, one a line (.ci/run
# uses it to remove the -dev packages before proving a fresh machine).
set -eu
list=""
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
build="gcc make pkg-config libsodium-dev libseccomp-dev libmsgpack-dev libevent-dev libsqlite3-dev libconfig-dev libjansson-dev libldns-dev libsystemd-dev libpq-dev python3 python3-msgpack procps util-linux bsdutils mount"
case "${1:-build}" in
build|demo) want="$build" ;;
check) want="$build python3-venv python3-setuptools python3-wheel python3-pytest postgresql libfuse3-dev curl cmake ninja-build zstd zip unzip sqlite3 jq bc file less ncurses-bin hostname perl" ;;
fuzz)  want="$build clang libclang-rt-14-dev" ;;
bench) want="$build bubblewrap git postgresql libfuse3-dev" ;;
power-cut) want="$build strace" ;;
*) echo "deps.sh: unknown set '$1'" >&2; exit 2 ;;
esac
if [ -n "$list" ]; then
	printf '%s\n' $want
	exit 0
fi
missing=""
for p in $want; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
	echo "deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >/dev/null || true
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
	exit 0
fi
echo "capbroker needs these Debian packages; run:" >&2
echo "  sudo apt-get install -y$missing" >&2
exit 1
