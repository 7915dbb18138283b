#!/usr/bin/python3
"""module-cycles.py [ROOT] - fail on an include cycle between modules.

A module is a top-level directory of ROOT (default: the current directory)
that has a module.mk.  Module A needs module B when a .c or .h file under A
has `#include "B/..."`.  Lower layers must never call upward (STYLE.md), so
this graph must have no cycle: a cycle is printed as `a -> b -> a` and the
exit status is 1.  With -v the graph is printed as well.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"', re.M)


def modules(root):
    return sorted(d for d in os.listdir(root)
                  if os.path.isfile(os.path.join(root, d, "module.mk")))


def graph(root):
    mods = modules(root)
    edges = {m: set() for m in mods}
    for m in mods:
        for top, _, files in os.walk(os.path.join(root, m)):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                with open(os.path.join(top, f), encoding="utf-8", errors="replace") as fh:
                    for dep in INCLUDE.findall(fh.read()):
                        if dep != m and dep in edges:
                            edges[m].add(dep)
    return edges


def cycles(edges):
    """Each cycle once, as a list of modules starting at its least name."""
    found = set()
    state = {}
    path = []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for d in sorted(edges[m]):
            if state.get(d) == "open":
                c = path[path.index(d):]
                i = c.index(min(c))
                found.add(tuple(c[i:] + c[:i]))
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)
    return sorted(found)


def main(argv):
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    root = args[0] if args else "."
    edges = graph(root)
    if not edges:
        print("module-cycles: no modules (module.mk) under %s" % root, file=sys.stderr)
        return 2
    if verbose:
        for m in sorted(edges):
            print("%s -> %s" % (m, " ".join(sorted(edges[m])) or "(nothing)"))
    found = cycles(edges)
    for c in found:
        print("include cycle: %s" % " -> ".join(list(c) + [c[0]]))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
