#!/usr/bin/env python3
"""The web page's head view in a real browser (issue 40, item 7).

Trains a tiny reverse-task Transformer (2 layers of 2 heads) with attnviz-cli, writes
`translate --html-out`, then opens the page in headless Chromium with an address that
chooses a head (`#s1=encoder_self:1:1`, `#s1=cross:0:mean`, `#s1=decoder_self:rollout`) and
reads the DOM the page's script built: the figure's caption and every cell must be that map's
weights as the page's own data holds them, and the header must name the model as it is.
Also: a page for an RNN (one map) has no head choice, as before; and `attribute --erasure
--html-out` gets an erasure table per sentence in Chromium: a row per output step with a cell
per order as the page's data holds it ("never" for none), a footer of means, the first step's
row lit.

Exit 77 (CTest's skip) when no Chromium is installed; setup.sh --test installs it.
"""
import argparse
import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


class Dom(html.parser.HTMLParser):
    """The first sentence section's attention figure: caption, dataset, rows of cell texts."""

    def __init__(self):
        super().__init__()
        self.figures = []  # per figure: {"caption", "attrs", "rows": [[cell text]], "selects": n}
        self.selects = []  # class names of <select> elements, in order
        self.models = []
        self._fig = None
        self._in = None
        self._row = None
        self._text = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "select":
            self.selects.append(a.get("class", ""))
        if tag == "p" and a.get("class") == "model":
            self._in, self._text = "model", ""
        if tag == "figure":
            self._fig = {"caption": "", "attrs": a, "rows": []}
            self.figures.append(self._fig)
        elif tag == "figcaption" and self._fig is not None:
            self._in, self._text = "caption", ""
        elif tag == "tr" and self._fig is not None:
            self._row = []
        elif tag == "td" and self._row is not None and "cell" in a.get("class", ""):
            self._in, self._text = "cell", ""

    def handle_endtag(self, tag):
        if tag == "figcaption" and self._in == "caption":
            self._fig["caption"] = self._text
            self._in = None
        elif tag == "td" and self._in == "cell":
            self._row.append(self._text)
            self._in = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self._fig["rows"].append(self._row)
            self._row = None
        elif tag == "figure":
            self._fig = None
        elif tag == "p" and self._in == "model":
            self.models.append(self._text)
            self._in = None

    def handle_data(self, data):
        if self._in:
            self._text += data


