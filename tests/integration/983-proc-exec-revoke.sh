#!/usr/bin/env bash
# 983-proc-exec-revoke.sh - red team, fourth pass (2026-12-02): a proc.exec
# child is shown the roots of its parent's fs.read grants as read-only
# binds (docs/sandbox.md).  A grant revoked (or expired) while such a child
# runs must end what the child sees of it, as it does for the parent's
# served tree.  Before the fix the child kept the bind to its end (the low
# tier's wall clock, 600 s by default): files written after the revocation
# were read and handed back to the agent in the child's output.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W"
chmod 0755 "$W"
echo before >"$W/secret"
cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "proc.exec:/usr/bin/dash" ]; }; };
EOT
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start a1 --tier medium --workspace "$W" --grant proc.exec:/usr/bin/dash
# The child (no fork in the low tier: builtins only) reads the file once,
# waits for $W/go, then reads it again.
agent_send a1 "capcall proc.exec -- /usr/bin/dash -c 'read a <$W/secret; echo first=\$a; \
while ! [ -e $W/go ]; do :; done; read b <$W/secret; echo second=\$b'"
N=$ASEQ
t_ok "the child runs and sees the workspace" wait_for 100 at_least 1 "$S/audit.jsonl" '"op":"proc.exec","resource":"/usr/bin/dash".*"decision":"allow"'
sleep 0.5
TID=$("$CTL" --state "$S" --json list --sandbox a1 |
	jget '[t["id"] for t in d if ("fs.read:" + sys.argv[2] + "/**") in t["caps"]][0]' "$W")
t_match "the workspace's fs.read token" "$TID" '^[0-9a-f]+$'
t_exit "capctl revoke of it: 0" 0 "$CTL" --state "$S" revoke "$TID"
echo after >"$W/secret.new" && mv "$W/secret.new" "$W/secret"
touch "$W/go"
agent_wait a1 "$N" 300
t_ok "the child ended" test "$ARC" != timeout
echo "# child: $(echo "$AOUT" | tr '\n' ' ')"
t_match "... it had read the file while the grant held" "$AOUT" 'first=before'
t_ok "... and read nothing written after the revocation" sh -c "! printf '%s' \"\$1\" | grep -q 'second=after'" sh "$AOUT"
t_ok "... its end is audited" grep -q '"op":"proc.exec.killed","resource":"/usr/bin/dash".*"detail":"a grant it was shown was revoked or expired"' "$S/audit.jsonl"
agent_do a1 "capcall proc.exec -- /usr/bin/dash -c 'echo ok'"
t_is "a child that needs no lost grant still runs" "$ARC $(echo "$AOUT" | head -1)" "0 ok"

# The same for a grant that expires: a 4 s token for a subtree.
mkdir -p "$W/sub" && echo before >"$W/sub/f" && rm -f "$W/go"
t_ok "a 4 s fs.read token for a subtree" "$CTL" --state "$S" issue --sandbox a1 --cap "fs.read:$W/sub/**" --ttl 4
agent_send a1 "capcall proc.exec -- /usr/bin/dash -c 'read a <$W/sub/f; echo first=\$a; \
while ! [ -e $W/sub/go ]; do :; done; read b <$W/sub/f; echo second=\$b'"
N=$ASEQ
sleep 6
echo after >"$W/sub/f.new" && mv "$W/sub/f.new" "$W/sub/f"
touch "$W/sub/go"
agent_wait a1 "$N" 300
echo "# child: $(echo "$AOUT" | tr '\n' ' ')"
t_match "the child read the subtree while its token was valid" "$AOUT" 'first=before'
t_ok "... and nothing after it expired" sh -c "! printf '%s' \"\$1\" | grep -q 'second=after'" sh "$AOUT"
t_done
