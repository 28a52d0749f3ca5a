#!/usr/bin/env python3
"""Checks that the unity build (tools/build_speed.cmake) cannot meet two files' private names.

A unity build compiles a target's sources in batches: one generated file includes
several .cpp files, one after the other. Names that are private to a file -- declared
in an unnamed namespace, `static` at namespace scope, or `const`/`constexpr` variables
at namespace scope -- then share one translation unit, and two files of a target that
define the same one fail ("redefinition of ...") or, worse, an overload of one is
called in the other. Which files share a batch depends on the order of the sources and
the batch size, so a clash that compiles today breaks the build when a file is added.
Hence this check looks at all the files of a target that go into its batches, not only
at those that share one now.

It reads the build folder's compile_commands.json, finds each target's generated
Unity/unity_N_cxx.cxx files and the sources they include, and reports a private name
declared in two of them, keyed by the named namespaces around it. Files listed with
SKIP_UNITY_BUILD_INCLUSION compile on their own and are not read. Not a clash: two
functions of one name that no call can confuse (overloads whose parameter types differ
for every number of arguments both take, default arguments counted), and two identical
alias declarations (`using json = nlohmann::json;`) or using-declarations.

The parser is a small scanner, not a C++ front end: it strips comments and literals,
follows braces, and takes a name from each declaration at namespace scope. It errs
towards reporting.

Usage: check_unity_names.py BUILD_DIR [--root SOURCE_DIR]   exit 0 when no target has a
clash (or the build has no unity batches), 1 with a line per clash otherwise.
--self-test writes a small build folder with clashes and non-clashes of each kind in a
temporary folder and checks what is reported.
"""
import argparse
import json
import os
import re
import sys
import tempfile

KEYWORDS = {"const", "constexpr", "static", "inline", "unsigned", "signed", "int", "long", "short", "char",
            "bool", "float", "double", "void", "auto", "size_t", "volatile", "mutable", "typename", "struct",
            "class", "enum", "noexcept", "override", "final", "thread_local", "extern", "operator"}
IDENT = re.compile(r"[A-Za-z_]\w*")


