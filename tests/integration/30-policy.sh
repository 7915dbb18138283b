#!/usr/bin/env bash
# 30-policy.sh - `capbroker check-policy` and `show-policy` on real files:
# the examples pass, each error class is reported with file:line, the
# effective policy printed by show-policy loads back and prints identically.
#
# NOTE: needs the lead to wire pol_cmd_check / pol_cmd_show (policy/policy.h)
# into capbroker's main as the check-policy and show-policy commands.  Until
# bin/capbroker exists, every check here is skipped (not passed).
. "$(dirname "$0")/../lib.sh"

CB="$CB_BIN/capbroker"
EX="${CB_EXAMPLES:-$CB_TOP/examples/policies}"

if [ ! -x "$CB" ]; then
	t_skip "check-policy and show-policy" "$CB not built yet"
	t_done
	exit
fi

for f in system-tools assistant untrusted; do
	t_exit "check-policy accepts examples/policies/$f.conf" 0 "$CB" check-policy "$EX/$f.conf"
done
t_match "check-policy names the tiers" "$(cat "$T_TMP/out")" "ok \(tiers: low medium high"

t_exit "check-policy without FILE is a usage error" 64 "$CB" check-policy
t_exit "check-policy with two files is a usage error" 64 "$CB" check-policy "$EX/untrusted.conf" "$EX/assistant.conf"
t_exit "check-policy on a missing file fails" 1 "$CB" check-policy "$T_TMP/nonexistent.conf"
t_match "missing file: says why" "$(cat "$T_TMP/err")" "nonexistent.conf: cannot open"

# One file with one error of each class, each on a line of its own.
cat >"$T_TMP/bad.conf" <<'POLICY'
version = 1;
defaults = {
  tier = "mediun";
  ttl = "an hour";
  colour = "blue";
};
tiers = {
  low = {
    ceiling = [
      "fs.read:/etc/passwd",
      "proc.exec:usr/bin/ls"
    ];
    limits = {
      memory = -1;
    };
  };
};
POLICY
t_exit "check-policy refuses a policy with errors" 1 "$CB" check-policy "$T_TMP/bad.conf"
errs=$(cat "$T_TMP/err")
t_match "unknown tier with file:line" "$errs" "bad.conf:3: unknown tier \"mediun\""
t_match "wrong type with file:line" "$errs" "bad.conf:4: wrong type for \"ttl\": a string \(expected"
t_match "unknown key with file:line" "$errs" "bad.conf:5: unknown key \"colour\" in defaults \(expected"
t_match "ceiling wider than the tier with file:line" "$errs" \
	"bad.conf:10: ceiling wider than tier \"low\" allows: \"fs.read:/etc/passwd\""
t_match "malformed capability with file:line" "$errs" \
	"bad.conf:11: malformed capability \"proc.exec:usr/bin/ls\": path is not absolute"
t_match "negative limit with file:line" "$errs" "bad.conf:14: negative limit \"memory\": -1"
t_match "every error counted" "$errs" "6 errors; policy refused"
t_is "nothing on stdout for an invalid policy" "$(cat "$T_TMP/out")" ""

printf 'version = 1;\ntiers = {\n  low = { limits = { cpu = ; }; };\n};\n' >"$T_TMP/syntax.conf"
t_exit "check-policy refuses a syntax error" 1 "$CB" check-policy "$T_TMP/syntax.conf"
t_match "syntax error with file:line" "$(cat "$T_TMP/err")" "syntax.conf:3: syntax error"

# show-policy: the default, saved, checks and prints identically.
t_exit "show-policy prints the built-in default" 0 "$CB" show-policy
cp "$T_TMP/out" "$T_TMP/default.conf"
t_match "default has the low tier" "$(cat "$T_TMP/default.conf")" "^  low = \{"
t_exit "the printed default passes check-policy" 0 "$CB" check-policy "$T_TMP/default.conf"
t_exit "show-policy FILE on the printed default" 0 "$CB" show-policy "$T_TMP/default.conf"
t_is "default round trip is identical" "$(cat "$T_TMP/out")" "$(cat "$T_TMP/default.conf")"

t_exit "show-policy of an example" 0 "$CB" show-policy "$EX/assistant.conf"
cp "$T_TMP/out" "$T_TMP/assistant.conf"
t_match "example: its settings are shown" "$(cat "$T_TMP/assistant.conf")" "workspace = \"/home/user/project\""
t_exit "show-policy of the shown example" 0 "$CB" show-policy "$T_TMP/assistant.conf"
t_is "example round trip is identical" "$(cat "$T_TMP/out")" "$(cat "$T_TMP/assistant.conf")"

t_exit "show-policy of an invalid file fails" 1 "$CB" show-policy "$T_TMP/bad.conf"
t_is "show-policy of an invalid file prints no policy" "$(cat "$T_TMP/out")" ""
t_exit "show-policy with two files is a usage error" 64 "$CB" show-policy a b
t_done
