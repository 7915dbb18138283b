#!/usr/bin/env bash
# 65-duration-bounds.sh - issue 10, near-miss: durations and ttls of 2^63-1
# were accepted.  Every ttl and duration has one documented maximum,
# CB_DURATION_MAX = 31622400 s (366 days): above it a program exits 64
# (usage) saying so, the broker answers an agent `invalid`, and a policy
# does not load.  The maximum itself is accepted.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
mkdir -p "$W"
echo data >"$W/f"
BIG=9223372036854775807
BIND="$CB_TOP/tests/integration:/t"

t_exit "capbroker run --ttl 2^63-1: usage (64)" 64 "$CB" run --ttl $BIG --tier low -- /bin/true
t_match "... naming the maximum" "$(cat "$T_TMP/err")" "at most 31622400"
t_exit "capbroker run --timeout 2^63-1: usage (64)" 64 "$CB" run --timeout $BIG --tier low -- /bin/true
t_exit "capbroker run --ttl 31622401: usage (64)" 64 "$CB" run --ttl 31622401 --tier low -- /bin/true
t_exit "capbroker run --ttl 31622400 (the maximum) runs" 0 "$CB" run --ttl 31622400 --timeout 31622400 \
	--tier low -- /bin/true

for kv in "defaults = { ttl = ${BIG}L; };" "defaults = { request_expiry = 31622401; };" \
	"tiers = { low = { limits = { wall = ${BIG}L; }; }; };" \
	"tiers = { low = { limits = { cpu = 31622401; }; }; };" \
	"tiers = { low = { requestable = ( { caps = [ \"fs.read:/**\" ]; max_ttl = ${BIG}L; } ); }; };"; do
	printf '%s\n' "$kv" >"$T_TMP/p.conf"
	t_exit "a policy with $kv does not load" 1 "$CB" check-policy "$T_TMP/p.conf"
	t_match "... out of range, at most 31622400" "$(cat "$T_TMP/err")" "at most 31622400"
done
printf 'defaults = { ttl = 31622400; request_expiry = 31622400; };\n' >"$T_TMP/p.conf"
t_ok "the maximum itself loads" "$CB" check-policy "$T_TMP/p.conf"

S="$T_TMP/st"
srv_start "$S"
agent_start a1 --tier medium --workspace "$W"
t_exit "capctl issue --ttl 2^63-1: usage (64)" 64 "$CTL" --state "$S" issue --sandbox a1 --cap "fs.read:$W/**" --ttl $BIG
t_ok "... and no token was minted" sh -c "! grep -q cap1 '$T_TMP/out'"
t_exit "capctl approve --ttl 2^63-1: usage (64)" 64 "$CTL" --state "$S" approve 1 --ttl $BIG
agent_do a1 "capcall derive --ttl $BIG fs.read:$W/f"
t_is "capcall derive --ttl 2^63-1: usage (64)" "$ARC" 64
agent_do a1 "capcall request fs.read:/etc/hostname --ttl $BIG --reason forever"
t_is "capcall request --ttl 2^63-1: usage (64)" "$ARC" 64

# the wire: an agent that does not go through capcall
"$CB" run --state "$T_TMP/st2" --tier medium --workspace "$W" --ro-bind "$BIND" --grant "fs.read:$W/**" \
	-- /usr/bin/python3 /t/mint_agent.py ttl-edge "fs.read:$W/f" >"$T_TMP/w.out" 2>&1
for ttl in $BIG 31622401; do
	t_is "a derive with ttl $ttl on the wire is invalid" "$(sed -n "s/^DERIVE $ttl //p" "$T_TMP/w.out")" invalid
	t_is "a request with ttl $ttl on the wire is invalid" "$(sed -n "s/^REQUEST $ttl //p" "$T_TMP/w.out")" invalid
done
t_done
