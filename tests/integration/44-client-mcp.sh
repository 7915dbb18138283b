#!/usr/bin/env bash
# 44-client-mcp.sh - `capcall mcp` against hostile input: malformed JSON,
# wrong shapes and types, ids of every JSON type, oversized lines, strings
# and nesting, a flood; the server answers each with the right JSON-RPC
# error or tool error, writes nothing but protocol on stdout and exits 0 at
# EOF (mcp_hostile.py holds the checks).  Also: its options, and running
# without a broker.
. "$(dirname "$0")/../lib.sh"

CC="$CB_BIN/capcall"
CB="$CB_BIN/capbroker"
W="$T_TMP/ws"
mkdir -p "$W"
chmod 0755 "$W"
printf 'hello\n' >"$W/a.txt"
: >"$W/$(printf 'bad\377name')"

t_exit "capcall mcp --help: 0" 0 "$CC" mcp --help
t_match "... prints its usage" "$(cat "$T_TMP/out")" "^usage: capcall mcp"
t_exit "capcall mcp with an operand: 64" 64 "$CC" mcp extra
t_exit "capcall mcp --poll-ms 1 (too small): 64" 64 "$CC" mcp --poll-ms 1
t_exit "capcall mcp --poll-ms x: 64" 64 "$CC" mcp --poll-ms x

# Without a broker the server still speaks MCP, and each tool says why it
# cannot work.
printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}' \
	'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/x"}}}' |
	env -u CAPBROKER_FD "$CC" mcp >"$T_TMP/nb.out" 2>"$T_TMP/nb.err"
t_is "no broker: exit 0 at EOF" "$?" 0
t_is "no broker: two answers on stdout" "$(wc -l <"$T_TMP/nb.out")" 2
t_match "no broker: the tool call is a tool error" "$(sed -n 2p "$T_TMP/nb.out")" '"isError":true'
t_match "... saying the broker is unavailable" "$(sed -n 2p "$T_TMP/nb.out")" 'broker unavailable'
t_match "no broker: a log line on stderr" "$(cat "$T_TMP/nb.err")" "CAPBROKER_FD is not set"

W="$W" ERRLOG="$T_TMP/hostile.err" timeout 300 "$PYTHON" "$CB_TOP/tests/integration/mcp_hostile.py" \
	"$CB" run --tier medium --workspace "$W" --grant "fs.read:$W/**" --grant "fs.list:$W/**" \
	--grant proc.exec:/usr/bin/cat -- capcall mcp >"$T_TMP/h.out" 2>&1
rc=$?
while IFS= read -r line; do
	case $line in
	"T 0 "*) _t_report 0 "${line#T 0 }" ;;
	"T 1 "*) _t_report 1 "${line#T 1 }" ;;
	"# "*) echo "#   ${line#\# }" ;;
	*) echo "#   $line" ;;
	esac
done <"$T_TMP/h.out"
t_is "the hostile client ran to its end" "$rc" 0
[ "$rc" = 0 ] || tail -n 5 "$T_TMP/hostile.err" | sed 's/^/#   /'
t_done