def strip_code(text):
    """Comments, string and character literals and preprocessor lines -> blanks."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            i = n if end < 0 else end + len(m.group(1) if m else "") + 2
            out.append('""')
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n" or text[:i].rstrip(" \t").endswith("\n")):
            # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                i += 2 if text[i] == "\\" else 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_level(s, chars):
    """Index of the first of chars in s outside (), [], <> of templates; -1 if none."""
    depth = 0
    for i, c in enumerate(s):
        if depth == 0 and c in chars:
            return i
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
    return -1


def parameter_types(params):
    """'const std::string& s, int n = 3' -> 'const std::string&,int=' (names dropped; a
    parameter with a default value ends in '=')."""
    types, depth, cur = [], 0, ""
    for c in params + ",":
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        if c == "," and depth == 0:
            p = cur.split("=")[0].strip()
            words = IDENT.findall(p)
            if len(words) > 1 and words[-1] not in KEYWORDS and re.search(r"\b" + words[-1] + r"\s*(\[[^\]]*\])?$", p):
                p = p[: p.rfind(words[-1])]
            p = re.sub(r"\s+", "", p)
            if p and p != "void":
                types.append(p + ("=" if "=" in cur else ""))
            cur = ""
        else:
            cur += c
    return ",".join(types)


def callable_alike(a, b):
    """Whether two parameter lists (parameter_types) accept one argument list: some number of
    arguments both take, with the same types for those -- a call would be ambiguous."""
    pa, pb = [t for t in a.split(",") if t], [t for t in b.split(",") if t]
    least = lambda p: sum(1 for t in p if not t.endswith("="))
    for n in range(max(least(pa), least(pb)), min(len(pa), len(pb)) + 1):
        if [t.rstrip("=") for t in pa[:n]] == [t.rstrip("=") for t in pb[:n]]:
            return True
    return False


def without_gnu_attributes(s):
    """s without its __attribute__((...)) (a function's target("avx2") names nothing)."""
    while True:
        at = s.find("__attribute__")
        if at < 0:
            return s
        open_at = s.find("(", at)
        if open_at < 0:
            return s
        close = open_at + 1 + top_level(s[open_at + 1:], ")")
        if close <= open_at:
            return s
        s = (s[:at] + s[close + 1:]).strip()


def declaration(stmt, internal):
    """A statement at namespace scope -> (name, kind, detail) or None.
    internal: whether the scope is an unnamed namespace (everything is private there)."""
    s = without_gnu_attributes(" ".join(stmt.split()))
    if not s or s.startswith(("using namespace", "namespace", "extern", "friend", "static_assert", "template class")):
        return None
    s = re.sub(r"^template\s*<.*?>\s*(?=[A-Za-z_])", "", s)
    is_static = re.match(r"^(\[\[[^\]]*\]\]\s*)*static\b", s) is not None
    m = re.match(r"^using\s+(\w+)\s*=", s)
    if m:
        return (m.group(1), "alias", s) if internal else None
    m = re.match(r"^using\s+(?:typename\s+)?([\w:]*::(\w+))$", s)
    if m:  # a using-declaration: the same one twice is fine, beside a definition it is not
        return (m.group(2), "using", m.group(1))
    m = re.match(r"^(?:\[\[[^\]]*\]\]\s*)*(?:struct|class|union|enum(?:\s+class|\s+struct)?)\s+(?:\[\[[^\]]*\]\]\s*)?(\w+)\s*(?::[^;]*)?$", s)
    if m:
        return (m.group(1), "type", s) if internal else None
    paren, assign = top_level(s, "("), top_level(s, "={[")
    if paren >= 0 and (assign < 0 or paren < assign):
        words = IDENT.findall(s[:paren])
        if not words or words[-1] in KEYWORDS or "operator" in s[:paren]:
            return None
        if not (internal or is_static):
            return None
        close = paren + 1 + top_level(s[paren + 1:], ")")
        return (words[-1], "function", parameter_types(s[paren + 1:close]))
    head = s if assign < 0 else s[:assign]
    words = IDENT.findall(head)
    if not words or words[-1] in KEYWORDS or len(words) < 2:
        return None
    const = re.search(r"\b(const|constexpr)\b", head) and not re.search(r"\binline\b", head)
    if internal or is_static or const:
        return (words[-1], "variable", s)
    return None


def private_names(path):
    """[(scope, name, kind, detail)] of one source file's private names."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_code(f.read())
    found = []
    stack = []  # one entry per open brace: ("ns", name; None when unnamed) or ("block", ...)
    stmt = ""
    i = 0
    while i < len(text):
        c = text[i]
        in_ns = all(kind == "ns" for kind, _ in stack)
        if c == "{" and in_ns and stmt.count("(") > stmt.count(")"):
            end = matching_brace(text, i)  # braces inside parentheses: a default argument's {}
            stmt += text[i:end + 1]
            i = end + 1
            continue
        if c == "{":
            if in_ns:
                s = " ".join(stmt.split())
                m = re.match(r"^(inline\s+)?namespace(\s+[\w:]+)?$", s)
                internal = any(name is None for kind, name in stack)
                if m:
                    name = m.group(2).strip() if m.group(2) else None
                    if name and internal:  # a named namespace inside an unnamed one is a private name
                        found.append((scope_of(stack), name, "namespace", ""))
                    stack.append(("ns", name))
                else:
                    if s.startswith('extern ""'):  # extern "C" { ... }: a linkage block, no scope
                        stack.append(("ns", ""))
                        stmt = ""
                        i += 1
                        continue
                    d = declaration(s, internal)
                    if d:
                        found.append((scope_of(stack),) + d)
                    enum = re.match(r"^enum\s+(?!class|struct)", s)
                    stack.append(("block", "enum" if enum and internal else None))
                    if enum and internal:  # an unscoped enum's enumerators are names of the scope
                        end = matching_brace(text, i)
                        for e in text[i + 1:end].split(","):
                            w = IDENT.findall(e.split("=")[0])
                            if w:
                                found.append((scope_of(stack[:-1]), w[0], "enumerator", ""))
                stmt = ""
            else:
                stack.append(("block", None))
        elif c == "}":
            if stack:
                stack.pop()
            stmt = ""
        elif c == ";":
            if in_ns:
                internal = any(name is None for kind, name in stack)
                d = declaration(stmt, internal)
                if d:
                    found.append((scope_of(stack),) + d)
            stmt = ""
        elif in_ns:
            stmt += c
        i += 1
    return found


def matching_brace(text, i):
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def scope_of(stack):
    return "::".join(name for kind, name in stack if kind == "ns" and name)


UNITY_FILE = re.compile(r"([^/]+)\.dir/Unity/unity_\d+_cxx\.cxx$")


def unity_includes(path):
    """The source paths a generated Unity/unity_N_cxx.cxx file includes, in order."""
    with open(path) as f:
        return [inc.group(1) for inc in (re.match(r'\s*#include "(.*)"', line) for line in f) if inc]


def unity_sources(build):
    """target -> [source paths] included by its Unity/*.cxx files."""
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    targets = {}
    for c in commands:
        path = c["file"]
        if not UNITY_FILE.search(path):
            continue
        rel_target = os.path.relpath(path, build).split(".dir/")[0]
        targets.setdefault(rel_target, []).extend(unity_includes(path))
    return targets


def clashes(build, root=None):
    out = []
    for target, files in sorted(unity_sources(build).items()):
        seen = {}
        for path in files:
            for scope, name, kind, detail in private_names(path):
                seen.setdefault((scope, name), []).append((path, kind, detail))
        for (scope, name), decls in sorted(seen.items()):
            by_file = {}
            for path, kind, detail in decls:
                by_file.setdefault(path, (kind, detail))
            if len(by_file) < 2:
                continue
            kinds = {k for k, _ in by_file.values()}
            details = [d for _, d in by_file.values()]
            if kinds == {"function"} and not any(
                    callable_alike(x, y) for i, x in enumerate(details) for y in details[i + 1:]):
                continue  # overloads that no call can confuse
            if kinds <= {"alias", "using"} and len(kinds) == 1 and len(set(details)) == 1:
                continue  # the same alias or using-declaration twice
            where = " ".join(os.path.relpath(p, root) if root else p for p in by_file)
            qualified = (scope + "::" if scope else "") + name
            out.append(f"{target}: '{qualified}' is private to each of {where}")
    return out


def self_test():
    cases = {
        # file name -> (source, in a batch)
        "a.cpp": ("namespace {\nint helper(int x) { return x; }\nstruct Fixture { int v; };\n"
                  "constexpr char k_alphabet[] = \"ab\";\nusing json = int;\nenum Input { i_a, i_b };\n"
                  "void over(const std::string& s) {}\nnamespace field { int x; }\n"
                  "std::string refusal(const std::string& b) { return b; }\nint scaled(int v) { return v; }\n}\n"
                  "namespace attnviz {\nstatic int counter = 0;\nconst int k_limit = 3;\n"
                  "int public_function(int x) { return x; }\n}\n", True),
        "b.cpp": ("// namespace { int helper(int y); } in a comment\n#include <x>\nnamespace {\n"
                  "int helper(int y) { return y; }\nstruct Fixture { double w; };\n"
                  "const char* const k_alphabet = \"{\";\nusing json = int;\nenum class Kind { i_a };\n"
                  "void over(std::ostream& out) {}\ntemplate <typename T>\nT field(const T& v) { return v; }\n}\n"
                  "namespace attnviz {\nstatic int counter = 1;\nint public_function(int x);\nusing torch::Tensor;\n}\n"
                  "namespace {\nusing testing::small_model;\n}\n", True),
        "c.cpp": ("namespace {\nenum Other : int { i_b = 2 };\nint small_model() { return 1; }\n"
                  "std::string refusal(const std::string& bytes, const Limits& limits = {}) { return bytes; }\n"
                  "int scaled(int v, int k) { return v * k; }\n}\n"
                  "namespace attnviz {\nconst int k_limit = 4;\nusing torch::Tensor;\n}\n", True),
        "skipped.cpp": ("namespace {\nint helper(int z) { return z; }\n}\n", False),
    }
    want = {"helper", "Fixture", "k_alphabet", "field", "attnviz::counter", "attnviz::k_limit", "i_b", "small_model",
            "refusal"}
    with tempfile.TemporaryDirectory() as tmp:
        unity_dir = os.path.join(tmp, "lib", "CMakeFiles", "t.dir", "Unity")
        os.makedirs(unity_dir)
        commands = []
        batch = os.path.join(unity_dir, "unity_0_cxx.cxx")
        with open(batch, "w") as u:
            u.write("/* generated by CMake */\n")
            for name, (src, in_batch) in cases.items():
                path = os.path.join(tmp, name)
                with open(path, "w") as f:
                    f.write(src)
                if in_batch:
                    u.write(f'\n#include "{path}"\n')
                else:
                    commands.append({"file": path, "command": "c++ -c " + path})
        commands.append({"file": batch, "command": "c++ -c " + batch})
        with open(os.path.join(tmp, "compile_commands.json"), "w") as f:
            json.dump(commands, f)
        found = clashes(tmp, tmp)
    names = {re.search(r"'([^']*)'", line).group(1) for line in found}
    ok = names == want and not any("skipped.cpp" in line for line in found)
    print("\n".join(found))
    print("self-test:", "ok" if ok else f"FAILED: reported {sorted(names)}, expected {sorted(want)}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?")
    ap.add_argument("--root", help="source folder, to print relative paths")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.build:
        ap.error("BUILD_DIR is required")
    found = clashes(args.build, args.root)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} clash(es): list one file of each pair with SKIP_UNITY_BUILD_INCLUSION in its "
              "CMakeLists.txt (it then compiles on its own), or rename the name in one of them.")
        return 1
    print(f"unity names: no clash in {len(unity_sources(args.build))} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
