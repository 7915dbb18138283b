#!/usr/bin/env bash
# 10-broker-fs.sh - every fs operation through a real broker and sandbox,
# allowed and denied, with each denial's reason.
. "$(dirname "$0")/../lib.sh"
W="$T_TMP/ws"
mkdir -p "$W/docs" "$W/out" "$W/private"
echo "granted content" >"$W/docs/a.txt"
echo "private" >"$W/private/p.txt"
ln -s /etc/passwd "$W/docs/link"
ln -s ../private/p.txt "$W/docs/inner-link"
mkfifo "$W/docs/fifo"

# run_agent SCRIPT: run a shell script as a medium-tier agent with the test grants
run_agent() {
	"$CB_BIN/capbroker" run --tier medium --workspace "$W" --approve deny \
		--grant "fs.read:$W/docs/**" --grant "fs.list:$W/**" \
		--grant "fs.write:$W/out/**" --grant "fs.delete:$W/out/**" \
		-- /bin/sh -c "$1"
}

out=$(run_agent "capcall fs.read $W/docs/a.txt")
t_is "fs.read of a granted file returns its content" "$out" "granted content"
t_exit "fs.read outside the grant is denied (77)" 77 run_agent "capcall fs.read $W/private/p.txt"
t_match "... with reason not covered" "$(cat "$T_TMP/err")" "denied: not covered"
t_exit "fs.read of /etc/shadow is denied" 77 run_agent "capcall fs.read /etc/shadow"
t_exit "fs.read through a symlink out of the root is denied" 77 run_agent "capcall fs.read $W/docs/link"
t_match "... with reason escape" "$(cat "$T_TMP/err")" "would escape its root"
t_exit "fs.read through a symlink inside the workspace is denied too" 77 run_agent "capcall fs.read $W/docs/inner-link"
t_exit "fs.read of a FIFO is refused without blocking" 77 run_agent "capcall fs.read $W/docs/fifo"
t_match "... with reason file type" "$(cat "$T_TMP/err")" "refused file type"
t_exit "fs.read of a directory is refused" 77 run_agent "capcall fs.read $W/docs"
t_exit "a path with .. is refused" 64 run_agent "capcall fs.read $W/docs/../private/p.txt"
t_match "... and says why" "$(cat "$T_TMP/err")" '\.\. component'

t_ok "fs.write creates a file in the granted directory" run_agent "echo written | capcall fs.write $W/out/new.txt"
t_is "... with the agent's bytes" "$(cat "$W/out/new.txt" 2>/dev/null)" "written"
t_ok "fs.write --append appends" run_agent "echo more | capcall fs.write --append $W/out/new.txt"
t_is "... after what was there" "$(cat "$W/out/new.txt" 2>/dev/null | tr '\n' ' ')" "written more "
t_exit "fs.write to a read-only grant is denied" 77 run_agent "echo x | capcall fs.write $W/docs/a.txt"
t_is "... and the file is untouched" "$(cat "$W/docs/a.txt")" "granted content"
ln -s /etc/evil "$W/out/dangling"
t_exit "fs.write through a dangling symlink is refused" 77 run_agent "echo x | capcall fs.write $W/out/dangling"
t_ok "... and nothing was created outside" test ! -e /etc/evil

t_ok "fs.mkdir inside the write grant" run_agent "capcall fs.mkdir $W/out/sub"
t_ok "... made the directory" test -d "$W/out/sub"
out=$(run_agent "capcall fs.list $W/docs" | sort | tr '\n' ' ')
t_is "fs.list names the entries (symlinks marked @)" "$out" "a.txt fifo inner-link@ link@ "
t_exit "fs.list outside the grant is denied" 77 run_agent "capcall fs.list /etc"
out=$(run_agent "capcall fs.stat $W/docs/a.txt" | grep -E '^size' )
t_is "fs.stat with a read grant gives the size" "$out" "size 16"
t_ok "fs.rename within the write grant" run_agent "capcall fs.rename $W/out/new.txt $W/out/renamed.txt"
t_ok "... moved it" test -f "$W/out/renamed.txt"
t_exit "fs.rename out of the write grant is denied" 77 run_agent "capcall fs.rename $W/out/renamed.txt $W/docs/stolen.txt"
t_ok "fs.delete of a file" run_agent "capcall fs.delete $W/out/renamed.txt"
t_ok "... removed it" test ! -e "$W/out/renamed.txt"
t_exit "fs.delete outside the delete grant is denied" 77 run_agent "capcall fs.delete $W/docs/a.txt"
t_ok "... and the file is still there" test -f "$W/docs/a.txt"
t_ok "fs.delete of the symlink removes the link, not its target" run_agent "capcall fs.delete $W/out/dangling"
t_ok "... /etc/passwd untouched" test -s /etc/passwd

# A grant beyond the tier's ceiling never starts.
t_exit "a grant beyond the tier's ceiling is refused (125)" 125 \
	"$CB_BIN/capbroker" run --tier medium --workspace "$W" --grant "fs.read:/etc/**" -- /bin/true
t_match "... saying which grant and why" "$(cat "$T_TMP/err")" "fs.read:/etc/\*\*.*exceeds policy"
t_exit "low tier: any host file grant is beyond the ceiling" 125 \
	"$CB_BIN/capbroker" run --tier low --grant "fs.read:$W/docs/a.txt" -- /bin/true

# The broker resolves beneath the root even when the agent races a rename:
# replace a granted directory by a symlink and read through the old name.
mkdir -p "$W/docs/d" && echo inside >"$W/docs/d/f"
out=$(run_agent "capcall fs.read $W/docs/d/f" 2>&1)
t_is "control: read through a real directory" "$out" "inside"
mv "$W/docs/d" "$W/docs/d.real" && ln -s /etc "$W/docs/d"
t_exit "a directory swapped for a symlink is not followed" 77 run_agent "capcall fs.read $W/docs/d/passwd"
t_match "... escape" "$(cat "$T_TMP/err")" "would escape its root"
t_done
