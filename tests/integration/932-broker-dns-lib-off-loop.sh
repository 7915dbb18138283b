#!/usr/bin/env bash
# 932-broker-dns-lib-off-loop.sh - review finding: libldns (with libssl and
# libcrypto) was loaded by dlopen on the broker's loop thread at a
# sandbox's first connect to its resolver: about 2 ms once on an idle host,
# and for that long (longer on a loaded one) no other sandbox was served.
# Now it is loaded on a worker thread as soon as a sandbox that can reach
# the resolver (medium or high tier) is spawned, and a connection that
# comes before the load ends waits for it on a worker, unread (broker/dns.c,
# brk_dns_preload).  A broker that serves only low-tier sandboxes never
# loads it (their start does not pay for it).
#
# fault_shim.c (CB_FAULT_CALL=dlopen), preloaded into the broker, records
# which thread loads libldns and makes the load take 3 s more.  Before the
# fix: the main (loop) thread loaded it, at the first lookup, and the admin
# socket went unanswered meanwhile.
. "$(dirname "$0")/dns_lib.sh"
dns_need "the resolver's library is loaded off the loop"
. "$(dirname "$0")/admin_lib.sh"

dns_files '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n' \
	'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n'
dns_probe
shim_build fault_shim
W='net.connect:*.test.invalid:443'
mapped() { grep -q 'libldns' "/proc/$1/maps"; }

# 1. When it is loaded.
srv_start "$T_TMP/s0"
agent_start l1 --tier low
t_ok "control: a broker serving a low-tier sandbox only has not loaded libldns" \
	bash -c '! grep -q libldns "/proc/$1/maps"' - "$SRV"
agent_start h1 --tier high --grant "$W"
t_ok "once a sandbox that can reach the resolver is spawned, libldns is loaded (no lookup yet)" \
	wait_for 50 mapped "$SRV"
agent_do h1 "getent hosts a.test.invalid"
t_match "its lookups are answered" "$ARC $AOUT" "^0 10\.1\.2\.3 +a\.test\.invalid"
agent_stop l1
agent_stop h1
srv_stop

# 2. A slow load: the loop serves meanwhile, and a lookup waits for it.
ARM="$T_TMP/arm"
touch "$ARM"
CB_FAULT_CALL=dlopen CB_FAULT_ARM=$ARM CB_FAULT_MATCH=libldns CB_FAULT_SLOW_MS=3000 \
	LD_PRELOAD=$SHIM srv_start "$T_TMP/s1"
agent_start a1 --tier high --grant "$W"
agent_send a1 "getent hosts a.test.invalid"
SEQ1=$ASEQ
t_ok "the load has begun" wait_for 100 test ! -e "$ARM"
t_is "libldns is loaded on a thread other than the loop's" "$(cat "$ARM.pid")" other
t_ok "the broker answers its admin socket meanwhile" timeout 2 "$CTL" --state "$T_TMP/s1" status
agent_wait a1 "$SEQ1" 100
t_match "the lookup made during the load is answered once it ends" "$ARC $AOUT" \
	"^0 10\.1\.2\.3 +a\.test\.invalid"
agent_do a1 "getent hosts a.test.invalid"
t_match "... and the next one at once" "$ARC $AOUT" "^0 10\.1\.2\.3 +a\.test\.invalid"
agent_stop a1
t_done
