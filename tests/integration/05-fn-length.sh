#!/usr/bin/env bash
# 05-fn-length.sh - no function in product code is longer than 100 lines
# (issue 13; scripts/fn-length.py says how a function is found).  Parallel
# work grew five functions past the bound within a day, so the suite
# refuses it.
. "$(dirname "$0")/../lib.sh"

out=$(cd "$CB_TOP" && python3 scripts/fn-length.py 2>&1)
t_is "no product function is over 100 lines" "$out" ""

# The check can fail: a module of one file with a 101-line function (the lines
# after its name's, to its closing brace).
C="$T_TMP/tree"
mkdir -p "$C/mod"
: >"$C/mod/module.mk"
{
	printf 'static int\nlong_one(void)\n{\n'
	for i in $(seq 1 98); do printf '\t(void)%d;\n' "$i"; done
	printf '\treturn 0;\n}\n'
} >"$C/mod/a.c"
out=$(python3 "$CB_TOP/scripts/fn-length.py" "$C"; echo "rc=$?")
t_is "a 101-line function is caught" "$out" "101 mod/a.c long_one
rc=1"
# ... and one line less is not.
sed -i '0,/(void)1;/{/(void)1;/d}' "$C/mod/a.c"
out=$(python3 "$CB_TOP/scripts/fn-length.py" "$C"; echo "rc=$?")
t_is "a 100-line function passes" "$out" "rc=0"
t_done
