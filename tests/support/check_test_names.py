#!/usr/bin/env python3
"""Checks the Catch2 test names under tests/ for what CTest cannot carry.

catch_discover_tests reads the names a test program lists as a CMake list, so a
name with a ';' becomes two CTest entries that match no Catch test ("No test
cases matched" fails both, and the test itself never runs under CTest). Names
with '[' are read as tags by Catch. This reads every TEST_CASE's name from the
sources (adjacent string literals joined) and fails, naming file and line,
where one has either.

    check_test_names.py --root TESTS_DIR   # check the sources
    check_test_names.py --self-test        # the check catches both, and passes a clean name
"""
import argparse
import pathlib
import re
import sys

CASE = re.compile(r'\b(?:TEST_CASE|SCENARIO|TEST_CASE_METHOD\s*\(\s*\w+\s*,)\s*\(?\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')
LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')


def names(text):
    """(line, name) of every test case in a source text."""
    for m in CASE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        yield line, "".join(LITERAL.findall(m.group(1)))


def problems(path, text):
    out = []
    for line, name in names(text):
        if ";" in name:
            out.append(f"{path}:{line}: test name has a ';' (CTest splits it in two): {name!r}")
        if "[" in name:
            out.append(f"{path}:{line}: test name has a '[' (Catch reads it as a tag): {name!r}")
    return out


def self_test():
    bad = 'TEST_CASE("one; two",\n "[x]") {}\nTEST_CASE("a [b] c", "[x]") {}\n'
    good = 'TEST_CASE("a long name, "\n          "joined over lines", "[x][y]") {}\n'
    found = problems("bad.cpp", bad)
    assert len(found) == 2 and "bad.cpp:1:" in found[0] and "bad.cpp:3:" in found[1], found
    assert problems("good.cpp", good) == [], problems("good.cpp", good)
    assert list(names(good)) == [(1, "a long name, joined over lines")], list(names(good))
    print("self-test passed")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=pathlib.Path, help="the tests folder")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.root:
        ap.error("--root or --self-test")
    found, count = [], 0
    for path in sorted(a.root.rglob("*.cpp")):
        text = path.read_text(encoding="utf-8")
        count += sum(1 for _ in names(text))
        found += problems(path.relative_to(a.root), text)
    for p in found:
        print(p, file=sys.stderr)
    print(f"{count} test names read, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
