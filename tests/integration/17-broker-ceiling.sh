#!/usr/bin/env bash
# 17-broker-ceiling.sh - the policy is a second check behind the token: a
# validly signed token beyond its sandbox tier's ceiling is refused at use
# time with "exceeds policy" (here: the policy narrowed after the token was
# minted, for the same sandbox id and state).
. "$(dirname "$0")/../lib.sh"
S="$T_TMP/state"; W="$T_TMP/ws"; mkdir -p "$W/secret" "$W/public"
echo classified >"$W/secret/f"; echo hello >"$W/public/f"
cat >"$T_TMP/wide.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**" ]; }; };
EOT
cat >"$T_TMP/narrow.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/public/**" ]; }; };
EOT
t_ok "both policies are valid" sh -c "'$CB_BIN/capbroker' check-policy '$T_TMP/wide.conf' && '$CB_BIN/capbroker' check-policy '$T_TMP/narrow.conf'"
# Under the wide policy the sandbox derives a token for the secret file.
tok=$("$CB_BIN/capbroker" run --state "$S" --policy "$T_TMP/wide.conf" --id agent7 --tier medium \
	--workspace "$W" --grant "fs.read:$W/**" -- capcall derive "fs.read:$W/secret/**" 2>"$T_TMP/err")
t_match "a token was derived under the wide policy" "$tok" "^cap1\."
out=$("$CB_BIN/capbroker" run --state "$S" --policy "$T_TMP/wide.conf" --id agent7 --tier medium \
	--workspace "$W" -- capcall --token "$tok" fs.read "$W/secret/f")
t_is "under the wide policy it reads the file" "$out" "classified"
# The same sandbox id and state, the ceiling narrowed: the signed token is
# still genuine, but the policy refuses it.
t_exit "under the narrow policy the same token is refused" 77 \
	"$CB_BIN/capbroker" run --state "$S" --policy "$T_TMP/narrow.conf" --id agent7 --tier medium \
	--workspace "$W" -- capcall --token "$tok" fs.read "$W/secret/f"
t_match "... with reason exceeds policy" "$(cat "$T_TMP/err")" "exceeds policy"
t_match "... and the refusal is audited as exceeds-policy" \
	"$(grep '"op":"fs.read"' "$S/audit.jsonl" | tail -1)" '"decision":"deny","reason":"exceeds-policy"'
t_exit "a grant beyond the narrow ceiling does not even start" 125 \
	"$CB_BIN/capbroker" run --state "$S" --policy "$T_TMP/narrow.conf" --tier medium \
	--workspace "$W" --grant "fs.read:$W/secret/**" -- /bin/true
t_match "... naming the grant and exceeds policy" "$(cat "$T_TMP/err")" "secret/\*\*.*exceeds policy"
out=$("$CB_BIN/capbroker" run --state "$S" --policy "$T_TMP/narrow.conf" --id agent8 --tier medium \
	--workspace "$W" --grant "fs.read:$W/public/**" -- capcall fs.read "$W/public/f")
t_is "while a grant inside the ceiling works" "$out" "hello"
t_done
