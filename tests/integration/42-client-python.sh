#!/usr/bin/env bash
# 42-client-python.sh - the Python client module (client/python/capbroker)
# against the fake broker, in-process: tests/integration/client_py_test.py
# prints one TAP line per test case.
set -u
: "${PYTHON:=/usr/bin/python3}"
here=$(cd "$(dirname "$0")" && pwd)
if ! "$PYTHON" -c 'import msgpack' 2>/dev/null; then
	echo "ok 1 - python client # SKIP python3-msgpack is not installed"
	echo "1..1"
	exit 0
fi
exec "$PYTHON" "$here/client_py_test.py"
