#!/usr/bin/env python3
"""Checks the direction of includes inside core/ (docs/developing.md, Layout).

core/ is arranged in folders by concern, in one order:

    io → hub → config → text → data → model → decode → analysis → optim → persist → train → session

and these rules hold:
  1. every source file of core/ lives in one of those folders;
  2. a file includes core headers of its own folder or of folders before it;
  3. no units include each other in a cycle (a unit is a header and the sources
     named after it: x.hpp, x.cpp and its private half x_internal.hpp; its edges
     are the core headers any of them includes);
  4. a private header (NAME_internal.hpp) is included only by files of its own folder;
     outside core/ (app/, ui/, tests/) no file includes one.

With --ui it checks ui/ instead, whose folders have an order of their own:

    common → heatmap → training → analysis → translate → compare → window → tools

  1. every source file of ui/ lives in one of those folders;
  2. a file includes ui headers of its own folder or of folders before it;
  3. no units include each other in a cycle (a unit is a class's header and the
     files of its folder named after it: LossChart.hpp, LossChart.cpp,
     LossChartExport.cpp and its private LossChartRun.hpp);
  4. no file of core/ includes a ui header (core is Qt-free).

Usage: check_include_order.py [--ui] [--root DIR]   exit 0 when the rules hold, 1
with a line per violation otherwise.  --self-test builds small trees that break
each rule in a temporary folder and checks that each is caught (so the check above
cannot pass by reading nothing); with --ui, the ui rules'.
"""
import argparse
import os
import re
import sys
import tempfile

ORDER = ["io", "hub", "config", "text", "data", "model", "decode", "analysis", "optim", "persist", "train", "session"]
UI_ORDER = ["common", "heatmap", "training", "analysis", "translate", "compare", "window", "tools"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"core/([^"]+)"', re.M)
UI_INCLUDE = re.compile(r'^\s*#\s*include\s+"ui/([^"]+)"', re.M)
SOURCES = (".hpp", ".cpp", ".h")


def unit_of(path):
    """core-relative path -> unit name: folder/stem. x.hpp, x.cpp and the private
    half x_internal.hpp are one unit."""
    folder, name = path.split("/", 1) if "/" in path else ("", path)
    stem = os.path.splitext(name)[0]
    if stem.endswith("_internal"):
        stem = stem[: -len("_internal")]
    return folder + "/" + stem


def read_includes(path, pattern=INCLUDE):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # Includes inside comments do not count: drop // comments and /* */ blocks.
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return pattern.findall(text)


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


def ui_unit_of(path, headers):
    """ui-relative path -> unit name: folder/Class, where Class is the longest stem of a
    header in the same folder that the file's stem starts with, followed by a capital or
    nothing (LossChartExport.cpp and LossChartRun.hpp belong to LossChart; MapSelector
    does not belong to Map)."""
    folder, name = path.split("/", 1) if "/" in path else ("", path)
    stem = os.path.splitext(name)[0]
    best = stem
    for h in headers.get(folder, ()):
        if stem != h and stem.startswith(h) and stem[len(h)].isupper():
            if best == stem or len(h) > len(best):
                best = h
    return folder + "/" + best


