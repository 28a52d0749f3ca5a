#!/usr/bin/env python3
"""Writes tests/data/kendall_fixtures.json: SciPy's Kendall tau-b on rankings like attnviz's.

core/analysis/agreement.cpp computes Kendall's tau-b between an attention row and
|attribution| (tests/base/test_agreement.cpp compares it with every case written here).
The cases: rows of attention-like weights and attribution-like scores, with ties in one
side, in both, in neither; constant rows (SciPy: nan); two and three entries; reversed
and identical orders. Values are float32 numbers printed with 6 significant digits, so
C++ reads the same numbers (and the same ties) that SciPy ranks.

Run once with any Python that has SciPy and NumPy (the project does not depend on them):
    python3 -m venv /tmp/scipy && /tmp/scipy/bin/pip install scipy
    /tmp/scipy/bin/python tools/make_kendall_fixtures.py     # from the repository root
"""
import json
import math
import pathlib

import numpy as np
import scipy
from scipy.stats import kendalltau

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "kendall_fixtures.json"


def f32(values):
    """Numbers as C++ will read them into float: 6 significant digits, float32-exact."""
    return [float(np.float32(float(f"{v:.6g}"))) for v in values]


def cases():
    rng = np.random.default_rng(26)
    fixed = [
        ("identical order", [0.1, 0.2, 0.3, 0.4], [1, 2, 3, 4]),
        ("reversed order", [0.1, 0.2, 0.3, 0.4], [4, 3, 2, 1]),
        ("two entries", [0.3, 0.7], [0.9, 0.1]),
        ("three with a tie in x", [0.25, 0.25, 0.5], [0.1, 0.3, 0.2]),
        ("ties on both sides", [0.2, 0.2, 0.3, 0.3, 0.0], [1, 2, 2, 3, 3]),
        ("pairs tied in both", [0.5, 0.5, 0.1, 0.9], [2, 2, 1, 1]),
        ("constant x", [0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]),
        ("constant y", [0.1, 0.2, 0.7], [0.0, 0.0, 0.0]),
        ("one entry", [1.0], [0.5]),
        ("zeros among scores", [0.05, 0.6, 0.1, 0.25], [0.0, 1.2, 0.0, 0.4]),
    ]
    for name, x, y in fixed:
        yield name, f32(x), f32(y)
    for i in range(30):
        n = int(rng.integers(3, 25))
        att = rng.dirichlet(np.ones(n) * 0.5)
        score = np.abs(rng.normal(size=n)) * (rng.random(n) > 0.2)  # some exact zeros: ties
        if i % 3 == 0:
            att = np.round(att, 2)  # ties in the attention too
        yield f"random {i} (n={n})", f32(att), f32(score)


def main():
    out = []
    for name, x, y in cases():
        tau = kendalltau(x, y, variant="b").statistic
        out.append({"name": name, "x": x, "y": y, "tau_b": None if math.isnan(tau) else float(tau)})
    OUT.write_text(json.dumps({"scipy": scipy.__version__, "cases": out}, indent=1) + "\n")
    print(f"wrote {len(out)} cases to {OUT}")


if __name__ == "__main__":
    main()
