#!/usr/bin/env python3
"""The mixed-precision peer of `attnviz-cli bench --arch transformer --precision bf16`:
runs d2l's Transformer reference (a file outside this project, given as the first
argument, e.g. ../shared/bench/d2l_transformer_reference.py) unchanged, inside
torch.autocast(dtype=bfloat16) on its device. Everything it does then runs under
autocast: training, validation and its four sample translations.

Usage: d2l_autocast.py REFERENCE.py DATA.tsv [the reference's own flags ...]
"""
import importlib.util
import sys

import torch


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    reference = sys.argv[1]
    spec = importlib.util.spec_from_file_location("d2l_transformer_reference", reference)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = sys.argv[2:]
    device = args[args.index("--device") + 1] if "--device" in args else "cpu"
    sys.argv = [reference] + args
    with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
        module.main()


if __name__ == "__main__":
    main()