def check_ui(root):
    problems = []
    ui = os.path.join(root, "ui")
    rank = {name: i for i, name in enumerate(UI_ORDER)}
    found = []
    for dirpath, _, names in os.walk(ui):
        for name in sorted(names):
            if name.endswith(SOURCES):
                found.append(os.path.relpath(os.path.join(dirpath, name), ui).replace(os.sep, "/"))
    headers = {}
    for rel in found:
        if rel.count("/") == 1 and rel.endswith((".hpp", ".h")):
            folder, name = rel.split("/")
            headers.setdefault(folder, set()).add(os.path.splitext(name)[0])
    graph = {}
    for rel in found:
        folder = rel.split("/")[0] if "/" in rel else ""
        if folder not in rank or rel.count("/") != 1:
            problems.append(f"ui/{rel}: not in one of ui's folders ({', '.join(UI_ORDER)})")
            continue
        unit = ui_unit_of(rel, headers)
        graph.setdefault(unit, set())
        for inc in read_includes(os.path.join(ui, rel), UI_INCLUDE):
            inc_folder = inc.split("/")[0] if "/" in inc else ""
            if inc_folder not in rank or inc.count("/") != 1:
                problems.append(f"ui/{rel}: includes ui/{inc}, which is in no folder of ui")
                continue
            if rank[inc_folder] > rank[folder]:
                problems.append(f"ui/{rel}: includes ui/{inc}, but {inc_folder}/ comes after {folder}/ "
                                f"({' → '.join(UI_ORDER)})")
            target = ui_unit_of(inc, headers)
            if target != unit:
                graph[unit].add(target)
    for comp in strongly_connected(graph):
        problems.append("include cycle between units: " + " ↔ ".join(comp))
    for dirpath, _, names in os.walk(os.path.join(root, "core")):
        for name in names:
            if not name.endswith(SOURCES):
                continue
            full = os.path.join(dirpath, name)
            for inc in read_includes(full, UI_INCLUDE):
                problems.append(f"{os.path.relpath(full, root)}: includes ui/{inc}, but core is Qt-free")
    return len(found), problems


def run_self_test(cases, good, check_fn):
    failures = 0
    for label, tree in list(cases.items()) + [("a tree that keeps the rules", good)]:
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in tree.items():
                path = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            _, problems = check_fn(tmp)
            expect_ok = tree is good
            if bool(problems) == expect_ok:
                failures += 1
                print(f"self-test: {label}: {'unexpected ' + str(problems) if expect_ok else 'not caught'}")
            else:
                print(f"self-test: {label}: {'passes' if expect_ok else 'caught: ' + problems[0]}")
    return failures


def ui_self_test():
    cases = {
        "a later folder": {"ui/common/Format.hpp": '#include "ui/heatmap/HeatmapWidget.hpp"\n',
                           "ui/heatmap/HeatmapWidget.hpp": ""},
        "the window from a view": {"ui/translate/TranslatePanel.cpp": '#include "ui/window/MainWindow.hpp"\n',
                                   "ui/window/MainWindow.hpp": ""},
        "a cycle": {"ui/heatmap/A.hpp": '#include "ui/heatmap/B.hpp"\n',
                    "ui/heatmap/BPaint.cpp": '#include "ui/heatmap/A.hpp"\n', "ui/heatmap/B.hpp": ""},
        "a file outside the folders": {"ui/Stray.cpp": ""},
        "a file in a folder of no order": {"ui/misc/Stray.cpp": ""},
        "an include of a header at ui's top": {"ui/window/W.cpp": '#include "ui/Format.hpp"\n'},
        "a ui header in core": {"core/io/a.hpp": '#include "ui/common/Format.hpp"\n',
                                "ui/common/Format.hpp": ""},
    }
    # The rules kept: an earlier folder, a commented-out later one, and a class's
    # private half that includes its header back (LossChart and LossChartRun: one unit).
    good = {"ui/common/Format.hpp": "",
            "ui/training/LossChart.hpp": '#include "ui/common/Format.hpp"\n// #include "ui/window/MainWindow.hpp"\n',
            "ui/training/LossChartRun.hpp": '#include "ui/training/LossChart.hpp"\n',
            "ui/training/LossChart.cpp": '#include "ui/training/LossChart.hpp"\n#include "ui/training/LossChartRun.hpp"\n',
            "ui/window/MainWindow.cpp": '#include "ui/training/LossChart.hpp"\n',
            "ui/tools/Soak.cpp": '#include "ui/window/MainWindow.hpp"\n', "ui/window/MainWindow.hpp": ""}
    return run_self_test(cases, good, check_ui)


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
    return run_self_test(cases, good, check)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--ui", action="store_true", help="check ui/ (its folders' order) instead of core/")
    args = parser.parse_args()
    if args.self_test:
        return 1 if (ui_self_test() if args.ui else self_test()) else 0
    top, order = ("ui", UI_ORDER) if args.ui else ("core", ORDER)
    files, problems = (check_ui if args.ui else check)(os.path.abspath(args.root))
    if files == 0:
        print(f"no source files under {args.root}/{top}")
        return 1
    for p in problems:
        print(p)
    print(f"{files} files in {len(order)} folders: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
