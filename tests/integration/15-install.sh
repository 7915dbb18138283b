#!/usr/bin/env bash
# 15-install.sh - `make install` honours PREFIX and DESTDIR, and an installed
# C client library builds a program through its pkg-config file.
. "$(dirname "$0")/../lib.sh"
D="$T_TMP/dest"
t_ok "make install DESTDIR=... PREFIX=/opt/cb" \
	make -s -C "$CB_TOP" install DESTDIR="$D" PREFIX=/opt/cb SANITIZE="${CB_SANITIZE:-}"
for f in bin/capbroker bin/capcall bin/capctl libexec/capbroker/capbroker-stub \
	lib/libcapclient.a lib/pkgconfig/capclient.pc include/capbroker/capclient.h \
	share/capbroker/python/capbroker/__init__.py share/man/man1/capbroker.1 \
	share/man/man1/capcall.1 share/man/man1/capctl.1; do
	t_ok "installed /opt/cb/$f" test -e "$D/opt/cb/$f"
done
t_ok "nothing was installed outside DESTDIR/PREFIX" test -z "$(find "$D" -mindepth 1 -maxdepth 1 ! -name opt)"
cat >"$T_TMP/c.c" <<'EOT'
#include <capclient.h>
#include <stdio.h>
int main(void) { struct cc_conn *c; return cc_open_env(&c) == CB_ENOENT ? 0 : 1; }
EOT
flags=$(PKG_CONFIG_PATH="$D/opt/cb/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D" pkg-config --cflags --libs capclient)
# A sanitizer build installs a sanitized archive: link the program alike.
san=${CB_SANITIZE:+-fsanitize=$CB_SANITIZE}
t_ok "a program builds against the installed library via pkg-config" cc $san -o "$T_TMP/c" "$T_TMP/c.c" $flags
t_ok "... and runs (no CAPBROKER_FD: a clear not-found)" env -u CAPBROKER_FD "$T_TMP/c"
t_done
