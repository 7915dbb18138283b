#!/usr/bin/env bash
# 92-admin-lib-fds.sh - the test helpers (admin_lib.sh) give no process they
# start a hidden descriptor: the write end of an agent's stdin FIFO, which
# the test's shell holds, is not inherited by a broker or an agent started
# later, nor by their sandboxes (before the fix every later agent and broker
# held it, so that agent could never see EOF while they lived).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

# holders ROOTPID PATTERN: the pids under ROOTPID (itself included) with a
# descriptor whose target matches PATTERN, and the descriptor.
holders() {
	"$PYTHON" - "$@" <<'PY'
import os, re, sys
root, pat = int(sys.argv[1]), re.compile(sys.argv[2])
kids = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            st = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(p))
todo, seen = [root], []
while todo:
    p = todo.pop()
    seen.append(p)
    todo += kids.get(p, [])
for p in seen:
    try:
        fds = os.listdir(f"/proc/{p}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            t = os.readlink(f"/proc/{p}/fd/{fd}")
        except OSError:
            continue
        if pat.search(t):
            print(p, fd, t)
PY
}

srv_start "$T_TMP/srv"
agent_start a1 --tier medium
agent_start a2 --tier medium
t_ok "control: the test's shell holds a1's FIFO" test -e "/proc/$$/fd/${AFD[a1]}"
t_is "a later agent (its run, sandbox and agent) holds no agent FIFO but its own" \
	"$(holders "${APID[a2]}" '/a1\.in$')" ""
t_ok "control: it holds its own (its stdin)" test -n "$(holders "${APID[a2]}" '/a2\.in$')"
SRV1=$SRV
srv_start "$T_TMP/srv2"
t_is "a broker started later holds no agent FIFO" "$(holders "$SRV" '/a[12]\.in$')" ""
agent_stop a1
t_is "an agent stopped while later ones run sees EOF and ends" "$AEXIT" 0
agent_stop a2
t_done
