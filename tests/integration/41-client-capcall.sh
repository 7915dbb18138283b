#!/usr/bin/env bash
# 41-client-capcall.sh - capcall against a fake broker (tests/integration/
# fakebroker.py): every operation's output, --json, and the contract's exit
# codes (0, 77 denied, 64 usage, 69 broker unavailable, 75 expired) including
# hostile replies (garbage, oversized, EOF, unexpected fds).
. "$(dirname "$0")/../lib.sh"

CC="$CB_BIN/capcall"
FB="$CB_TOP/tests/integration/fakebroker.py"
W="$T_TMP/w"
mkdir -p "$W"

if [ ! -x "$CC" ]; then
	t_skip "capcall" "$CC not built"
	t_done
	exit
fi

fb() { "$PYTHON" "$FB" --root "$W" -- "$CC" "$@"; }
fbm() { local m=$1; shift; "$PYTHON" "$FB" --root "$W" --mode "$m" -- "$CC" "$@"; }
last_req() { tail -n 1 "$W/requests.jsonl"; }
out() { cat "$T_TMP/out"; }
err() { cat "$T_TMP/err"; }

# -- without a broker ----------------------------------------------------
t_exit "no CAPBROKER_FD: 69" 69 env -u CAPBROKER_FD "$CC" ping
t_match "no CAPBROKER_FD: says so" "$(err)" "CAPBROKER_FD is not set"
t_exit "CAPBROKER_FD not a socket: 69" 69 env CAPBROKER_FD=0 "$CC" ping </dev/null
t_exit "CAPBROKER_FD garbage: 69" 69 env CAPBROKER_FD=3x "$CC" ping

# -- usage -------------------------------------------------------------------
t_exit "no operation: 64" 64 "$CC"
t_exit "unknown operation: 64" 64 "$CC" fs.frobnicate /w/x
t_exit "fs.read without a path: 64" 64 "$CC" fs.read
t_exit "fs.rename with one path: 64" 64 "$CC" fs.rename /w/a
t_exit "net.connect without a port: 64" 64 "$CC" net.connect example.org
t_exit "net.connect bare IPv6: 64" 64 "$CC" net.connect ::1:80
t_exit "net.connect port 0: 64" 64 "$CC" net.connect echo:0
t_exit "net.connect port 65536: 64" 64 "$CC" net.connect echo:65536
t_exit "request without --reason: 64" 64 "$CC" request fs.read:/x --ttl 60
t_exit "request with a bad --ttl: 64" 64 "$CC" request fs.read:/x --ttl 1m --reason r
t_exit "proc.exec without a command: 64" 64 "$CC" proc.exec --
t_exit "unknown option: 64" 64 "$CC" --frob ping
t_exit "--help: 0" 0 "$CC" --help
t_match "--help prints the usage" "$(out)" "^usage: capcall"

# -- ping and fs.read ------------------------------------------------------------
t_exit "ping: 0" 0 fb ping
t_is "ping prints nothing" "$(out)" ""
t_exit "ping --json: 0" 0 fb --json ping
t_is "ping --json" "$(out)" '{"ok":true,"op":"ping"}'

printf 'hello\nworld\n' >"$W/a.txt"
t_exit "fs.read granted: 0" 0 fb fs.read /w/a.txt
t_is "fs.read copies the fd's content to stdout" "$(out)" "$(printf 'hello\nworld')"
head -c 300000 /dev/urandom >"$W/big.bin"
fb fs.read /w/big.bin >"$T_TMP/big.out" 2>"$T_TMP/err"
t_ok "fs.read of 300 KB binary is byte-exact" cmp "$W/big.bin" "$T_TMP/big.out"
t_exit "fs.read denied: 77" 77 fb fs.read /denied/secret
t_is "fs.read denied: reason on stderr, then the token it needs and how one is had" "$(err)" \
	"capcall: denied: fs.read:/denied/secret is not covered by any token of this sandbox
