#!/usr/bin/env bash
# 29-net-dns-search.sh - red-team F7: the broker looks up a name with a dot
# (as every name an agent chooses under a `*.domain` token has) without the
# host's resolv.conf search list, which would turn it into NAME.<search
# domain>, a name no token covers (through the sandbox's resolver and the
# explicit net.connect alike).  Before the fix the host's resolver was asked
# "x.test.invalid.corp.invalid" for both.
#
# Runs in a mount and network namespace of its own (dns_lib.sh):
# /etc/resolv.conf is a private file naming a search domain; the host's
# resolver is a probe on 127.0.0.1:53 that records every name it is asked
# for (and answers nothing).
. "$(dirname "$0")/dns_lib.sh"
dns_need "names looked up as absolute names"
CB="$CB_BIN/capbroker"

dns_files '127.0.0.1 localhost\n10.1.2.3 a.test.invalid\n' \
	'nameserver 127.0.0.1\nsearch corp.invalid\noptions timeout:1 attempts:1 ndots:1\n'
dns_probe
getent hosts probe.nowhere.invalid >/dev/null
t_ok "control: the host's resolver applies the search list here" \
	grep -qx "probe.nowhere.invalid.corp.invalid" "$T_TMP/asked"

W='net.connect:*.test.invalid:443'
out=$("$CB" run --tier high --grant "$W" -- getent hosts a.test.invalid 2>&1)
t_match "a covered name in the host's /etc/hosts still resolves" "$out" "^10\.1\.2\.3 +a\.test\.invalid\$"
t_exit "a covered name that does not exist does not resolve inside (getent: 2)" 2 \
	"$CB" run --tier high --grant "$W" -- getent hosts leak-one.test.invalid
"$CB" run --tier high --grant "$W" -- capcall net.connect leak-two.test.invalid:443 </dev/null >/dev/null 2>&1
sleep 0.2
t_ok "... the broker asked the host's resolver for the names themselves" \
	grep -qx "leak-one.test.invalid" "$T_TMP/asked"
t_is "... and never for a search-list expansion (resolver, explicit net.connect)" \
	"$(grep -cE '^leak-(one|two)\.test\.invalid\.corp\.invalid$' "$T_TMP/asked")" 0
t_done
