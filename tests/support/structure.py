#!/usr/bin/env python3
"""Two checks of the project's shape (docs/architecture.md, docs/engine.md).

  structure.py calls OBJDIR SRCDIR
      No loop of calls between the engine's files: file A calls (or reads) something
      defined in file B, and B, directly or through others, something defined in A. The
      edges come from the compiled objects (`nm`: what each object defines and what it
      leaves undefined), so a call through a macro or an inline wrapper counts too. An
      object whose source file is gone (a stale build) is ignored.

  structure.py lengths SRCDIR
      No source file of the project (C, JavaScript, Python, shell, SQL, CMake) is over
      1,000 lines. Build folders, node_modules and var/ are not the project's.

Each names every file (or every loop, with the calls that close it) it fails on and exits
1; 0 when the shape holds.
"""
import os
import subprocess
import sys

MAX_LINES = 1000
SOURCE_EXT = ('.c', '.h', '.js', '.mjs', '.py', '.sh', '.sql', '.cmake')
SKIP_DIRS = {'.git', 'node_modules', 'var', 'artifacts', '__pycache__'}


def symbols(obj):
    """(defined, undefined) external symbols of one object file."""
    out = subprocess.run(['nm', obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBRCG':
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == 'U':
            undefined.add(parts[1])
    return defined, undefined


def call_graph(objdir, srcdir):
    """{file: {other file: [symbols]}} for the engine's objects in objdir."""
    files = {}
    for name in sorted(os.listdir(objdir)):
        if not name.endswith('.c.o'):
            continue
        src = name[:-2]  # x.c.o -> x.c
        if not os.path.exists(os.path.join(srcdir, src)):
            continue
        files[src] = symbols(os.path.join(objdir, name))
    owner = {}
    for f, (defined, _) in files.items():
        for s in defined:
            owner[s] = f
    graph = {f: {} for f in files}
    for f, (_, undefined) in files.items():
        for s in undefined:
            o = owner.get(s)
            if o is not None and o != f:
                graph[f].setdefault(o, []).append(s)
    return graph


def loops(graph):
    """The strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check_calls(objdir, srcdir):
    graph = call_graph(objdir, srcdir)
    if not graph:
        print(f'structure: no engine objects in {objdir}', file=sys.stderr)
        return 1
    found = loops(graph)
    for comp in found:
        print('engine files that call each other in a loop: ' + ', '.join(comp))
        for a in comp:
            for b in sorted(graph[a]):
                if b in comp:
                    print(f'  {a} -> {b}: {", ".join(sorted(graph[a][b])[:4])}')
    if not found:
        print(f'structure: {len(graph)} engine files, no loop of calls')
    return 1 if found else 0


def check_lengths(srcdir):
    long_files = []
    for dirpath, dirnames, filenames in os.walk(srcdir):
        dirnames[:] = [d for d in dirnames
                       if d not in SKIP_DIRS and not d.startswith('build')]
        for name in filenames:
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(dirpath, name)
            with open(path, 'rb') as f:
                n = sum(1 for _ in f)
            if n > MAX_LINES:
                long_files.append((os.path.relpath(path, srcdir), n))
    for path, n in sorted(long_files):
        print(f'{path}: {n} lines (at most {MAX_LINES})')
    if not long_files:
        print(f'structure: no source file over {MAX_LINES} lines')
    return 1 if long_files else 0


def main(argv):
    if len(argv) == 4 and argv[1] == 'calls':
        return check_calls(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == 'lengths':
        return check_lengths(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
