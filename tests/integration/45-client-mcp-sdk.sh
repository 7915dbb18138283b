#!/usr/bin/env bash
# 45-client-mcp-sdk.sh - `capcall mcp` with a real MCP client: the official
# TypeScript SDK (@modelcontextprotocol/sdk from the npm registry, run with
# node), installed here into build/mcp-sdk (kept, so reruns are fast).  The
# client starts `capbroker run --connect ... -- capcall mcp` over stdio,
# lists the tools, calls each one allowed and denied, gets a
# request_capability approved with `capctl approve` and sees
# notifications/tools/list_changed after it and after a `capctl revoke`.
# The checks themselves are in mcp_sdk_client.mjs.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

SDK="${CB_BUILD:-$CB_TOP/build}/mcp-sdk"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	t_skip "MCP TypeScript SDK client" "node and npm are not installed (apt-get install nodejs npm)"
	t_done
	exit
fi
if [ ! -f "$SDK/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
	mkdir -p "$SDK"
	if ! timeout 300 npm install --prefix "$SDK" --no-audit --no-fund --loglevel=error \
		@modelcontextprotocol/sdk >"$T_TMP/npm.log" 2>&1; then
		t_skip "MCP TypeScript SDK client" "npm could not install @modelcontextprotocol/sdk: $(tail -n 1 "$T_TMP/npm.log")"
		t_done
		exit
	fi
fi

W="$T_TMP/ws"
S="$T_TMP/st"
mkdir -p "$W/out"
chmod 0755 "$W"
printf 'hello\n' >"$W/a.txt"
printf '\x00\xff\x01' >"$W/bin"
cat >"$T_TMP/policy.conf" <<EOP
tiers = {
  medium = {
    ceiling = [ "fs.*:\${workspace}/**", "net.connect:127.0.0.1:*", "proc.exec:/usr/bin/cat",
      "proc.exec:/usr/bin/wc" ];
  };
};
EOP
read -r P1 P2 < <("$PYTHON" -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')

srv_start "$S" --policy "$T_TMP/policy.conf"
SDK="$SDK" CB="$CB" CTL="$CTL" STATE="$S" SOCK="$S/admin.sock" W="$W" PORT_OK="$P1" PORT_NO="$P2" \
	timeout 120 node "$CB_TOP/tests/integration/mcp_sdk_client.mjs" >"$T_TMP/node.out" 2>"$T_TMP/node.err"
rc=$?
while IFS= read -r line; do
	case $line in
	"T 0 "*) _t_report 0 "${line#T 0 }" ;;
	"T 1 "*) _t_report 1 "${line#T 1 }" ;;
	"# "*) echo "#   ${line#\# }" ;;
	esac
done <"$T_TMP/node.out"
t_is "the SDK client ran to its end (exit 0)" "$rc" 0
[ "$rc" = 0 ] || sed 's/^/#   /' "$T_TMP/node.err" | tail -n 20
srv_stop
t_done
