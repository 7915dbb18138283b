#!/usr/bin/env bash
# 11-broker-net-proc.sh - net.connect and proc.exec through a real broker.
. "$(dirname "$0")/../lib.sh"
W="$T_TMP/ws"; mkdir -p "$W"; echo "one two three" >"$W/f.txt"
cat >"$T_TMP/p.conf" <<EOT
tiers = { medium = { ceiling = [ "fs.*:\${workspace}/**", "net.connect:127.0.0.1:*", "net.connect:localhost:*", "proc.exec:/usr/bin/wc", "proc.exec:/usr/bin/id", "proc.exec:/usr/bin/head" ]; }; };
EOT
read -r P1 P2 < <($PYTHON -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
# A tiny TCP server that answers "pong" to anything.
for p in $P1 $P2; do
	$PYTHON -c "
import socket
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1',$p)); s.listen(8)
for _ in range(40):
    c,_=s.accept(); c.recv(100); c.sendall(b'pong\n'); c.close()
" & done
# (python starts slowly on a loaded machine: wait until both listen)
for _ in $(seq 100); do
	[ -n "$(ss -Hltn "sport = :$P1")" ] && [ -n "$(ss -Hltn "sport = :$P2")" ] && break
	sleep 0.1
done
trap 'kill $(jobs -p) 2>/dev/null; t_cleanup' EXIT

run_agent() {
	"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" --approve deny \
		--grant "net.connect:127.0.0.1:$P1" --grant "fs.read:$W/**" --grant "proc.exec:/usr/bin/wc" \
		-- /bin/sh -c "$1"
}
out=$(run_agent "echo ping | capcall net.connect 127.0.0.1:$P1")
t_is "net.connect to a granted address and port" "$out" "pong"
t_exit "net.connect to another port is denied" 77 run_agent "echo ping | capcall net.connect 127.0.0.1:$P2"
t_match "... not covered" "$(cat "$T_TMP/err")" "not covered"
out=$(run_agent "echo ping | capcall net.connect localhost:$P1")
t_is "a name that resolves to the granted address is judged by the address" "$out" "pong"
t_exit "a loopback address the grant does not name is never reachable" 77 \
	"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" \
	--grant "net.connect:localhost:$P1" -- /bin/sh -c "echo | capcall net.connect localhost:$P1"
t_match "... never-reachable range" "$(cat "$T_TMP/err")" "never-reachable"
# No grant that could cover the name: refused before any lookup, so an
# agent cannot use the broker's resolver as a side channel.
t_exit "no lookup without a covering grant" 77 "$CB_BIN/capbroker" run --tier high \
	-- /bin/sh -c "capcall net.connect exfil-data.no-such-domain.invalid:443 </dev/null"
t_match "... refused as not covered (a lookup would say resolve-failed)" "$(cat "$T_TMP/err")" "not covered.*exfil-data"
# Even with every host granted, only an IP literal or a proper host name
# reaches the resolver.
"$CB_BIN/capbroker" run --tier high --grant 'net.connect:*:*' \
	-- /bin/sh -c 'capcall net.connect "bad host%x.example:80" </dev/null' >/dev/null 2>"$T_TMP/err"
t_match "a malformed host name never reaches the resolver" "$(cat "$T_TMP/err")" "not an IP address or a host name"
t_exit "the metadata address is refused" 77 run_agent "capcall net.connect 169.254.169.254:80 </dev/null"
t_exit "an unresolvable name fails cleanly (exit 1)" 1 "$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" \
	--tier medium --workspace "$W" --grant "net.connect:127.0.0.1:80" \
	-- /bin/sh -c "capcall net.connect no-such-host.invalid:80 </dev/null"
t_match "... name did not resolve" "$(cat "$T_TMP/err")" "did not resolve"
# connect refused: nothing listens on P1+1 if free; grant it explicitly.
t_exit "a refused connection is a clear error" 1 \
	"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" \
	--grant "net.connect:127.0.0.1:1" -- /bin/sh -c "capcall net.connect 127.0.0.1:1 </dev/null"
t_match "... connection refused" "$(cat "$T_TMP/err")" "refused"

out=$(run_agent "capcall proc.exec -- /usr/bin/wc -w $W/f.txt")
t_is "proc.exec runs a granted program and relays its output" "$out" "3 $W/f.txt"
t_exit "proc.exec of a program without a grant is denied" 77 run_agent "capcall proc.exec -- /usr/bin/id"
t_exit "proc.exec of a relative path is refused" 64 run_agent "capcall proc.exec -- wc"
out=$(run_agent "capcall proc.exec -- /usr/bin/wc -c /etc/shadow; echo rc=\$?" 2>/dev/null | tail -1)
t_is "the program runs in its own sandbox: no /etc/shadow there" "$out" "rc=1"
# A workspace under the host's /tmp is shown beneath the sandbox's own
# private /tmp (mount points made on the sandbox's tmpfs).
TW=$(mktemp -d /tmp/cbtest-ws.XXXXXX); chmod 0755 "$TW"; echo "a b" >"$TW/g.txt"
out=$("$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$TW" \
	--grant "fs.read:$TW/**" --grant "proc.exec:/usr/bin/wc" -- capcall proc.exec -- /usr/bin/wc -w "$TW/g.txt")
t_is "proc.exec sees a granted workspace that lives under /tmp" "$out" "2 $TW/g.txt"
rm -rf "$TW"
# The broker's output buffers grow as a program writes (broker/ops_proc.c,
# brk_proc_room): every byte up to WIRE_OUT_MAX (64 KiB) comes back, the
# rest is cut with a note.
head_agent() {
	"$CB_BIN/capbroker" run --policy "$T_TMP/p.conf" --tier medium --workspace "$W" \
		--grant "proc.exec:/usr/bin/head" -- /bin/sh -c "$1"
}
out=$(head_agent "capcall proc.exec -- /usr/bin/head -c 40000 /dev/zero | wc -c")
t_is "proc.exec output of 40,000 bytes (past the buffer's first sizes) comes back whole" "$out" "40000"
out=$(head_agent "capcall proc.exec -- /usr/bin/head -c 65536 /dev/urandom | wc -c")
t_is "... 64 KiB exactly" "$out" "65536"
out=$(head_agent "capcall proc.exec -- /usr/bin/head -c 300000 /dev/zero 2>&1 >/dev/null")
t_match "... more is cut, and said so" "$out" "output truncated by the broker"
out=$(head_agent "capcall proc.exec -- /usr/bin/head -c 300000 /dev/zero 2>/dev/null | wc -c")
t_is "... at 64 KiB" "$out" "65536"
out=$(head_agent "capcall --json proc.exec -- /usr/bin/head -c 0 /dev/zero")
t_match "a program that writes nothing: empty output" "$out" '"stdout":"","stderr":""'
t_done
