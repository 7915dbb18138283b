#!/usr/bin/env bash
# 970-run-medium-tool-helpers.sh - the medium tier's listed tools find the
# programs they run themselves.  git's shell commands (git submodule, git
# bisect: /usr/lib/git-core/git-sh-setup) print every message through
# gettext and envsubst, and tar -J and -j run xz and bzip2; none of those was
# on the default exec list, so `git submodule add` of a local repository
# printed "gettext: Permission denied" and "envsubst: Permission denied"
# six times around its work (an agent reads that as a failed command), so
# did `git bisect start`, and `tar cJf` failed with "xz: Permission denied",
# "Child returned status 126".  They are on the list now:
# each prints text or (de)compresses, and what it touches is still the
# tokens' decision.  A workspace program is still refused.
. "$(dirname "$0")/../lib.sh"
CB="$CB_BIN/capbroker"

if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ]; then
	t_skip "git's and tar's helpers in the medium tier" "needs root and /dev/fuse"
	t_done
	exit
fi

OWN=4260
W="$T_TMP/ws"
mkdir -p "$W"
printf 'int main(void){return 0;}\n' >"$W/p.c"
chown -R "$OWN:$OWN" "$W"

run() { timeout 120 "$CB" run --tier medium --workspace "$W" --approve deny -- /bin/sh -c "$1"; }

GIT='export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b
export GIT_CONFIG_GLOBAL=$PWD/.gitconfig
git config --global init.defaultBranch main && git config --global protocol.file.allow always
mkdir lib && cd lib && git init -q && echo l >l.txt && git add . && git commit -qm lib && cd ..
mkdir app && cd app && git init -q && echo a >a.txt && git add . && git commit -qm app'

if command -v gettext >/dev/null && command -v envsubst >/dev/null; then
	run "$GIT"' && git submodule add -q ../lib lib && git commit -qm sub && git submodule foreach "echo in \$name"' \
		>"$T_TMP/o" 2>"$T_TMP/e"
	t_is "git submodule add and foreach exit 0" "$?" 0
	t_is "... foreach says which submodule it entered" "$(cat "$T_TMP/o")" "Entering 'lib'
in lib"
	t_is "... and nothing is refused" "$(grep -c 'Permission denied' "$T_TMP/e")" 0
	t_is "the submodule is checked out on the host" "$(cat "$W/app/lib/l.txt")" "l"
	run 'cd app && git bisect start HEAD HEAD~1 && git bisect reset' >"$T_TMP/o" 2>"$T_TMP/e"
	t_is "git bisect start and reset exit 0" "$?" 0
	t_match "... bisect names the first bad commit" "$(cat "$T_TMP/o")" "is the first bad commit"
	t_is "... refusing nothing" "$(grep -c 'Permission denied' "$T_TMP/e")" 0
else
	t_skip "git submodule and bisect in the medium tier" "gettext-base is not installed"
fi
for z in "J xz" "j bzip2"; do
	set -- $z
	if command -v "$2" >/dev/null; then
		t_is "tar c${1}f and x${1}f ($2)" \
			"$(run "tar c${1}f a.t p.c && mkdir x$1 && tar x${1}f a.t -C x$1 && cat x$1/p.c" 2>&1)" \
			"int main(void){return 0;}"
	else
		t_skip "tar c${1}f and x${1}f" "$2 is not installed"
	fi
done
out=$(run 'cc -o prog p.c && ./prog; echo rc=$?' 2>&1)
t_match "a program built in the workspace is still refused" "$out" "rc=126$"
t_match "... with EACCES" "$out" "prog: Permission denied"
t_done
