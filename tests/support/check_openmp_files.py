#!/usr/bin/env python3
"""Checks that every source file calling at::parallel_for is compiled with OpenMP.

at::parallel_for is a header template (ATen/ParallelOpenMP.h): its loop runs on LibTorch's
OpenMP threads only where the calling file is compiled with OpenMP's flags, and runs serially,
silently, everywhere else. core/CMakeLists.txt compiles the files that call it apart
(ATTNVIZ_OPENMP_FILES, the object library attnviz_core_omp); a file that calls it and is not in
that list loses its threads without a sign (inference_precision.cpp did: opening an int8 model
packed its weights one at a time).

It reads the build folder's compile_commands.json: a command with -fopenmp compiles its file
with OpenMP, and a unity batch's command (Unity/unity_N_cxx.cxx) every source that batch includes.
Then it reads the .cpp files under core/, app/ and ui/ of the source folder and reports each one
whose code (comments, literals and preprocessor lines aside: check_unity_names.strip_code) calls parallel_for but that no OpenMP command compiles.
A build without OpenMP (no command has -fopenmp: clang, or ATTNVIZ_OPENMP off) runs every loop
serially by choice: nothing to report. Headers are not read (a template in one runs where it is
instantiated).

Usage: check_openmp_files.py BUILD_DIR --root SOURCE_DIR   exit 0 when none is missing, 1 with a
line per file otherwise. --self-test writes a small build and source folder in a temporary
folder and checks what is reported.
"""
import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_unity_names import UNITY_FILE, strip_code, unity_includes  # noqa: E402

CALL = re.compile(r"\bparallel_for\s*\(")


def openmp_sources(build):
    """Real paths of the sources compiled with OpenMP; None when no command has it."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    found, any_openmp = set(), False
    for c in commands:
        words = c.get("command") or " ".join(c.get("arguments", []))
        if not re.search(r"(^|\s)-fopenmp(\s|$)", words):
            continue
        any_openmp = True
        path = c["file"] if os.path.isabs(c["file"]) else os.path.join(c.get("directory", build), c["file"])
        if UNITY_FILE.search(path):
            found.update(os.path.realpath(p) for p in unity_includes(path))
        else:
            found.add(os.path.realpath(path))
    return found if any_openmp else None


def missing(build, root):
    compiled = openmp_sources(build)
    if compiled is None:
        return []
    out = []
    for folder in ("core", "app", "ui"):
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith(".cpp"):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    if not CALL.search(strip_code(f.read())):
                        continue
                if os.path.realpath(path) not in compiled:
                    out.append(f"{os.path.relpath(path, root)} calls at::parallel_for but is not compiled with OpenMP: "
                               "its loops run serially (add it to ATTNVIZ_OPENMP_FILES in core/CMakeLists.txt)")
    return sorted(out)


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root, build = os.path.join(tmp, "src"), os.path.join(tmp, "build")
        os.makedirs(os.path.join(root, "core", "model"))
        os.makedirs(os.path.join(build, "core", "CMakeFiles", "omp.dir", "Unity"))
        files = {
            "core/model/batched.cpp": "void f() { at::parallel_for(0, 4, 1, [](int64_t, int64_t) {}); }\n",
            "core/model/alone.cpp": "void g() { at::parallel_for (0, 4, 1, [](int64_t, int64_t) {}); }\n",
            "core/model/missed.cpp": "void h() {\n    at::parallel_for(0, 4, 1, [](int64_t, int64_t) {});\n}\n",
            "core/model/comment.cpp": "// at::parallel_for(0, n, 1, f) would split this\n"
                                      "/* parallel_for( */ const char* s = \"parallel_for(\";\n",
            "core/model/plain.cpp": "int k() { return 1; }\n",
        }
        for rel, text in files.items():
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        unity = os.path.join(build, "core", "CMakeFiles", "omp.dir", "Unity", "unity_0_cxx.cxx")
        with open(unity, "w") as f:
            f.write(f'/* generated */\n#include "{os.path.join(root, "core/model/batched.cpp")}"\n')
        commands = [
            {"directory": build, "file": unity, "command": "g++ -O2 -fopenmp -c " + unity},
            {"directory": build, "file": os.path.join(root, "core/model/alone.cpp"),
             "command": "g++ -fopenmp -O2 -c alone.cpp"},
            {"directory": build, "file": os.path.join(root, "core/model/missed.cpp"), "command": "g++ -O2 -c missed.cpp"},
            {"directory": build, "file": os.path.join(root, "core/model/comment.cpp"), "command": "g++ -O2 -c comment.cpp"},
            {"directory": build, "file": os.path.join(root, "core/model/plain.cpp"), "command": "g++ -O2 -c plain.cpp"},
        ]
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump(commands, f)
        got = missing(build, root)
        ok = len(got) == 1 and got[0].startswith("core/model/missed.cpp calls at::parallel_for")
        # A build without OpenMP anywhere: every loop serial by choice, nothing reported.
        for c in commands:
            c["command"] = c["command"].replace("-fopenmp", "")
        with open(os.path.join(build, "compile_commands.json"), "w") as f:
            json.dump(commands, f)
        ok = ok and missing(build, root) == []
        print("self-test:", "ok" if ok else f"FAILED: {got}")
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?")
    ap.add_argument("--root")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.build or not args.root:
        ap.error("BUILD_DIR and --root SOURCE_DIR are needed")
    problems = missing(args.build, args.root)
    for p in problems:
        print(p)
    if not problems:
        print("openmp files: every file calling at::parallel_for is compiled with OpenMP")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
