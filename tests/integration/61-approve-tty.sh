#!/usr/bin/env bash
# 61-approve-tty.sh - `capbroker run --approve tty` asks the person at the
# launching terminal (driven here through a pseudo-terminal by Python's pty
# module): y approves, n denies, a number approves for that many seconds,
# s approves for the rest of the session; the agent never gets that
# terminal, cannot paint on it, and with no terminal at all `--approve tty`
# is refused at start.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

W="$T_TMP/ws"
mkdir -p "$W"
HOST=$(cat /etc/hostname)
# tty_run STATE ANSWERS AGENT-SCRIPT: capbroker run --approve tty with the
# pty as its controlling terminal (where the prompt goes) and stdin from
# /dev/null, so the stdin relay does not compete for the answer (see
# docs/approval.md).
tty_run() {
	pty_drive "$2" /bin/sh -c 'exec "$@" </dev/null' sh \
		"$CB" run --state "$1" --approve tty --tier medium \
		--workspace "$W" --id tty1 -- /bin/sh -c "$3" >"$T_TMP/tty.out" 2>&1
	TOUT=$(tr -d '\r' <"$T_TMP/tty.out")
	TEXIT=$(sed -n 's/^EXIT //p' "$T_TMP/tty.out" | tail -n 1)
}
REQ="capcall request fs.read:/etc/hostname --ttl 5"

# -- y -----------------------------------------------------------------------------
tty_run "$T_TMP/s1" y "$REQ --reason 'tty test' && capcall fs.read /etc/hostname"
t_is "answering y at the terminal approves: the agent exits 0" "$TEXIT" 0
t_match "... the prompt names the sandbox and its command" "$TOUT" "capbroker: sandbox tty1 \(/bin/sh -c capcall request"
t_match "... the capability" "$TOUT" "asks for"$'\n'"    fs.read:/etc/hostname"
t_match "... the ttl and the reason" "$TOUT" "for 5 s because: tty test"
t_match "... and the agent read the file" "$TOUT" "$HOST"
t_ok "the approval is audited as the terminal's" \
	grep -q '"sandbox":"tty1","op":"approve","resource":"fs.read:/etc/hostname",.*"actor":"tty","detail":"ttl 5s, scope once"' "$T_TMP/s1/audit.jsonl"

# -- n -----------------------------------------------------------------------------
tty_run "$T_TMP/s2" n "$REQ --reason 'say no'; echo request-exit=\$?"
t_match "answering n denies: capcall exits 77" "$TOUT" "request-exit=77"
t_match "... the agent told why" "$TOUT" "denied by tty: refused at the terminal"
t_ok "the denial is audited as the terminal's" \
	grep -q '"sandbox":"tty1","op":"deny","resource":"fs.read:/etc/hostname","decision":"deny","reason":"denied","actor":"tty"' "$T_TMP/s2/audit.jsonl"

# -- a number: shorter ttl; then it expires ---------------------------------------------
tty_run "$T_TMP/s3" 2 "capcall request fs.list:/etc --ttl 60 --reason shorter && capcall fs.list /etc >/dev/null && echo first-ok; \
	i=0; while [ \$i -lt 3000 ] && capcall fs.list /etc >/dev/null 2>&1; do i=\$((i+1)); done; capcall fs.list /etc; echo later-exit=\$?"
t_match "answering 2 approves" "$TOUT" "first-ok"
t_ok "... for 2 s" grep -q '"op":"approve","resource":"fs.list:/etc",.*"actor":"tty","detail":"ttl 2s, scope once"' "$T_TMP/s3/audit.jsonl"
t_match "... after which it is denied (77)" "$TOUT" "later-exit=77"
t_match "... as expired" "$TOUT" "expired"

# -- s: the rest of the session ---------------------------------------------------------------
tty_run "$T_TMP/s4" s "$REQ --reason once && $REQ --reason twice && echo both-granted"
t_match "answering s approves for the session" "$TOUT" "both-granted"
t_is "... the second request did not ask again" "$(grep -c 'Approve?' <<<"$TOUT")" 1
t_ok "... the session scope is audited" grep -q '"actor":"tty","detail":"ttl 5s, scope session"' "$T_TMP/s4/audit.jsonl"

# -- the agent and the terminal -----------------------------------------------------------------
# (the markers are spelt in two halves: the prompt shows the command line)
tty_run "$T_TMP/s5" n "if [ -t 0 ] || [ -t 1 ] || [ -t 2 ]; then echo AGENT-HAS-\"\"TTY; fi; (: </dev/tty) 2>/dev/null && echo AGENT-OPENED-\"\"TTY; \
	capcall request fs.read:/etc/hostname --ttl 5 --reason \"\$(printf 'x\\033[2J\\033[Hyou may approve safely\\r')\"; echo done"
t_match "the agent ran to its end" "$TOUT" "done"
t_ok "the agent's stdio is not the terminal" sh -c "! grep -q AGENT-HAS-TTY '$T_TMP/tty.out'"
t_ok "the agent cannot open /dev/tty" sh -c "! grep -q AGENT-OPENED-TTY '$T_TMP/tty.out'"
t_ok "the agent's reason reached the prompt, its controls shown as escapes" \
	grep -qF 'because: x\x1b[2J\x1b[Hyou may approve safely\x0d' "$T_TMP/tty.out"
t_ok "... with its escape sequences defused" sh -c "! grep -q \"\$(printf '\\033')\" '$T_TMP/tty.out'"

# -- no terminal at all: refused at start (issue 12), nothing waits for no one ------------------------
t_exit "--approve tty without a terminal is refused at start (64)" 64 \
	setsid -w "$CB" run --approve tty --tier medium --workspace "$W" -- \
	capcall request fs.read:/etc/hostname --ttl 5 --reason "no one there" </dev/null
t_match "... before any sandbox starts" "$(cat "$T_TMP/err")" "needs a controlling terminal"
t_done
