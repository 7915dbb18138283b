#!/usr/bin/env bash
# 136-fs-served-expiry-stall.sh - the expiry of a grant that took nothing
# away drops nothing.  When a grant is lost the broker drops every page the
# kernel caches for the sandbox's served files (~0.4 s with 1 GiB mapped,
# up to 2 s), and a capctl revoke answered meanwhile waits for it (before,
# the loop itself waited).  An agent can make its own grants expire: it
# derives children of its workspace token with a short ttl, and each
# expiry stalled the whole broker (every sandbox, capctl) for that long,
# again and again (red team; 290-490 ms per expiry measured with 1-3 GiB
# mapped, while the loop waited).  A lost grant whose paths a
# live grant of the same operation still covers (a child under its parent)
# now drops nothing; a grant really lost still drops the pages.  Judged
# with mincore (load-independent): a private mapping's pages stay in the
# page cache, or are gone.  Needs root (FUSE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "expiries that take nothing away" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
E="$T_TMP/else"
mkdir -p "$W/sub" "$E"
head -c $((8 << 20)) /dev/urandom >"$W/f"
install -m 0644 "$CB_TOP/tests/integration/expiry_agent.py" "$W/agent.py"
chown -R 4296:4296 "$W"
chmod 0755 "$T_TMP" "$E"

S="$T_TMP/st"
srv_start "$S"
agent_start x1 --tier high --workspace "$W"

agent_do x1 "python3 '$W/agent.py' '$W/f' 'fs.read:$W/sub/**' 5" 300
echo "# $AOUT"
t_match "a child of the workspace token was derived with a 2 s ttl" "$AOUT" "^ready"
t_match "... and after it expired every page is still cached (nothing dropped)" "$AOUT" \
	"resident 2048 of 2048"

# A grant no live grant covers: its expiry drops the sandbox's pages.
"$CTL" --state "$S" issue --sandbox x1 --ttl 2 --cap "fs.read:$E/**" >/dev/null
agent_do x1 "python3 '$W/agent.py' '$W/f' - 5" 300
echo "# $AOUT"
t_match "a grant really lost still drops the cached pages" "$AOUT" "resident 0 of 2048"
agent_stop x1
t_done
