#!/usr/bin/env bash
# 02-module-cycles.sh - no module includes a module that includes it back
# (scripts/module-cycles.py derives the graph from the #include lines), and
# the check can fail: cycles injected into copies of the tree are caught.
. "$(dirname "$0")/../lib.sh"
check=("$PYTHON" "$CB_TOP/scripts/module-cycles.py")

t_ok "the modules of the tree form no include cycle" "${check[@]}" "$CB_TOP"

# Self-test on a tree of three modules: a -> b -> c is fine, c -> a is not.
M="$T_TMP/mini"
mkdir -p "$M/a" "$M/b" "$M/c"
for m in a b c; do : >"$M/$m/module.mk"; done
printf '#include "b/b.h"\n' >"$M/a/a.c"
printf '#include "c/c.h"\n#include "common/x.h"\n' >"$M/b/b.h"
printf 'int c;\n' >"$M/c/c.c"
t_ok "a chain of modules passes" "${check[@]}" "$M"
printf '#include <stdio.h>\n  #  include "a/a.h"\n' >"$M/c/c.h"
t_exit "an injected cycle fails the check" 1 "${check[@]}" "$M"
t_match "the cycle is named" "$(cat "$T_TMP/out")" '^include cycle: a -> b -> c -> a$'

# The real tree with one upward include added: wire/ including broker/.
C="$T_TMP/tree"
mkdir -p "$C"
tar -C "$CB_TOP" --exclude=./build --exclude=./build-san --exclude=./build-fuzz \
	--exclude=./bin --exclude=./.git -cf - . | tar -C "$C" -xf -
printf '#include "broker/broker.h"\n' >>"$C/wire/codec.c"
t_exit "wire/ including broker/ fails the check" 1 "${check[@]}" "$C"
t_match "and names wire and broker in the cycle" "$(cat "$T_TMP/out")" 'include cycle: .*broker.*wire|include cycle: .*wire.*broker'
t_done