class ErasureDom(html.parser.HTMLParser):
    """Every erasure table: its header, body rows (class, cell texts) and footer rows."""

    def __init__(self):
        super().__init__()
        self.tables = []  # {"head": [text], "body": [{"cls", "cells"}], "foot": [[text]]}
        self._table = None
        self._part = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "erasure" in (a.get("class") or "").split():
            self._table = {"head": [], "body": [], "foot": []}
            self.tables.append(self._table)
        elif self._table is None:
            return
        elif tag in ("thead", "tbody", "tfoot"):
            self._part = tag
        elif tag == "tr":
            self._row = {"cls": a.get("class") or "", "cells": []}
        elif tag in ("th", "td") and self._row is not None:
            self._cell = ""

    def handle_endtag(self, tag):
        if self._table is None:
            return
        if tag in ("th", "td") and self._cell is not None:
            self._row["cells"].append(self._cell)
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._part == "thead":
                self._table["head"] = self._row["cells"]
            elif self._part == "tbody":
                self._table["body"].append(self._row)
            elif self._part == "tfoot":
                self._table["foot"].append(self._row["cells"])
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def check_erasure(chromium, cli, ckpt, w, problems):
    """attribute --erasure --html-out: the tables Chromium builds hold the page's data."""
    page = os.path.join(w, "erasure.html")
    run([cli, "attribute", "--model", ckpt, "--ig-steps", "8", "--erasure", "--html-out", page, "--out",
         os.path.join(w, "erasure.json"), "a b c d", "e f"])
    data, _ = page_data(page)
    url = "file://" + os.path.abspath(page)
    out = run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               f"--user-data-dir={w}/profile", "--virtual-time-budget=5000", "--dump-dom", url])
    d = ErasureDom()
    d.feed(out)
    if len(d.tables) != len(data["sentences"]):
        problems.append(f"erasure: {len(d.tables)} tables for {len(data['sentences'])} sentences")
        return 0
    names = {"attention": "attention", "grad_input": "gradient \u00d7 input",
             "integrated_gradients": "integrated gradients", "random": "random"}
    rows = 0
    for s, table in zip(data["sentences"], d.tables):
        e = s["erasure"]
        want_head = ["step"] + [names[o] for o in e["orders"]]
        if table["head"] != want_head:
            problems.append(f"erasure: header {table['head']}, expected {want_head}")
        if len(table["body"]) != len(e["steps"]) or len(e["steps"]) != len(s["steps"]):
            problems.append(f"erasure: {len(table['body'])} rows for {len(e['steps'])} steps ({len(s['steps'])} output)")
            continue
        for st, row in zip(e["steps"], table["body"]):
            want = [f"{st['step']}: {st['token']}"] + [
                "never" if st["removals"][o] is None else str(st["removals"][o]) for o in e["orders"]]
            if row["cells"] != want:
                problems.append(f"erasure: row {row['cells']}, expected {want}")
        rows += len(table["body"])
        lit = [i for i, row in enumerate(table["body"]) if "active" in row["cls"].split()]
        if lit != [0]:
            problems.append(f"erasure: rows lit {lit}, expected the first step's")
        if len(table["foot"]) != 1 or len(table["foot"][0]) != 1 + len(e["orders"]):
            problems.append(f"erasure: footer {table['foot']}")
        else:
            for o, cell in zip(e["orders"], table["foot"][0][1:]):
                m = e["mean_removals"][o]
                shown = cell.split(" ")[0]
                # two decimals, allowing the last digit where JavaScript and Python round a tie apart
                if (m is None and shown != "never") or (m is not None and (shown == "never" or abs(float(shown) - m) > 0.0051)):
                    problems.append(f"erasure: mean of {o} shown {cell!r}, data {m}")
    return rows


def page_data(path):
    text = open(path, encoding="utf-8").read()
    start = text.index('id="attnviz-data">') + len('id="attnviz-data">')
    end = text.index("</script>", start)
    return json.loads(text[start:end]), text


def dump(chromium, page, fragment, work):
    url = "file://" + os.path.abspath(page) + fragment
    out = run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               f"--user-data-dir={work}/profile", "--virtual-time-budget=5000", "--dump-dom", url])
    d = Dom()
    d.feed(out)
    return d


def expected_cells(matrix, columns):
    rows = []
    for row in matrix:
        rows.append(["" if k >= len(row) or row[k] is None else f"{row[k]:.2f}" for k in range(columns)])
    return rows


