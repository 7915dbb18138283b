#!/usr/bin/env bash
# 66-proc-budget.sh - issue 10, near-miss: one sandbox could run 32
# proc.exec children at once, each with the low tier's full limits of its
# own.  Now the children share their parent's budget: at most 4 run at once,
# and each gets the low tier's limits or what is left of the parent tier's
# memory, processes, CPU time and /tmp, whichever is less; when too little
# is left the request is refused (busy) before a use is spent.
. "$(dirname "$0")/../lib.sh"

W="$T_TMP/ws"
mkdir -p "$W"
BIND="$CB_TOP/tests/integration:/t"
# The parent (medium) may use 700M; each child would take the low tier's 512M.
cat >"$T_TMP/p.conf" <<EOT
tiers = {
  low = { limits = { memory = "512M"; }; };
  medium = { ceiling = [ "fs.*:\${workspace}/**", "proc.exec:/usr/bin/sleep", "proc.exec:/usr/bin/cat" ];
    limits = { memory = "700M"; processes = 256; }; };
};
EOT
"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" --ro-bind "$BIND" \
	--grant "proc.exec:/usr/bin/sleep" --grant "proc.exec:/usr/bin/cat" \
	-- /usr/bin/python3 /t/mint_agent.py procs 1 >"$T_TMP/one.out" 2>&1
t_is "control: one child runs" "$(sed -n 's/^RAN //p' "$T_TMP/one.out")" 1
t_is "... and a second, while it runs, gets only what is left of the parent's 700M (188M)" \
	"$(sed -n 's/^DATA //p' "$T_TMP/one.out")" $((188 * 1024 * 1024))

"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" --ro-bind "$BIND" \
	--grant "proc.exec:/usr/bin/sleep" --grant "proc.exec:/usr/bin/cat" \
	-- /usr/bin/python3 /t/mint_agent.py procs 8 >"$T_TMP/many.out" 2>&1
ran=$(sed -n 's/^RAN //p' "$T_TMP/many.out")
t_is "of 8 children asked for at once, only what the parent's memory holds run (2)" "$ran" 2
t_match "... the others are refused as busy" "$(cat "$T_TMP/many.out")" "REFUSED busy 7"
t_done
