#!/usr/bin/env python3
"""Runs the attnviz-cli examples of the README and docs/, and checks their links.

So that the examples a newcomer copies cannot rot, every fenced ```sh, ```bash or
```console block that calls attnviz-cli is run, in the order of its document, in one
temporary folder per document (an example may use the files an earlier one made):

  ```sh        every line is a command (a line ending in '\\' continues; '#' lines are comments)
  ```console   lines starting with '$ ' are commands, the lines after one are its output

Blocks that do not call attnviz-cli (set-up, cmake) are not run; a block without a
language may not hold a command (tag it ```sh to run it, ```text to show it).
The folder looks like a checkout: tests/data and tools are there, attnviz-cli is on
PATH, and ../shared/data/tatoeba-eng-fra-5000.tsv is there when --tatoeba names an
existing file (a block that reads ../shared/ is skipped otherwise). They run with
OMP_NUM_THREADS=1 unless it is set.

A command must exit 0, unless its shown output (console) has an 'attnviz-cli: error:'
line: then it must fail. Every shown line that starts with 'attnviz-cli:' (the CLI's
notes and errors) must be among what it printed on stderr. HTML comments just above a
block say more:

  <!-- example: expect "la voiture rouge" -->   the block's output (stdout and stderr of
                                                its commands) contains this text
  <!-- example: skip (reason) -->              not run (say why: a GPU, a long measurement)
  <!-- example: needs jq -->                   skipped when the program is not installed

Links: every relative link and image of a document must name an existing file, and an
anchor (#section) a heading of the document it points into.

Usage: check_doc_examples.py --cli PATH --root REPO [--tatoeba FILE] [--max-lines N]
                             [--index] FILE.md...
       check_doc_examples.py --self-test --cli PATH
--max-lines N fails a document longer than N lines; --index fails when a file of
docs/ is not linked from the document (the README's index).  Exit 0 when everything
passes, 1 with a line per failure (FILE:LINE: what) otherwise.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

RUN_LANGS = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
DIRECTIVE = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
CALLS_CLI = re.compile(r"(^|[\s|;&(`])(\S*/)?attnviz-cli(?=\s|$|\))")
COMMAND_LINE = re.compile(r"^\s*(\$ )?(\S*/)?attnviz-cli(\s|$)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
TATOEBA_REL = "../shared/data/"
COMMAND_TIMEOUT_S = 300


class Block:
    def __init__(self, line, lang, body, directives):
        self.line, self.lang, self.body, self.directives = line, lang, body, directives
        self.commands = []  # (line, command, shown output lines)

    def parse(self):
        pending, start, current = [], None, None
        for offset, text in enumerate(self.body):
            number = self.line + 1 + offset
            if pending:
                pending.append(text)
            elif self.lang == "console":
                if text.startswith("$ "):
                    pending, start = [text[2:]], number
                elif current is not None:
                    current[2].append(text)
                    continue
                else:
                    continue
            elif text.strip() and not text.lstrip().startswith("#"):
                pending, start = [text], number
            else:
                continue
            if not pending[-1].rstrip().endswith("\\"):
                current = (start, "\n".join(pending), [])
                self.commands.append(current)
                pending = []
        if pending:
            self.commands.append((start, "\n".join(pending), []))

    def calls_cli(self):
        return any(CALLS_CLI.search(command) for _, command, _ in self.commands)


def parse_directives(text):
    """'skip (why)', 'needs jq', 'expect "a" expect "b"' -> dict."""
    out = {"expect": []}
    if text.split(" ", 1)[0] == "skip":  # the reason is prose: apostrophes and all
        out["skip"] = text[4:].strip().strip("()") or "skipped"
        return out
    words = shlex.split(text)
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("expect", "needs") and i + 1 < len(words):
            if word == "expect":
                out["expect"].append(words[i + 1])
            else:
                out.setdefault("needs", []).append(words[i + 1])
            i += 2
            continue
        raise ValueError(f"unknown example directive {word!r} (skip, expect \"TEXT\", needs PROGRAM)")
    return out


def read_document(path, name):
    """(blocks, problems, lines outside code blocks) of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, problems, prose = [], [], []
    directives, directive_line = None, None
    i = 0
    while i < len(lines):
        text = lines[i]
        m = FENCE.match(text)
        d = DIRECTIVE.match(text)
        if d:
            try:
                found = parse_directives(d.group(1))
            except ValueError as e:
                problems.append(f"{name}:{i + 1}: {e}")
                found = {"expect": []}
            if directives is None:
                directives, directive_line = found, i + 1
            else:
                directives["expect"] += found.pop("expect")
                directives.update(found)
            i += 1
            continue
        if not m:
            if text.strip() and directives is not None:
                problems.append(f"{name}:{directive_line}: an example directive must stand just above a code block")
                directives = None
            prose.append((i + 1, text))
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = [line[len(m.group(1)):] if line.startswith(m.group(1)) else line for line in lines[i + 1:j]]
        block = Block(i + 1, lang, body, directives or {"expect": []})
        directives = None
        if lang in RUN_LANGS:
            block.parse()
            if block.calls_cli():
                blocks.append(block)
            elif block.directives.get("expect") or "skip" in block.directives:
                problems.append(f"{name}:{block.line}: example directives on a block that calls no attnviz-cli")
        elif not lang and any(COMMAND_LINE.match(line) for line in body):
            problems.append(f"{name}:{i + 1}: a code block without a language holds an attnviz-cli command: "
                            "tag it ```sh or ```console (run by this check) or ```text (shown only)")
        i = j + 1
    return blocks, problems, prose


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.S | re.M)
    seen, out = {}, set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def check_links(path, name, prose):
    problems, linked = [], set()
    folder = os.path.dirname(os.path.abspath(path))
    for number, text in prose:
        for target in LINK.findall(re.sub(r"`[^`]*`", "", text)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(folder, file_part)) if file_part else os.path.abspath(path)
            if not os.path.exists(full):
                problems.append(f"{name}:{number}: link to a missing file: {target}")
                continue
            linked.add(full)
            if anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append(f"{name}:{number}: link to a missing section: {target}")
    return problems, linked


