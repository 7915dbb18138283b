#!/usr/bin/env bash
# 46-client-python-pip.sh - client/python is a package pip installs into a
# virtual environment (offline: Debian's setuptools, wheel and msgpack stand
# in for PyPI), with its version, its type information and its dependency.
. "$(dirname "$0")/../lib.sh"
# pip builds in the source directory: build from a copy, not the tree.
cp -r "$CB_TOP/client/python" "$T_TMP/src"
t_ok "python3 -m venv --system-site-packages" "$PYTHON" -m venv --system-site-packages "$T_TMP/venv"
t_ok "pip install ./client/python (no network: --no-index --no-build-isolation)" \
	env PIP_DISABLE_PIP_VERSION_CHECK=1 "$T_TMP/venv/bin/pip" install -q --no-index \
	--no-build-isolation "$T_TMP/src"
want=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$CB_TOP/client/python/capbroker/__init__.py")
t_is "pip knows the package, its version and its dependency" \
	"$("$T_TMP/venv/bin/pip" show capbroker 2>/dev/null | sed -n 's/^\(Version\|Requires\): //p' | xargs)" \
	"$want msgpack"
t_is "the venv's python imports it from the venv (capbroker.__version__)" \
	"$(cd / && env -u PYTHONPATH V="$T_TMP/venv" "$T_TMP/venv/bin/python" -c \
	'import capbroker, os; print(capbroker.__version__, capbroker.__file__.startswith(os.environ["V"]))' 2>&1)" \
	"$want True"
t_ok "py.typed is installed (PEP 561: the type hints are for checkers)" \
	sh -c "ls '$T_TMP'/venv/lib/python3*/site-packages/capbroker/py.typed"
t_is "the public API carries type hints" \
	"$(cd / && env -u PYTHONPATH "$T_TMP/venv/bin/python" -c '
import capbroker, inspect
bad = [n for n, f in inspect.getmembers(capbroker.Client, inspect.isfunction)
       if not n.startswith("_") and "return" not in f.__annotations__]
print(bad)')" "[]"
t_ok "pip uninstall removes it again" "$T_TMP/venv/bin/pip" uninstall -q -y capbroker
t_done
