#!/usr/bin/env python3
"""Checks a web page attnviz wrote (translate --html-out): Python's html.parser reads it
with every element closed in order, and nothing in it refers outside the page (no src or
href attribute, no address, no CSS url() or @import). Exit 0 when fine, 1 with a message."""
import html.parser
import re
import sys

VOID = {"meta", "br", "hr", "input", "link", "img", "col", "area", "base", "wbr", "source", "track", "embed", "param"}


class Checker(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.problems, self.seen = [], [], set()

    def handle_starttag(self, tag, attrs):
        self.seen.add(tag)
        for name, _ in attrs:
            if name in ("src", "href", "srcset", "action", "background"):
                self.problems.append(f"<{tag}> has a {name} attribute")
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1] if self.open else 'nothing'}")
        else:
            self.open.pop()


def main(path):
    text = open(path, encoding="utf-8").read()
    checker = Checker()
    checker.feed(text)
    checker.close()
    problems = checker.problems + [f"<{t}> not closed" for t in checker.open]
    if re.search(r"https?:|//|url\(|@import", text, re.IGNORECASE):
        problems.append("an address, url() or @import")
    for needed in ("html", "head", "body", "script", "style"):
        if needed not in checker.seen:
            problems.append(f"no <{needed}>")
    if problems:
        print(f"{path}: " + "; ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
