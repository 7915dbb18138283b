#!/usr/bin/env bash
# 15-install.sh - `make install` honours PREFIX and DESTDIR; the installed C
# client library (shared, with a soname and only its API exported, and
# static) builds a program through its pkg-config file; the Python module
# lands where the system python3 imports it.
. "$(dirname "$0")/../lib.sh"
D="$T_TMP/dest"
progs() { stat -c '%n %i %y' "$CB_BIN"/*; }
before=$(progs)
t_ok "make install DESTDIR=... PREFIX=/opt/cb" \
	make -s -C "$CB_TOP" install DESTDIR="$D" PREFIX=/opt/cb SANITIZE="${CB_SANITIZE:-}"
# Other tests run these programs meanwhile: rewriting one in place made their
# exec fail with ETXTBSY (the sanitizer build copied capcall over itself).
t_is "... leaves the programs under test untouched (no rewrite while tests run them)" \
	"$(progs)" "$before"
pyminor=$("$PYTHON" -c 'import sys; print(sys.version_info[1])')
for f in bin/capbroker bin/capcall bin/capctl libexec/capbroker/capbroker-stub \
	lib/libcapclient.a lib/libcapclient.so lib/libcapclient.so.0 lib/pkgconfig/capclient.pc \
	include/capbroker/capclient.h include/capbroker/common/common.h \
	share/capbroker/python/capbroker/__init__.py \
	lib/python3.$pyminor/dist-packages/capbroker/__init__.py \
	lib/python3.$pyminor/dist-packages/capbroker/py.typed share/man/man1/capbroker.1 \
	share/man/man1/capcall.1 share/man/man1/capctl.1; do
	t_ok "installed /opt/cb/$f" test -e "$D/opt/cb/$f"
done
t_ok "nothing was installed outside DESTDIR/PREFIX" test -z "$(find "$D" -mindepth 1 -maxdepth 1 ! -name opt)"

so="$D/opt/cb/lib/libcapclient.so"
t_match "libcapclient.so has the soname libcapclient.so.0" \
	"$(readelf -d "$so" | grep SONAME)" 'Library soname: \[libcapclient\.so\.0\]'
# Exactly the API of capclient.h (and cb_strerror, cb_errname) is exported,
# every symbol under the version node: nothing of wire/, caps/, cc_int.h.
want=$( { grep -oE '\bcc_[a-z_]+\(' "$CB_TOP/client/capclient.h" | tr -d '('; \
	echo cb_strerror; echo cb_errname; } | sort -u | tr '\n' ' ')
got=$(objdump -T "$so" | awk '$2 == "g" && $4 != "*UND*" && $(NF-1) == "CAPCLIENT_0.1" && $NF != "CAPCLIENT_0.1" {print $NF}' \
	| sort -u | tr '\n' ' ')
t_is "libcapclient.so exports exactly capclient.h's API, versioned CAPCLIENT_0.1" "$got" "$want"
t_is "... and no unversioned or other global symbol" \
	"$(objdump -T "$so" | awk '$2 == "g" && $4 != "*UND*" && $(NF-1) != "CAPCLIENT_0.1"' | wc -l)" 0
# Each binary links only the packages its modules use (Makefile, *_PKGS).
needs() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -cE "$2"; }
t_is "libcapclient.so links neither jansson nor fuse3 (MCP is capcall's)" \
	"$(needs "$so" 'libjansson|libfuse')" 0
t_is "capbroker links neither jansson nor libseccomp" \
	"$(needs "$D/opt/cb/bin/capbroker" 'libjansson|libseccomp')" 0
# The broker serves workspaces (fsrv/, issue 14) speaking the kernel's FUSE
# protocol itself (fsrv/proto.c): no FUSE library, whose per-session pthread
# key capped a broker at about 190 sandboxes (docs/dependencies.md).
t_is "capbroker links no FUSE library (its file server speaks the protocol)" \
	"$(needs "$D/opt/cb/bin/capbroker" 'libfuse')" 0
# libsystemd is loaded by serve when it needs it (docs/service.md): no run
# pays for loading it and its libraries.
t_is "capbroker does not link libsystemd (serve loads it)" \
	"$(needs "$D/opt/cb/bin/capbroker" 'libsystemd')" 0
# libpq (a cluster) and libldns (a sandbox's resolver) are loaded when first
# needed (common/dl.c): a run does not load them and their twenty-odd
# libraries at every start (docs/performance.md).
t_is "capbroker links neither libpq nor libldns (loaded when needed)" \
	"$(needs "$D/opt/cb/bin/capbroker" 'libpq|libldns')" 0
# SQLite is loaded when the state is first opened (state/state.c), which a
# run does once its sandbox's stub is spawned: its relocations were most of
# the loader's work before the stub.
t_is "capbroker and capctl do not link SQLite (the state loads it)" \
	"$(needs "$D/opt/cb/bin/capbroker" 'libsqlite')$(needs "$D/opt/cb/bin/capctl" 'libsqlite')" 00
t_is "capcall links neither SQLite, libevent, libconfig nor fuse3" \
	"$(needs "$D/opt/cb/bin/capcall" 'libsqlite|libevent|libconfig|libfuse')" 0
t_is "capctl links neither libevent, libconfig nor fuse3" \
	"$(needs "$D/opt/cb/bin/capctl" 'libevent|libconfig|libfuse')" 0
# ... and a build from before a module list changed is linked again (make
# -W pretends the file changed, touching nothing).
ver=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$CB_TOP/client/python/capbroker/__init__.py")
t_match "a changed module list relinks libcapclient.so" "$(make -s -n -C "$CB_TOP" \
	-W client/module.mk SANITIZE="${CB_SANITIZE:-}" "${CB_BUILD#"$CB_TOP"/}/libcapclient.so.$ver")" \
	'-o [^ ]*libcapclient\.so'
t_match "... and the programs" "$(make -s -n -C "$CB_TOP" -W client/module.mk \
	SANITIZE="${CB_SANITIZE:-}" "${CB_BIN#"$CB_TOP"/}/capctl")" '-o [^ ]*bin/capctl '

cat >"$T_TMP/c.c" <<'EOT'
#include <capclient.h>
#include <stdio.h>
int main(void) { struct cc_conn *c; return cc_open_env(&c) == CB_ENOENT ? 0 : 1; }
EOT
pc() { PKG_CONFIG_PATH="$D/opt/cb/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$D" pkg-config "$@" capclient; }
t_is "the .pc file's version is the Python module's" "$(pc --modversion)" \
	"$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$CB_TOP/client/python/capbroker/__init__.py")"
t_match "pkg-config --static adds the private dependencies (docs/client-library.md)" \
	"$(pc --static --libs)" '-lmsgpackc.*-lsodium|-lsodium.*-lmsgpackc'
t_is "plain pkg-config --libs is just the library" "$(pc --libs | xargs)" "-L$D/opt/cb/lib -lcapclient"
# A sanitizer build installs a sanitized library: link the program alike.
san=${CB_SANITIZE:+-fsanitize=$CB_SANITIZE}
t_ok "a program builds against the installed library via pkg-config" \
	cc $san -o "$T_TMP/c" "$T_TMP/c.c" $(pc --cflags --libs)
t_match "... linked to the shared library by its soname" \
	"$(readelf -d "$T_TMP/c" | grep NEEDED)" 'libcapclient\.so\.0'
t_ok "... and runs (no CAPBROKER_FD: a clear not-found)" \
	env -u CAPBROKER_FD LD_LIBRARY_PATH="$D/opt/cb/lib" "$T_TMP/c"
t_ok "a program links the static library via pkg-config --static" \
	cc $san -o "$T_TMP/cs" "$T_TMP/c.c" $(pc --cflags) -Wl,-Bstatic $(pc --libs-only-L) -lcapclient \
	-Wl,-Bdynamic $(pc --static --libs-only-l | sed 's/-lcapclient//')
t_is "... and needs no libcapclient.so" "$(readelf -d "$T_TMP/cs" | grep -c 'libcapclient')" 0
t_ok "... and runs" env -u CAPBROKER_FD "$T_TMP/cs"

# PREFIX=/usr: the module goes to Debian's dist-packages, which the system
# python3 has on its path without PYTHONPATH.
D2="$T_TMP/dest-usr"
t_ok "make install DESTDIR=... PREFIX=/usr" \
	make -s -C "$CB_TOP" install DESTDIR="$D2" PREFIX=/usr SANITIZE="${CB_SANITIZE:-}"
t_ok "PREFIX=/usr installs the module in /usr/lib/python3/dist-packages" \
	test -f "$D2/usr/lib/python3/dist-packages/capbroker/__init__.py"
t_is "/usr/lib/python3/dist-packages is on the system python3's own path" \
	"$(env -u PYTHONPATH "$PYTHON" -S -c 'import site, sys; site.main(); print("/usr/lib/python3/dist-packages" in sys.path)')" True
t_is "the system python3 imports the installed package (version, from DESTDIR)" \
	"$(cd / && PYTHONPATH="$D2/usr/lib/python3/dist-packages" "$PYTHON" -c \
	'import capbroker; print(capbroker.__version__, capbroker.__file__)')" \
	"$(pc --modversion) $D2/usr/lib/python3/dist-packages/capbroker/__init__.py"
t_done