def prepare_folder(root, cli, tatoeba):
    """A temporary folder that looks like a checkout, with attnviz-cli on PATH."""
    top = tempfile.mkdtemp(prefix="attnviz-doc-")
    work, binary = os.path.join(top, "attnviz"), os.path.join(top, "bin")
    os.makedirs(os.path.join(work, "tests"))
    os.makedirs(binary)
    os.symlink(os.path.abspath(cli), os.path.join(binary, "attnviz-cli"))
    os.symlink(os.path.join(root, "tests", "data"), os.path.join(work, "tests", "data"))
    os.symlink(os.path.join(root, "tools"), os.path.join(work, "tools"))
    if tatoeba and os.path.isfile(tatoeba):
        os.makedirs(os.path.join(top, "shared", "data"))
        os.symlink(os.path.abspath(tatoeba), os.path.join(top, "shared", "data", os.path.basename(tatoeba)))
    env = dict(os.environ, PATH=binary + os.pathsep + os.environ.get("PATH", ""), LC_ALL="C.UTF-8")
    # One thread each: under a parallel ctest on a small machine, LibTorch's spinning OpenMP
    # threads wait for each other and a 15-second example took over 5 minutes.
    env.setdefault("OMP_NUM_THREADS", "1")
    return top, work, env


def normalise(line):
    return " ".join(line.split())


