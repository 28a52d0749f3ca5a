#!/usr/bin/env python3
"""Writes weights files the way PyTorch and safetensors write them, and what
torch.load / safetensors' load_file give for them, for the weights-file tests
(tests/core/test_weights_file.cpp).

Usage: make_weights_fixtures.py OUT_DIR     exit 77 when torch or safetensors is missing.

OUT_DIR/
  state.bin                 torch.save of an OrderedDict: float32, float16, bfloat16, float64,
                            int64/32/16/8, uint8, bool; a transposed view and a strided slice
                            sharing storages with other entries; a 0-dim and an empty tensor
  module.bin                torch.save(nn.Module.state_dict()) (its _metadata: BUILD)
  param.bin                 a dict holding an nn.Parameter (_rebuild_parameter)
  proto4.bin                torch.save(..., pickle_protocol=4) (FRAME, MEMOIZE, STACK_GLOBAL)
  model.safetensors         safetensors.torch.save_file, mixed dtypes
  sharded/                  model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json
  binsharded/               pytorch_model-0000{1,2}-of-00002.bin + pytorch_model.bin.index.json
  expected.json             {file: {tensor: {"dtype", "shape", "values", "storage"}}}: what
                            torch.load (weights_only=True) / load_file give; "values" flat in
                            row-major order as Python numbers, "storage" the same number for
                            tensors that share memory
"""
import collections
import json
import os
import sys

try:
    import torch
    from safetensors.torch import load_file, save_file
except ImportError as e:  # the tests skip
    print(f"skipping: {e}", file=sys.stderr)
    sys.exit(77)

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
          torch.bool: "BOOL"}


def describe(tensors):
    storages = {}
    out = {}
    for name, t in tensors.items():
        ptr = t.untyped_storage().data_ptr()
        values = t.flatten().tolist() if t.dtype != torch.bfloat16 and t.dtype != torch.float16 \
            else t.float().flatten().tolist()
        out[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "values": values,
                     "storage": storages.setdefault(ptr, len(storages))}
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    base = torch.randn(4, 6, generator=g)
    sd = collections.OrderedDict()
    sd["enc.weight"] = torch.randn(3, 5, generator=g)
    sd["enc.weight_t"] = sd["enc.weight"].t()  # non-contiguous, the same storage
    sd["dec.half"] = torch.randn(2, 3, generator=g).half()
    sd["dec.bf16"] = torch.randn(7, generator=g).bfloat16()
    sd["dec.double"] = torch.randn(2, 2, generator=g, dtype=torch.float64)
    sd["ids"] = torch.arange(-3, 9, dtype=torch.int64).reshape(3, 4)
    sd["slice"] = base[1:3, ::2]  # offset 6, strides (6, 2) into base's 24 elements
    sd["row"] = base[3]  # the same storage, offset 18
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.empty(0, 4)
    sd["mask"] = torch.tensor([True, False, True])
    sd["u8"] = torch.tensor([0, 255, 7], dtype=torch.uint8)
    sd["i8"] = torch.tensor([-128, 127], dtype=torch.int8)
    sd["i16"] = torch.tensor([-32768, 5], dtype=torch.int16)
    sd["i32"] = torch.tensor([[-(2 ** 31), 2 ** 31 - 1]], dtype=torch.int32)
    torch.save(sd, os.path.join(out, "state.bin"))

    torch.manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    torch.save(module.state_dict(), os.path.join(out, "module.bin"))
    torch.save({"p": torch.nn.Parameter(torch.randn(2, 2, generator=g))}, os.path.join(out, "param.bin"))
    torch.save({"w": torch.randn(3, generator=g).bfloat16(), "n": torch.tensor(7)}, os.path.join(out, "proto4.bin"),
               pickle_protocol=4)

    st = {"a.f32": torch.randn(2, 3, generator=g), "b.f16": torch.randn(5, generator=g).half(),
          "c.bf16": torch.randn(2, 2, generator=g).bfloat16(), "d.i64": torch.tensor([1, -2, 3]),
          "e.scalar": torch.tensor(-1.25), "f.empty": torch.empty(0), "g.f32": torch.randn(4, generator=g)}
    save_file(st, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})

    expected = {}
    for name in ["state.bin", "module.bin", "param.bin", "proto4.bin"]:
        # torch's own restricted unpickler has no FRAME (protocol 4): that file, written
        # just above, is loaded with the full one.
        expected[name] = describe(torch.load(os.path.join(out, name), weights_only=name != "proto4.bin"))
    expected["model.safetensors"] = describe(load_file(os.path.join(out, "model.safetensors")))

    # Two shards of each kind and their indexes, as transformers' save_pretrained writes them.
    first = {"s.one": torch.randn(2, 2, generator=g), "s.two": torch.arange(4, dtype=torch.int64)}
    second = {"s.three": torch.randn(3, generator=g).half()}
    for folder, ext, index_name in [("sharded", "safetensors", "model.safetensors.index.json"),
                                    ("binsharded", "bin", "pytorch_model.bin.index.json")]:
        os.makedirs(os.path.join(out, folder), exist_ok=True)
        stem = "model" if ext == "safetensors" else "pytorch_model"
        names = [f"{stem}-00001-of-00002.{ext}", f"{stem}-00002-of-00002.{ext}"]
        weight_map = {}
        for shard, tensors in zip(names, [first, second]):
            path = os.path.join(out, folder, shard)
            if ext == "safetensors":
                save_file(tensors, path, metadata={"format": "pt"})
            else:
                torch.save(tensors, path)
            weight_map.update({k: shard for k in tensors})
        with open(os.path.join(out, folder, index_name), "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
        expected[folder] = describe({**first, **second})

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
