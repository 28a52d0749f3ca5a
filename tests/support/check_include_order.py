#!/usr/bin/env python3
"""Checks the direction of includes inside core/ (docs/developing.md, Layout).

core/ is arranged in folders by concern, in one order:

    io → config → text → data → model → decode → analysis → optim → persist → train → session

and these rules hold:
  1. every source file of core/ lives in one of those folders;
  2. a file includes core headers of its own folder or of folders before it;
  3. no units include each other in a cycle (a unit is a header and the sources
     named after it: x.hpp, x.cpp and its private half x_internal.hpp; its edges
     are the core headers any of them includes);
  4. a private header (NAME_internal.hpp) is included only by files of its own folder;
     outside core/ (app/, ui/, tests/) no file includes one.

Usage: check_include_order.py [--root DIR]   exit 0 when the rules hold, 1 with a
line per violation otherwise.  --self-test builds small trees that break each
rule in a temporary folder and checks that each is caught (so the check above
cannot pass by reading nothing).
"""
import argparse
import os
import re
import sys
import tempfile

ORDER = ["io", "config", "text", "data", "model", "decode", "analysis", "optim", "persist", "train", "session"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"core/([^"]+)"', re.M)
SOURCES = (".hpp", ".cpp", ".h")


def unit_of(path):
    """core-relative path -> unit name: folder/stem. x.hpp, x.cpp and the private
    half x_internal.hpp are one unit."""
    folder, name = path.split("/", 1) if "/" in path else ("", path)
    stem = os.path.splitext(name)[0]
    if stem.endswith("_internal"):
        stem = stem[: -len("_internal")]
    return folder + "/" + stem


def read_includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # Includes inside comments do not count: drop // comments and /* */ blocks.
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return INCLUDE.findall(text)


def strongly_connected(graph):
    """Tarjan's algorithm; returns the components with more than one unit."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(root):
    problems = []
    core = os.path.join(root, "core")
    rank = {name: i for i, name in enumerate(ORDER)}
    graph = {}
    files = 0
    for dirpath, _, names in os.walk(core):
        for name in sorted(names):
            if not name.endswith(SOURCES):
                continue
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, core).replace(os.sep, "/")
            files += 1
            folder = rel.split("/")[0] if "/" in rel else ""
            if folder not in rank or rel.count("/") != 1:
                problems.append(f"core/{rel}: not in one of core's folders ({', '.join(ORDER)})")
                continue
            unit = unit_of(rel)
            graph.setdefault(unit, set())
            for inc in read_includes(full):
                inc_folder = inc.split("/")[0] if "/" in inc else ""
                if inc_folder not in rank:
                    problems.append(f"core/{rel}: includes core/{inc}, which is in no folder of core")
                    continue
                if rank[inc_folder] > rank[folder]:
                    problems.append(f"core/{rel}: includes core/{inc}, but {inc_folder}/ comes after {folder}/ "
                                    f"({' → '.join(ORDER)})")
                if inc.endswith("_internal.hpp") and inc_folder != folder:
                    problems.append(f"core/{rel}: includes core/{inc}, private to {inc_folder}/")
                target = unit_of(inc)
                if target != unit:
                    graph[unit].add(target)
    for comp in strongly_connected(graph):
        problems.append("include cycle between units: " + " ↔ ".join(comp))
    for outside in ("app", "ui", "tests"):
        for dirpath, _, names in os.walk(os.path.join(root, outside)):
            for name in names:
                if not name.endswith(SOURCES):
                    continue
                full = os.path.join(dirpath, name)
                for inc in read_includes(full):
                    if inc.endswith("_internal.hpp"):
                        problems.append(f"{os.path.relpath(full, root)}: includes core/{inc}, private to core")
    return files, problems


def self_test():
    cases = {
        "a later folder": {"core/io/a.hpp": '#include "core/text/b.hpp"\n', "core/text/b.hpp": ""},
        "a cycle": {"core/text/a.hpp": '#include "core/text/b.hpp"\n',
                    "core/text/b.cpp": '#include "core/text/a.hpp"\n', "core/text/b.hpp": ""},
        "a private header from another folder": {"core/text/a_internal.hpp": "",
                                                  "core/data/c.cpp": '#include "core/text/a_internal.hpp"\n'},
        "a private header outside core": {"core/text/a_internal.hpp": "",
                                          "ui/W.cpp": '#include "core/text/a_internal.hpp"\n'},
        "a file outside the folders": {"core/stray.cpp": ""},
    }
    good = {"core/io/a.hpp": "", "core/text/b.hpp": '#include "core/io/a.hpp"\n// #include "core/session/s.hpp"\n',
            "core/text/b.cpp": '#include "core/text/b.hpp"\n#include "core/text/b_internal.hpp"\n',
            "core/text/b_internal.hpp": '#include "core/text/b.hpp"\n#include "core/io/a.hpp"\n'}
    failures = 0
    for label, tree in list(cases.items()) + [("a tree that keeps the rules", good)]:
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in tree.items():
                path = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            _, problems = check(tmp)
            expect_ok = tree is good
            if bool(problems) == expect_ok:
                failures += 1
                print(f"self-test: {label}: {'unexpected ' + str(problems) if expect_ok else 'not caught'}")
            else:
                print(f"self-test: {label}: {'passes' if expect_ok else 'caught: ' + problems[0]}")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return 1 if self_test() else 0
    files, problems = check(os.path.abspath(args.root))
    if files == 0:
        print(f"no source files under {args.root}/core")
        return 1
    for p in problems:
        print(p)
    print(f"{files} files in {len(ORDER)} folders: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
