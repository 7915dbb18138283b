#!/usr/bin/env bash
# 03-broker-layers.sh - the layering inside broker/ (docs/architecture.md)
# holds, and the check can fail: an upward include injected into a copy of
# broker/ is caught and named.
. "$(dirname "$0")/../lib.sh"
check=(bash "$CB_TOP/scripts/broker-layers.sh")

t_ok "broker/ keeps its layers (program, channel, handlers, leaves)" "${check[@]}" "$CB_TOP"

C="$T_TMP/tree"
mkdir -p "$C"
cp -r "$CB_TOP/broker" "$C/"
t_ok "a copy of broker/ passes too" "${check[@]}" "$C"

cp "$C/broker/chan.c" "$T_TMP/chan.c"
printf '#include "broker/dispatch.h"\n' >>"$C/broker/chan.c"
t_exit "the channel including the dispatcher fails the check" 1 "${check[@]}" "$C"
t_match "... and names it" "$(cat "$T_TMP/out")" '^broker/chan.c includes broker/dispatch.h$'
cp "$T_TMP/chan.c" "$C/broker/chan.c"

printf '#include "broker/core.h"\n' >>"$C/broker/main.c"
t_exit "the program reaching into the broker's insides fails the check" 1 "${check[@]}" "$C"
t_match "... and names it" "$(cat "$T_TMP/out")" '^broker/main.c includes broker/core.h$'
cp "$CB_TOP/broker/main.c" "$C/broker/main.c"

printf '  #  include "broker/dispatch.h"\n' >>"$C/broker/ops_fs.c"
t_exit "a handler calling the dispatcher back fails the check" 1 "${check[@]}" "$C"
cp "$CB_TOP/broker/ops_fs.c" "$C/broker/ops_fs.c"

for f in approval.c notify.c; do
	printf '#include "broker/sbx.h"\n#include "broker/admin.h"\n' >>"$C/broker/$f"
	t_exit "$f calling up into the sandbox's owner or the admin socket fails the check" 1 \
		"${check[@]}" "$C"
	t_match "... and names the first" "$(cat "$T_TMP/out")" "^broker/$f includes broker/sbx.h$"
	t_match "... and the second" "$(cat "$T_TMP/out")" "^broker/$f includes broker/admin.h$"
	cp "$CB_TOP/broker/$f" "$C/broker/$f"
done
t_ok "the copy, restored, passes again" "${check[@]}" "$C"
t_done