def run_block(block, name, work, env, log):
    """Runs a block's commands; returns the failures."""
    failures, output = [], ""
    for number, command, shown in block.commands:
        claims = [normalise(s) for s in shown if s.startswith("attnviz-cli:")]
        must_fail = any(c.startswith("attnviz-cli: error:") for c in claims)
        started = time.monotonic()
        try:
            done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work, env=env,
                                  capture_output=True, timeout=COMMAND_TIMEOUT_S)
            rc, out, err = done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired:
            rc, out, err = None, "", f"no result after {COMMAND_TIMEOUT_S} s"
        log(f"  {name}:{number}: {time.monotonic() - started:5.1f} s  rc {rc}  {command.splitlines()[0][:90]}")
        output += out + err
        first = command.splitlines()[0]
        if rc is None or (rc != 0) != must_fail:
            said = "failed, exit code %s" % rc if rc != 0 else "succeeded where the document shows an error"
            failures.append(f"{name}:{number}: {first}\n    {said}; its stderr:\n" + indent(err))
            break
        got = [normalise(line) for line in err.splitlines()]
        for claim in claims:
            if not any(claim == g or g.endswith(claim) for g in got):
                failures.append(f"{name}:{number}: {first}\n    printed no line\n      {claim}\n"
                                f"    but:\n" + indent(err))
    for text in block.directives["expect"]:
        if not failures and text not in output:
            failures.append(f"{name}:{block.line}: the block's output lacks the expected text {text!r}; it was:\n"
                            + indent(output))
    return failures


