#!/usr/bin/env python3
"""d2l's Transformer reference (a file outside this project, e.g.
../shared/bench/d2l_transformer_reference.py), run unchanged in the arithmetic an
attnviz benchmark uses, so that the two compare like for like:

  --bf16               inside torch.autocast(dtype=bfloat16) on its device: the peer of
                       `attnviz-cli bench --precision bf16`. Everything then runs under
                       autocast: training, validation and the four sample translations.
  --flush-subnormals   with torch.set_flush_denormal(True): subnormal floats read and
                       written as zero on the CPU, as attnviz's training threads compute
                       (core/train/precision.hpp, docs/benchmarks.md, "Subnormal numbers").

Usage: d2l_peer.py [--bf16] [--flush-subnormals] REFERENCE.py DATA.tsv [the reference's own flags ...]
"""
import importlib.util
import sys

import torch


def main():
    args = sys.argv[1:]
    bf16 = flush = False
    while args and args[0] in ("--bf16", "--flush-subnormals"):
        bf16 = bf16 or args[0] == "--bf16"
        flush = flush or args[0] == "--flush-subnormals"
        args = args[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    reference, rest = args[0], args[1:]
    spec = importlib.util.spec_from_file_location("d2l_transformer_reference", reference)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if flush and not torch.set_flush_denormal(True):
        sys.exit("d2l_peer.py: this CPU cannot flush subnormal numbers")
    device = rest[rest.index("--device") + 1] if "--device" in rest else "cpu"
    sys.argv = [reference] + rest
    if bf16:
        with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16):
            module.main()
    else:
        module.main()


if __name__ == "__main__":
    main()