def close_cells(got, want):
    """Cell texts equal, allowing the last digit where JavaScript and Python round a tie apart."""
    if len(got) != len(want):
        return False
    for g_row, w_row in zip(got, want):
        if len(g_row) != len(w_row):
            return False
        for g, w in zip(g_row, w_row):
            if g == w:
                continue
            if not g or not w or abs(float(g) - float(w)) > 0.0101:
                return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    chromium = find_chromium()
    if not chromium:
        print("SKIP: no Chromium (setup.sh --test installs it)")
        return 77
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    w = args.work
    ckpt = os.path.join(w, "tf.ckpt")
    run([args.cli, "train", "--task", "reverse", "--pairs", "300", "--epochs", "2", "--seed", "1", "--arch",
         "transformer", "--hidden", "16", "--layers", "2", "--heads", "2", "--ffn", "24", "--batch", "32",
         "--device", "cpu", "-q", "--save", ckpt])
    page = os.path.join(w, "page.html")
    run([args.cli, "translate", "--model", ckpt, "--html-out", page, "--ig-steps", "8", "a b c d", "e f"])
    data, text = page_data(page)
    problems = []
    s = data["sentences"][0]
    if "heads" not in s:
        sys.exit("FAILED: the Transformer's page has no head view")
    kinds = {k["kind"]: k for k in s["heads"]["kinds"]}
    if sorted(kinds) != ["cross", "decoder_self", "encoder_self"]:
        problems.append(f"kinds {sorted(kinds)}")
    if "Transformer: d 16, 2+2 layers, 2 heads, ffn 24" not in data["model"]:
        problems.append(f"the header names the model as {data['model']!r}")

    cases = [
        ("#s1=encoder_self:1:1", "encoder_self", lambda k: k["layers"][1]["heads"][1], "encoder_self, layer 1, head 1"),
        ("#s1=cross:0:mean", "cross", lambda k: k["layers"][0]["mean"], "cross, layer 0, mean of heads"),
        ("#s1=decoder_self:rollout", "decoder_self", lambda k: k["rollout"], "decoder_self, rollout through every layer"),
        ("#s1=cross:1:0", "cross", lambda k: k["layers"][1]["heads"][0], "cross, layer 1, head 0"),
    ]
    for fragment, kind, pick, caption in cases:
        d = dump(chromium, page, fragment, w)
        if not d.models or not any("Transformer: d 16" in m for m in d.models):
            problems.append(f"{fragment}: the page's header does not name the model ({d.models})")
        first = d.figures[0] if d.figures else None
        if not first:
            problems.append(f"{fragment}: no figure")
            continue
        if first["caption"] != caption:
            problems.append(f"{fragment}: caption {first['caption']!r}, expected {caption!r}")
        k = kinds[kind]
        want = expected_cells(pick(k), len(k["columns"]))
        if not close_cells(first["rows"], want):
            problems.append(f"{fragment}: cells {first['rows']} != the map's {want}")
        if d.selects[:3] != ["kind", "layer", "head"]:
            problems.append(f"{fragment}: selects {d.selects}")
    # The maps differ: choosing a head shows another map (the check above cannot pass by chance).
    a = kinds["encoder_self"]["layers"][1]["heads"][1]
    b = kinds["encoder_self"]["layers"][1]["heads"][0]
    if a == b:
        problems.append("two heads with equal maps: the test cannot tell them apart")
    # No address: the page's default is the primary map.
    d = dump(chromium, page, "", w)
    dflt = s["heads"]["default"]
    want_caption = f"{dflt['kind']}, layer {dflt['layer']}, " + ("mean of heads" if dflt["head"] == "mean" else f"head {dflt['head']}")
    if not d.figures or d.figures[0]["caption"] != want_caption:
        problems.append(f"default caption {d.figures[0]['caption'] if d.figures else None!r}, expected {want_caption!r}")

    # An RNN's page: one map, no head choice.
    rnn = os.path.join(w, "rnn.ckpt")
    run([args.cli, "train", "--task", "reverse", "--pairs", "300", "--epochs", "1", "--seed", "1", "--embed", "16",
         "--hidden", "24", "--batch", "32", "--device", "cpu", "-q", "--save", rnn])
    rnn_page = os.path.join(w, "rnn.html")
    run([args.cli, "translate", "--model", rnn, "--html-out", rnn_page, "--ig-steps", "8", "a b c"])
    rnn_data, _ = page_data(rnn_page)
    if "heads" in rnn_data["sentences"][0]:
        problems.append("the RNN's page has a head view")
    if "RNN encoder-decoder: GRU" not in rnn_data["model"]:
        problems.append(f"the RNN's header names it as {rnn_data['model']!r}")
    d = dump(chromium, rnn_page, "", w)
    if "kind" in d.selects or not d.figures or not d.figures[0]["caption"].startswith("attention"):
        problems.append(f"RNN page: selects {d.selects}, captions {[f['caption'] for f in d.figures]}")

    erasure_rows = check_erasure(chromium, args.cli, rnn, w, problems)

    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        return 1
    print(f"ok: {len(cases)} head choices and the default read back from Chromium's DOM; the RNN page has none; "
          f"{erasure_rows} erasure rows as the data holds them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
