#!/usr/bin/python3
"""fn-length.py [-n MAX] [ROOT] - fail on a product function longer than MAX lines.

STYLE.md wants functions that fit in the head; issue 13 set the bound at 100
lines for product code, and parallel work kept growing functions past it.
Product code is every .c file of a module (a top-level directory of ROOT,
default the current directory, with a module.mk).  The house style puts a
function's name at the start of its line, after its type on the line above,
and its closing brace alone in column 0: that is all this needs to find one.
A function's length is the number of lines after its name's, up to and
including its closing brace.
Prints `LINES FILE FUNCTION` for each function over MAX; exit status 1 if any.
"""
import os
import re
import sys

START = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)\(')


def long_functions(root, limit):
    out = []
    for m in sorted(os.listdir(root)):
        if not os.path.isfile(os.path.join(root, m, "module.mk")):
            continue
        for top, _, files in os.walk(os.path.join(root, m)):
            for f in sorted(files):
                if not f.endswith(".c"):
                    continue
                path = os.path.join(top, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().split("\n")
                start = name = None
                for i, line in enumerate(lines):
                    mt = START.match(line)
                    if mt and start is None:
                        start, name = i, mt.group(1)
                    elif line == "}" and start is not None:
                        if i - start > limit:
                            out.append((i - start, os.path.relpath(path, root), name))
                        start = None
    return sorted(out, reverse=True)


def main(argv):
    limit = 100
    if len(argv) > 1 and argv[0] == "-n":
        limit = int(argv[1])
        argv = argv[2:]
    root = argv[0] if argv else "."
    found = long_functions(root, limit)
    for n, path, name in found:
        print(f"{n} {path} {name}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
