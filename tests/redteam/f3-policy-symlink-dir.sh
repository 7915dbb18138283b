#!/usr/bin/env bash
# F3: the policy path may be a symlink that sits in a directory anyone can
# write; only the directories above the symlink's *target* are checked
# (policy/load.c pol_dirs_safe uses realpath()).  Any local user can then
# repoint the configured --policy path at another root-owned policy (e.g. a
# permissive example) before the next start / SIGHUP reload.
set -u
B="$(cd "$(dirname "$0")/../.." && pwd)/bin"
D=$(mktemp -d /var/tmp/f3.XXXXXX); chmod 755 "$D"
mkdir -m 0755 "$D/etc"; mkdir -m 0777 "$D/shared"     # shared: world-writable, not sticky
printf 'tiers = { medium = { requestable = ( { caps = [ "fs.read:/**" ]; approval = "never"; } ); }; };\n' >"$D/etc/strict.conf"
printf 'tiers = { medium = { requestable = ( { caps = [ "fs.read:/**" ]; approval = "auto"; max_ttl = 3600; } ); }; };\n' >"$D/etc/loose.conf"
chmod 644 "$D/etc/"*.conf
ln -s "$D/etc/strict.conf" "$D/shared/policy.conf"
echo "--- a world-writable policy directory itself is refused (expected):"
cp "$D/etc/strict.conf" "$D/shared/plain.conf"; "$B/capbroker" check-policy "$D/shared/plain.conf"; echo "rc=$?"
echo "--- but a symlink in that same directory is accepted:"
"$B/capbroker" check-policy "$D/shared/policy.conf"; echo "rc=$?"
echo "--- 'nobody' repoints it (no write access to the policy or $D/etc needed):"
setpriv --reuid=65534 --regid=65534 --clear-groups ln -sfn "$D/etc/loose.conf" "$D/shared/policy.conf" && ls -l "$D/shared/policy.conf"
"$B/capbroker" check-policy "$D/shared/policy.conf"; echo "rc=$? (accepted: the loose policy now governs)"
rm -rf "$D"