capcall: it needs a token for fs.read:/denied/secret: ask a human with \`capcall request 'fs.read:/denied/secret' --reason TEXT\`, or have it granted (capbroker run --grant, capctl issue) where the tier's ceiling allows"
t_is "fs.read denied: nothing on stdout" "$(out)" ""
t_exit "fs.read escape: 77" 77 fb fs.read /escape/link
t_match "fs.read escape: reason" "$(err)" "^capcall: denied: /escape/link would escape"
t_is "... and no token hint: no token could allow an escape" "$(err | grep -c 'needs a token')" 0
t_exit "fs.read missing file: 1" 1 fb fs.read /w/nope
t_match "fs.read missing file: says which" "$(err)" "^capcall: fs.read /w/nope: /w/nope: no such file"
t_exit "fs.read --json: 0" 0 fb --json fs.read /w/a.txt
t_is "fs.read --json" "$(out)" \
	'{"ok":true,"op":"fs.read","path":"/w/a.txt","size":12,"trunc":false,"data":"hello\nworld\n"}'
printf '\x00\xff\x01' >"$W/bin"
t_exit "fs.read --json binary: 0" 0 fb fs.read /w/bin --json
t_match "fs.read --json binary uses base64" "$(out)" '"data_base64":"AP8B"'
t_exit "fs.read --json denied: 77" 77 fb --json fs.read /denied/x
t_is "fs.read --json denied: the error object" "$(out)" \
	'{"ok":false,"op":"fs.read","err":-47,"name":"not-covered","reason":"fs.read:/denied/x is not covered by any token of this sandbox","exit":77}'

# -- tokens presented -----------------------------------------------------------------
t_exit "--token sends tok: 0" 0 fb --token cap1.good fs.read /w/a.txt
t_match "--token: the request carried the token" "$(last_req)" '"tok": "cap1.good"'
fb fs.read /w/a.txt >/dev/null 2>&1
t_match "no --token: the request carries no tok" "$(last_req)" '^\{"id": [0-9]+, "op": "fs.read", "path": "/w/a.txt"\}$'
t_exit "a bad token is refused: 77" 77 fb --token cap1.forged ping
t_match "bad token: reason" "$(err)" "^capcall: denied: token signature does not verify"

# -- fs.write ----------------------------------------------------------------------------
printf 'one\n' | fb fs.write /w/new.txt >"$T_TMP/out" 2>"$T_TMP/err"
t_is "fs.write: exit 0" "$?" 0
t_is "fs.write copies stdin into the file" "$(cat "$W/new.txt")" "one"
printf 'two\n' | fb fs.write --append /w/new.txt >/dev/null 2>&1
t_is "fs.write --append appends" "$(cat "$W/new.txt")" "$(printf 'one\ntwo')"
t_match "fs.write --append sends CREATE|APPEND" "$(last_req)" '"flags": 5'
printf 'three\n' | fb fs.write /w/new.txt >/dev/null 2>&1
t_is "fs.write truncates by default" "$(cat "$W/new.txt")" "three"
t_match "fs.write sends CREATE|TRUNC" "$(last_req)" '"flags": 3'
fb fs.write /w/big2.bin <"$W/big.bin" >/dev/null 2>&1
t_ok "fs.write of 300 KB is byte-exact" cmp "$W/big.bin" "$W/big2.bin"
echo x | fb fs.write /w/m.txt --mode 0600 >/dev/null 2>&1
t_match "fs.write --mode is sent" "$(last_req)" '"mode": 384'
echo x | fb --json fs.write /w/j.txt >"$T_TMP/out" 2>&1
t_is "fs.write --json" "$(out)" '{"ok":true,"op":"fs.write","path":"/w/j.txt","bytes":2}'
echo x | fb fs.write /denied/x >/dev/null 2>&1
t_is "fs.write denied: 77" "$?" 77

# -- list, stat, mkdir, delete, rename -------------------------------------------------------
mkdir -p "$W/d/sub"
: >"$W/d/f1"
ln -s f1 "$W/d/l1"
t_exit "fs.list: 0" 0 fb fs.list /w/d
t_is "fs.list marks dirs and links" "$(out)" "$(printf 'f1\nl1@\nsub/')"
t_exit "fs.list --json: 0" 0 fb --json fs.list /w/d
t_is "fs.list --json" "$(out)" \
	'{"ok":true,"op":"fs.list","path":"/w/d","entries":[{"name":"f1","type":"file"},{"name":"l1","type":"link"},{"name":"sub","type":"dir"}],"trunc":false}'
t_exit "fs.list denied: 77" 77 fb fs.list /denied
chmod 0640 "$W/a.txt"
t_exit "fs.stat: 0" 0 fb fs.stat /w/a.txt
t_match "fs.stat prints type, size and mode" "$(out | tr '\n' ' ')" "^type file size 12 mode 0640 mtime [0-9]+ $"
t_exit "fs.stat --json: 0" 0 fb fs.stat --json /w/a.txt
t_match "fs.stat --json" "$(out)" '^\{"ok":true,"op":"fs.stat","path":"/w/a.txt","type":"file","size":12,"mode":416,"mtime":[0-9]+\}$'
t_exit "fs.mkdir: 0" 0 fb fs.mkdir /w/newdir --mode 0700
t_ok "fs.mkdir made the directory" test -d "$W/newdir"
t_match "fs.mkdir --mode is sent" "$(last_req)" '"mode": 448'
t_exit "fs.mkdir existing: 1" 1 fb fs.mkdir /w/newdir
t_match "fs.mkdir existing: reason" "$(err)" "already exists"
t_exit "fs.rename: 0" 0 fb fs.rename /w/new.txt /w/renamed.txt
t_ok "fs.rename renamed" test -f "$W/renamed.txt" -a ! -e "$W/new.txt"
t_match "fs.rename sends path2" "$(last_req)" '"path2": "/w/renamed.txt"'
t_exit "fs.rename into a denied place: 77" 77 fb fs.rename /w/renamed.txt /denied/x
t_exit "fs.delete: 0" 0 fb fs.delete /w/renamed.txt
t_ok "fs.delete deleted" test ! -e "$W/renamed.txt"
t_exit "fs.delete denied: 77" 77 fb fs.delete /denied/x

# -- net.connect ---------------------------------------------------------------------------
head -c 200000 /dev/urandom >"$W/net.in"
fb net.connect echo:7 <"$W/net.in" >"$T_TMP/net.out" 2>"$T_TMP/err"
t_is "net.connect: exit 0" "$?" 0
t_ok "net.connect relays 200 KB both ways, byte-exact" cmp "$W/net.in" "$T_TMP/net.out"
t_match "net.connect sends host and port" "$(last_req)" '"host": "echo", "port": 7'
head -c 3000000 /dev/zero >"$W/zeros"
( fb net.connect echo:7 <"$W/zeros" 2>"$T_TMP/err.pipe"; echo "rc=$?" >"$T_TMP/rc.pipe" ) | head -c 10 >/dev/null
t_is "net.connect whose reader goes away ends (exit 1)" "$(cat "$T_TMP/rc.pipe")" "rc=1"
t_match "net.connect whose reader goes away: says write failed" "$(cat "$T_TMP/err.pipe")" "write: Broken pipe"
echo hi | fb net.connect '[::1]:8080' >"$T_TMP/out" 2>"$T_TMP/err"
t_is "net.connect [v6]:port: exit 0" "$?" 0
t_match "net.connect [v6]:port: host without brackets" "$(last_req)" '"host": "::1", "port": 8080'
t_is "net.connect [v6]:port: relayed" "$(out)" "hi"
echo hi | fb net.connect echo:7 --timeout 3 >/dev/null 2>&1
t_match "net.connect --timeout in ms" "$(last_req)" '"timeout": 3000'
t_exit "net.connect refused: 1" 1 fb net.connect refused:80 </dev/null
t_match "net.connect refused: reason" "$(err)" "refused:80 refused"
t_exit "net.connect timed out: 75" 75 fb net.connect slow:80 </dev/null
t_exit "net.connect not covered: 77" 77 fb net.connect example.org:443 </dev/null

# -- proc.exec ----------------------------------------------------------------------------
t_exit "proc.exec: 0" 0 fb proc.exec -- /bin/echo hello world
t_is "proc.exec prints the program's stdout" "$(out)" "hello world"
t_exit "proc.exec exits with the status" 1 fb proc.exec -- /bin/false
t_exit "proc.exec status 42" 42 fb proc.exec --timeout 5 -- /usr/bin/mix 42
t_is "proc.exec stdout" "$(out)" "to stdout"
t_is "proc.exec stderr and truncation note" "$(err)" \
	"$(printf 'to stderr\ncapcall: proc.exec /usr/bin/mix: output truncated by the broker')"
t_match "proc.exec --timeout in ms" "$(last_req)" '"timeout": 5000'
t_match "proc.exec passes the program's options untouched" \
	"$(fb proc.exec -- /bin/echo --json -n 2>&1; last_req)" '"argv": \["/bin/echo", "--json", "-n"\]'
t_exit "proc.exec signal -9 is 137" 137 fb proc.exec -- /usr/bin/mix -9
t_exit "proc.exec --json: exit is the status" 3 fb --json proc.exec -- /usr/bin/mix 3
t_is "proc.exec --json" "$(out)" \
	'{"ok":true,"op":"proc.exec","cmd":"/usr/bin/mix","status":3,"stdout":"to stdout\n","stderr":"to stderr\n","trunc":true}'
t_exit "proc.exec not covered: 77" 77 fb proc.exec -- /bin/sh -c id

# -- request, tokens, derive ------------------------------------------------------------------
t_exit "request approved: 0" 0 fb request fs.write:/w/x --ttl 60 --reason "need it"
t_is "request prints the new token id" "$(out)" "00112233445566778899aabbccddeeff"
t_match "request sends cap, ttl, reason" "$(last_req)" '"cap": "fs.write:/w/x", "ttl": 60, "reason": "need it"'
t_exit "request --json: 0" 0 fb --json request fs.write:/w/x --reason why
t_is "request --json" "$(out)" \
	'{"ok":true,"op":"request","cap":"fs.write:/w/x","tid":"00112233445566778899aabbccddeeff","th":7,"token":"cap1.granted"}'
t_exit "request denied by a human: 77" 77 fb request fs.write:/deny --reason r
t_is "request denied: reason" "$(err)" "capcall: denied: denied by alice: not today"
t_exit "request expired undecided: 75" 75 fb request fs.write:/expire --reason r
t_match "request expired: reason" "$(err)" "nobody decided within 300 seconds"
t_exit "request not requestable: 77" 77 fb request fs.write:/policy --reason r
t_exit "tokens: 0" 0 fb tokens
t_match "tokens lists both" "$(out)" "^TH +ID.*
1 +a{32} +2033-05-18T03:33:20Z +- +fs.read:/w/\*\* fs.list:/w/\*\*
7 +b{32} +2033-05-18T03:35:00Z +3 +net.connect:echo:7 \(elevated\)$"
t_exit "tokens --json: 0" 0 fb --json tokens
t_is "tokens --json" "$(out)" \
	"{\"ok\":true,\"op\":\"tokens\",\"tokens\":[{\"th\":1,\"id\":\"$(printf 'a%.0s' {1..32})\",\"caps\":[\"fs.read:/w/**\",\"fs.list:/w/**\"],\"exp\":2000000000,\"elevated\":false},{\"th\":7,\"id\":\"$(printf 'b%.0s' {1..32})\",\"caps\":[\"net.connect:echo:7\"],\"exp\":2000000100,\"uses\":3,\"elevated\":true}]}"
t_exit "derive: 0" 0 fb derive fs.read:/w/a.txt --ttl 30 --uses 2
t_is "derive prints the child token" "$(out)" "cap1.child"
t_match "derive sends caps, ttl, uses" "$(last_req)" '"caps": \["fs.read:/w/a.txt"\], "ttl": 30, "uses": 2'
t_exit "derive wider than the parent: 77" 77 fb derive fs.write:/w/a.txt

# -- JSON escaping -----------------------------------------------------------------------------
printf 'q"b\\c\x01\x7f\xc3\xa9\n' >"$W/esc"
fb --json fs.read /w/esc >"$T_TMP/out" 2>&1
# (jansson writes it; non-ASCII as \uXXXX, so no C1 or bidi character
# reaches a terminal raw: issue 12)
t_is "JSON escapes quotes, backslashes, controls (DEL too); UTF-8 as \\u escapes" "$(out)" \
	'{"ok":true,"op":"fs.read","path":"/w/esc","size":10,"trunc":false,"data":"q\"b\\c\u0001\u007f\u00E9\n"}'
t_is "... the same text once parsed" "$("$PYTHON" -c 'import json,sys; print(ascii(json.load(open(sys.argv[1]))["data"]))' "$T_TMP/out")" \
	"'q\"b\\\\c\\x01\\x7f\\xe9\\n'"
: >"$W/$(printf 'n\x01"\xff')"
fb --json fs.list /w >"$T_TMP/list.json" 2>&1
t_ok "JSON output parses even with odd names" "$PYTHON" -c 'import json,sys; json.load(open(sys.argv[1]))' "$T_TMP/list.json"
t_match "a name that is not UTF-8 gets U+FFFD" "$(cat "$T_TMP/list.json")" '"n\\u0001\\"\\u(fffd|FFFD)"'

# -- hostile or broken broker: 69, nothing leaked -------------------------------------------------
for m in eof garbage cut notmap big wrongid twofds trailing badtype; do
	t_exit "broker reply '$m': 69" 69 fbm $m fs.read /w/a.txt
	t_match "broker reply '$m': says broker unavailable" "$(err)" "^capcall: broker unavailable: "
done
t_exit "reply promising an fd that never comes: 69" 69 fbm nofd fs.read /w/a.txt
t_match "missing fd: reason" "$(err)" "promised a descriptor"
t_exit "reply with an unannounced fd: 69" 69 fbm strayfd ping
t_exit "--json on EOF: 69" 69 fbm eof --json ping
t_match "--json on EOF: error object" "$(out)" '^\{"ok":false,"op":"ping","err":-101,"name":"closed",.*"exit":69\}$'

t_done
