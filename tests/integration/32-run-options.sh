#!/usr/bin/env bash
# 32-run-options.sh - the conventions of `capbroker run` a team expects:
# usage errors exit 64 (EX_USAGE) whatever option is wrong, set-up
# failures 125 with one line saying why, 124 with one line on --timeout,
# 130 on Ctrl-C (SIGINT); --chdir, --setenv, --unsetenv as in bubblewrap;
# --version and a --help that describes every option, in every program.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"
W="$T_TMP/ws"; mkdir -p "$W"

# -- usage errors: 64 ------------------------------------------------------------
t_exit "--tier nosuch is a usage error (64)" 64 "$CB" run --tier nosuch -- true
t_match "... naming the tier" "$(cat "$T_TMP/err")" "unknown tier 'nosuch'"
t_exit "--id 'bad id' is a usage error (64)" 64 "$CB" run --id 'bad id' -- true
t_exit "--ttl abc is a usage error (64)" 64 "$CB" run --ttl abc -- true
t_exit "a malformed --grant is a usage error (64)" 64 "$CB" run --grant 'fs.read:relative' -- true
t_exit "a missing --workspace is a usage error (64)" 64 "$CB" run --workspace "$T_TMP/nowhere" -- true
t_exit "--setenv with a bad name is a usage error (64)" 64 "$CB" run --setenv 'A=B' x -- true
t_exit "--setenv without a value is a usage error (64)" 64 "$CB" run --setenv A
t_exit "--unsetenv with a bad name is a usage error (64)" 64 "$CB" run --unsetenv '1X' -- true
t_exit "--chdir with a relative path is a usage error (64)" 64 "$CB" run --chdir tmp -- true
t_exit "no command is a usage error (64)" 64 "$CB" run --tier low
t_exit "an unknown option is a usage error (64)" 64 "$CB" run --frobnicate -- true
t_exit "--approve tty with no terminal is refused at start (64)" 64 \
	setsid -w "$CB" run --approve tty -- true </dev/null
t_match "... saying what to use instead" "$(cat "$T_TMP/err")" "needs a controlling terminal.*--approve admin"

# -- set-up failures: 125, one line ----------------------------------------------------
t_exit "a grant beyond the ceiling is a set-up failure (125)" 125 \
	"$CB" run --tier medium --workspace "$W" --grant 'net.connect:example.com:443' -- true
t_match "... saying what the ceiling allows" "$(cat "$T_TMP/err")" \
	"exceeds the ceiling of tier 'medium' \(exceeds policy; a policy file's ceiling_add widens the tier, or the agent may ask at run time: capcall request\); the tier allows: fs.read:$W/\*\*, "
t_is "... on one line" "$(wc -l <"$T_TMP/err")" 1
t_exit "a missing sandbox helper is a set-up failure (125)" 125 \
	env CAPBROKER_STUB="$T_TMP/no/capbroker-stub" "$CB" run -- true
t_match "... naming the path it looked for" "$(cat "$T_TMP/err")" "helper capbroker-stub was not found \(looked for $T_TMP/no/capbroker-stub"
t_exit "check-policy's usage error is 64 too" 64 "$CB" check-policy

# -- timeout and interrupt --------------------------------------------------------------
t_exit "--timeout stops the agent: 124" 124 "$CB" run --timeout 1 -- python3 -c 'import time; time.sleep(20)'
t_match "... and says so in one line" "$(cat "$T_TMP/err")" "^capbroker: the agent was stopped: it ran for its time limit of 1 s"
t_is "... only that line" "$(wc -l <"$T_TMP/err")" 1
"$CB" run -- python3 -c 'import time; print("up", flush=True); time.sleep(20)' >"$T_TMP/int.out" 2>&1 &
pid=$!
wait_for 100 grep -q up "$T_TMP/int.out"
kill -INT "$pid"
wait "$pid"
t_is "Ctrl-C (SIGINT) on run exits 130" "$?" 130

# -- --chdir, --setenv, --unsetenv -------------------------------------------------------------
out=$("$CB" run --chdir /usr/share --setenv GREETING 'hello  world' --unsetenv LANG \
	--unsetenv TMPDIR --setenv TMPDIR /var/x -- /bin/sh -c 'pwd; echo "$GREETING|${LANG-unset}|$TMPDIR"')
t_is "--chdir, --setenv (value kept as one argument), --unsetenv" "$out" "/usr/share
hello  world|unset|/var/x"
out=$("$CB" run --setenv PATH /usr/bin -- /usr/bin/sh -c 'echo "$PATH"')
t_is "--setenv replaces a variable the sandbox sets" "$out" "/usr/bin"
t_exit "--chdir to a directory missing inside is a set-up failure (125)" 125 "$CB" run --chdir /no/such -- true
t_match "... naming it" "$(cat "$T_TMP/err")" "chdir /no/such"
out=$("$CB" run --tier medium --workspace "$W" --setenv CAPBROKER_FD 9 -- /bin/sh -c 'echo "$CAPBROKER_FD"; capcall ping >/dev/null 2>&1; echo "rc=$?"')
t_is "--setenv changes what the agent is told, never what it holds" "$out" "9
rc=69"
srv_start "$T_TMP/srv"
out=$("$CB" run --connect "$T_TMP/srv/admin.sock" --chdir /usr --setenv X 'a b' --unsetenv LANG \
	-- /bin/sh -c 'echo "$PWD|$X|${LANG-unset}"')
t_is "the options travel with run --connect" "$out" "/usr|a b|unset"
t_exit "run --connect: a bad --tier is a usage error there too (64)" 64 \
	"$CB" run --connect "$T_TMP/srv/admin.sock" --tier nosuch -- true
srv_stop

# -- messages said once -----------------------------------------------------------------
"$CB" run --tier high --grant 'net.connect:127.0.0.1:1' -- \
	/bin/sh -c 'capcall net.connect 127.0.0.1:1 </dev/null' >/dev/null 2>"$T_TMP/err"
t_match "a refused connection is reported" "$(cat "$T_TMP/err")" "connection refused"
t_is "... once" "$(grep -oi 'connection refused' "$T_TMP/err" | wc -l)" 1

# -- --version and --help everywhere --------------------------------------------------------
for p in capbroker capcall capctl capbroker-stub; do
	t_exit "$p --version" 0 "$CB_BIN/$p" --version
	t_match "... prints its name and version" "$(cat "$T_TMP/out")" "^$p [0-9]"
done
for p in capbroker capcall capctl capbroker-stub; do
	t_exit "$p --no-such-option: a usage error (64)" 64 "$CB_BIN/$p" --no-such-option
	t_match "... said on stderr" "$(cat "$T_TMP/err")" "."
done
"$CB" --help >"$T_TMP/help" 2>&1
for o in connect state policy tier workspace grant ttl timeout ro-bind id approve chdir setenv unsetenv new-audit-log; do
	t_ok "capbroker --help describes --$o" grep -qE "^ +--$o " "$T_TMP/help"
done
"$CB_BIN/capcall" --help >"$T_TMP/help" 2>&1
for o in token json append mode timeout ttl reason uses aud version; do
	t_ok "capcall --help describes --$o" grep -qE "^ +--$o " "$T_TMP/help"
done
"$CTL" --help >"$T_TMP/help" 2>&1
for o in socket state json sandbox cap ttl uses session reason since decision op follow out; do
	t_ok "capctl --help describes --$o" grep -qE "^ +--$o " "$T_TMP/help"
done
t_done
