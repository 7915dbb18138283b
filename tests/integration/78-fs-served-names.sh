#!/usr/bin/env bash
# 78-fs-served-names.sh - the names the broker's file server holds for one
# sandbox are bounded (defaults.served_names, all its served trees
# together).  Before, each tree's table held up to 256 Ki names however
# many trees a sandbox had, and the kernel forgets names only under memory
# pressure: an agent looking up or creating names grew broker memory with
# them, and honest work past the bound (find over a big tree) failed.  Now,
# past three quarters of the bound the server asks the kernel to forget
# the least recently used names, so a walk over many more names than the
# bound works; names the agent pins (open files) are kept, and past the
# bound a new name is refused (ENFILE) with one audit line.  Needs root.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/admin_lib.sh"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "the served names' bound" "needs root and /dev/fuse"
	t_done
	exit
fi

W="$T_TMP/ws"
mkdir -p "$W/many"
(cd "$W/many" && seq 2000 | sed 's/^/f/' | xargs touch)
printf 'defaults = { served_names = 200; };\n' >"$T_TMP/p.conf"
S="$T_TMP/st"
srv_start "$S" --policy "$T_TMP/p.conf"
agent_start n1 --tier medium --workspace "$W"

# A walk at a steady pace (a build's, not a flood's): the notifier gets
# its turn at the directory's lock between lookups.
cat >"$W/walk.py" <<'EOT'
import os, time
bad = 0
for i in range(1, 2001):
    try:
        os.lstat("many/f%d" % i)
    except OSError:
        bad += 1
    if i % 10 == 0:
        time.sleep(0.005)
print("failed", bad)
EOT
agent_do n1 "python3 walk.py; ls many | wc -l"
t_is "a walk over 2000 names works with a bound of 200 (the oldest are forgotten)" "$AOUT" \
	"$(printf 'failed 0\n2000')"
t_is "... and the bound was never hit" "$(grep -c '"op":"fs.names"' "$S/audit.jsonl")" 0

# Open files pin their names: the kernel cannot forget them.
cat >"$W/pin.py" <<'EOT'
import errno, os
fds, err = [], 0
for i in range(1, 241):
    try:
        fds.append(os.open("many/f%d" % i, os.O_RDONLY))
    except OSError as e:
        err = e.errno
        break
print(len(fds), errno.errorcode.get(err, err))
for fd in fds:
    os.close(fd)
EOT
agent_do n1 "python3 pin.py"
read -r nopen why <<<"$AOUT"
t_ok "pinned names stop at the bound ($nopen files open)" test "${nopen:-0}" -ge 190 -a "${nopen:-0}" -lt 200
t_is "... the next is refused with ENFILE" "$why" ENFILE
# The audit writer is asynchronous (a thread): the line may land a moment
# after the agent's answer, later still under a parallel sanitizer run.
wait_for 100 grep -q '"sandbox":"n1","op":"fs.names"' "$S/audit.jsonl"
t_is "one line says so" "$(grep -c '"sandbox":"n1","op":"fs.names"' "$S/audit.jsonl")" 1
t_match "... naming the bound" "$(grep '"op":"fs.names"' "$S/audit.jsonl")" \
	"\"resource\":\"$W\".*\"reason\":\"busy\".*names held, the most it may \(served_names\)"
agent_do n1 "cat many/f500 >/dev/null && ls many | wc -l"
t_is "once they are closed, new names work again" "$AOUT" 2000
t_ok "the broker is alive" "$CTL" --state "$S" status
t_done