def indent(text, limit=40):
    lines = text.rstrip("\n").splitlines()
    if len(lines) > limit:
        lines = lines[:limit // 2] + ["      ..."] + lines[-limit // 2:]
    return "\n".join("      " + line for line in lines) or "      (nothing)"


def check_document(path, name, cli, root, tatoeba, max_lines=None, index=False, log=print):
    """Returns (failures, counts) for one document."""
    blocks, failures, prose = read_document(path, name)
    counts = {"examples": len(blocks), "run": 0, "skipped": 0, "commands": 0}
    with open(path, encoding="utf-8") as f:
        length = len(f.read().rstrip("\n").split("\n"))
    if max_lines and length > max_lines:
        failures.append(f"{name}: {length} lines, more than {max_lines}: move detail into docs/")
    link_problems, linked = check_links(path, name, prose)
    failures += link_problems
    if index:
        docs = os.path.join(root, "docs")
        for doc in sorted(os.listdir(docs)) if os.path.isdir(docs) else []:
            full = os.path.normpath(os.path.join(docs, doc))
            if doc.endswith(".md") and full not in linked:
                failures.append(f"{name}: docs/{doc} is linked from nowhere here: add it to the index")
    top, work, env = prepare_folder(root, cli, tatoeba)
    try:
        for block in blocks:
            reason = block.directives.get("skip")
            missing = [p for p in block.directives.get("needs", []) if not shutil.which(p)]
            if not reason and missing:
                reason = "needs " + ", ".join(missing)
            if not reason and any(TATOEBA_REL in c for _, c, _ in block.commands) \
                    and not os.path.isdir(os.path.join(top, "shared")):
                reason = "the Tatoeba sample is absent"
            if reason:
                counts["skipped"] += 1
                log(f"  {name}:{block.line}: skipped ({reason})")
                continue
            counts["run"] += 1
            counts["commands"] += len(block.commands)
            failures += run_block(block, name, work, env, log)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return failures, counts


def self_test(cli, root):
    """Each kind of rot this check exists for must fail it, naming the line."""
    top = tempfile.mkdtemp(prefix="attnviz-doc-self-")
    cases = {
        "good": ('<!-- example: expect "toy-french" -->\n```sh\nattnviz-cli tasks\n```\n'
                 "[the other](other.md#a-heading)\n", []),
        "broken flag": ("text\n\n```sh\nattnviz-cli tasks \\\n  --no-such-flag\n```\n", ["doc.md:4:"]),
        "wrong expectation": ('<!-- example: expect "no such task" -->\n```console\n$ attnviz-cli tasks\n```\n',
                              ["doc.md:2:"]),
        "claimed error": ("```console\n$ attnviz-cli tasks\nattnviz-cli: error: no tasks\n```\n", ["doc.md:2:"]),
        "claimed note": ("```console\n$ attnviz-cli tasks\nattnviz-cli: a note it never prints\n```\n",
                         ["doc.md:2:"]),
        "error that is printed": ("```console\n$ attnviz-cli train --data nothing.tsv\n"
                                  "attnviz-cli: error: cannot open 'nothing.tsv': No such file or directory\n```\n", []),
        "broken pipeline": ("```sh\necho a | attnviz-cli translate --no-such-flag | cat\n```\n", ["doc.md:2:"]),
        "untagged command": ("```\n$ attnviz-cli tasks --no-such-flag\n```\n", ["doc.md:1:"]),
        "missing file": ("See [this](nowhere.md) and ![that](img/none.png).\n", ["doc.md:1:", "doc.md:1:"]),
        "missing section": ("See [the other](other.md#no-such-heading).\n", ["doc.md:1:"]),
        "stray directive": ("<!-- example: skip (why) -->\nprose\n", ["doc.md:1:"]),
        "skipped": ("<!-- example: skip (a GPU) -->\n```sh\nattnviz-cli --no-such-flag\n```\n", []),
        "missing program": ("<!-- example: needs no-such-program-xyz -->\n```sh\nattnviz-cli --no-such\n```\n",
                            []),
        "too long": ("```sh\nattnviz-cli tasks\n```\n" + "line\n" * 10, ["doc.md: 13 lines, more than 12"]),
        "files between examples": ("```sh\nattnviz-cli tasks > t.txt\n```\n\n"
                                   '<!-- example: expect "toy-french" -->\n```console\n'
                                   "$ attnviz-cli tasks --no-such-flag || cat t.txt\n```\n", []),
        "Tatoeba sample absent": ("```sh\nattnviz-cli train --data ../shared/data/none.tsv\n```\n", []),
    }
    with open(os.path.join(top, "other.md"), "w", encoding="utf-8") as f:
        f.write("# A heading\n\n```sh\n# not a heading\n```\n")
    bad = 0
    try:
        for label, (text, wanted) in cases.items():
            path = os.path.join(top, "doc.md")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            failures, _ = check_document(path, "doc.md", cli, root, None,
                                         max_lines=12 if label == "too long" else None, log=lambda _: None)
            # Each failure starts with one wanted prefix (FILE:LINE:), as many as wanted.
            unmatched = list(failures)
            for prefix in wanted:
                hit = next((f for f in unmatched if f.startswith(prefix)), None)
                if hit is not None:
                    unmatched.remove(hit)
            if unmatched or len(failures) != len(wanted):
                bad += 1
                print(f"self-test {label!r}: expected failures at {wanted}, got:\n" + "\n".join(failures))
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print("self-test passed" if not bad else f"self-test: {bad} case(s) wrong")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", required=True, help="the attnviz-cli to run")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--tatoeba", help="the Tatoeba sample, offered as ../shared/data/NAME")
    ap.add_argument("--max-lines", type=int)
    ap.add_argument("--index", action="store_true", help="every docs/*.md must be linked from the document")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    if a.self_test:
        return self_test(a.cli, root)
    if not a.files:
        ap.error("name the documents to check, or --self-test")
    started, all_failures = time.monotonic(), []
    for path in a.files:
        name = os.path.relpath(os.path.abspath(path), root)
        failures, c = check_document(path, name, a.cli, root, a.tatoeba, a.max_lines, a.index)
        print(f"{name}: {c['examples']} examples: {c['run']} run ({c['commands']} commands), "
              f"{c['skipped']} skipped; {len(failures)} failures")
        all_failures += failures
    for failure in all_failures:
        print(failure, file=sys.stderr)
    print(f"{time.monotonic() - started:.1f} s")
    return 1 if all_failures else 0


if __name__ == "__main__":
    sys.exit(main())
