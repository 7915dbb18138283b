#!/usr/bin/env bash
# scripts/fresh-root.sh [CMD...] - run CMD (default: `bash .ci/run` with
# CI=true, as CI does) in a throw-away copy of this machine, so that .ci/run
# can remove packages without touching the real system.
#
# As root: a private mount namespace gets an overlay whose lower layer is this
# machine's root file system and whose upper layer is a tmpfs; /proc, /sys and
# /dev are mounted into it, it becomes the root (pivot_root, not chroot: a
# chrooted process may not create the user namespaces a sandbox needs), and a
# clean clone of the committed HEAD runs there.  Every change (packages
# removed and installed, the build, the tests) lands in the tmpfs and is gone
# when CMD ends.  The network is the machine's own (apt-get needs it).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
	echo "fresh-root.sh: needs root (mount namespace, overlay, pivot_root)" >&2
	exit 1
fi
[ $# -gt 0 ] || set -- env CI=true bash .ci/run
base=$(mktemp -d /tmp/capbroker-fresh-root.XXXXXX)
trap 'rmdir "$base" 2>/dev/null || true' EXIT
unshare --mount --propagation private --fork bash -s "$top" "$base" "$@" <<'EOS'
set -euo pipefail
top=$1 base=$2
shift 2
mount -t tmpfs -o size=8g,mode=0755 fresh "$base"
mkdir "$base/upper" "$base/work" "$base/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" "$base/root"
r=$base/root
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount -t tmpfs -o mode=1777 tmp "$r/tmp"
mount -t tmpfs -o mode=0755 run "$r/run"
mkdir -p "$r/src" "$r/oldroot"
git -c safe.directory='*' clone -q "$top" "$r/src/capbroker"
# The machine's own TLS trust and proxy settings pass through, as a CI
# machine's environment carries them: without NODE_EXTRA_CA_CERTS, npm on a
# network that re-signs TLS with a local CA retries until the MCP SDK test's
# time limit and the test skips (seen: SELF_SIGNED_CERT_IN_CHAIN).
keep=()
while IFS= read -r v; do keep+=("$v"); done < <(env | grep -E '^(NODE_EXTRA_CA_CERTS|SSL_CERT_(FILE|DIR)|CURL_CA_BUNDLE|REQUESTS_CA_BUNDLE|PIP_CERT|GIT_SSL_CAINFO|[A-Za-z_]*_proxy|[A-Z_]*_PROXY)=' || true)
cd "$r"
pivot_root . oldroot
umount -l /oldroot
cd /src/capbroker
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	LANG=C.UTF-8 TERM=dumb "${keep[@]}" "$@"
EOS
