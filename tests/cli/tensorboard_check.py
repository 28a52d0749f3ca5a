#!/usr/bin/env python3
"""TensorBoard reads what `attnviz-cli train --tensorboard DIR` writes.

Trains a tiny model for two epochs with --tensorboard, then opens the folder with
TensorBoard's own readers (PyPI's tensorboard in the .venv):

  * event_accumulator.EventAccumulator: the scalar tags and their steps (train/* every
    --tensorboard-every batches and at each epoch's end, valid/* once per validation),
    attention/0..2 once per validation as PNG images of a plausible size, and
    valid/translations as a string table (header + the decoded sample);
  * plugin_event_accumulator.EventAccumulator: what the web UI serves, after its
    conversion of legacy summaries -- the same tags under the scalars, images and text
    plugins -- and the text plugin's own HTML for the table.

Exit 0 when everything holds, 1 with a line per failure, 77 (skip) without tensorboard.

Usage: tensorboard_check.py --cli PATH --work DIR
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

try:
    from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator
    from tensorboard.plugins.text import text_plugin
    from tensorboard.util import tensor_util
except ImportError as e:  # setup.sh installs it
    print(f"skipped: no tensorboard in this Python ({e})")
    sys.exit(77)

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def png_size(data):
    """(width, height) from a PNG's IHDR, every chunk's CRC and the zlib stream checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    i, size, idat = 8, None, b""
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        (crc,) = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    w, h = size
    assert len(zlib.decompress(idat)) == h * (3 * w + 1), "IDAT does not hold the image's rows"
    return size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    logdir = os.path.join(args.work, "runs", "toy")
    every, eval_sample = 5, 12
    cmd = [args.cli, "train", "--task", "toy-french", "--epochs", "2", "--embed", "16", "--hidden", "24",
           "--batch", "32", "--device", "cpu", "--eval-sample", str(eval_sample), "--tensorboard", logdir,
           "--tensorboard-every", str(every), "--json", "-q"]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if run.returncode != 0:
        print(run.stderr)
        print("FAIL: attnviz-cli train exited", run.returncode)
        return 1
    result = json.loads(run.stdout)
    steps, epochs = result["global_step"], result["epochs"]
    check(epochs == 2, f"trained 2 epochs, got {epochs}")
    per_epoch = steps // epochs
    files = [f for f in os.listdir(logdir) if "tfevents" in f]
    check(len(files) == 1, f"one event file, got {files}")

    # --- the plain reader -------------------------------------------------------------
    acc = event_accumulator.EventAccumulator(
        logdir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0,
                               event_accumulator.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    validations = [per_epoch * (k + 1) for k in range(epochs)]
    batch_steps = sorted(set(range(every, steps + 1, every)) | set(validations))
    for tag in ("train/loss", "train/lr", "train/tokens_per_second"):
        check(tag in tags["scalars"], f"scalar {tag} present")
        if tag in tags["scalars"]:
            got = [e.step for e in acc.Scalars(tag)]
            check(got == batch_steps, f"{tag} at steps {batch_steps}, got {got}")
    for tag in ("valid/loss", "valid/bleu", "valid/accuracy", "valid/token_accuracy"):
        check(tag in tags["scalars"], f"scalar {tag} present")
        if tag in tags["scalars"]:
            got = [e.step for e in acc.Scalars(tag)]
            check(got == validations, f"{tag} at steps {validations}, got {got}")
    if "valid/loss" in tags["scalars"]:
        check(abs(acc.Scalars("valid/loss")[-1].value - result["val_loss"]) < 1e-4,
              "valid/loss's last value is the run's val_loss")
    if "valid/bleu" in tags["scalars"]:
        check(abs(acc.Scalars("valid/bleu")[-1].value - result["val_bleu"]) < 1e-3,
              "valid/bleu's last value is the run's val_bleu")
    if "train/lr" in tags["scalars"]:
        check(abs(acc.Scalars("train/lr")[0].value - result["lr"]) < 1e-9, "train/lr is the learning rate")
    check(sorted(tags["images"]) == ["attention/0", "attention/1", "attention/2"],
          f"images attention/0..2, got {tags['images']}")
    for tag in tags["images"]:
        images = acc.Images(tag)
        check([e.step for e in images] == validations, f"{tag} at steps {validations}")
        for e in images:
            try:
                w, h = png_size(e.encoded_image_string)
            except AssertionError as err:
                check(False, f"{tag}: {err}")
                continue
            check((w, h) == (e.width, e.height), f"{tag}: the PNG's size is the summary's")
            check(40 <= w <= 2000 and 40 <= h <= 2000, f"{tag}: a plausible size, got {w} x {h}")
    check(tags["tensors"] == ["valid/translations"], f"tensor valid/translations, got {tags['tensors']}")
    if "valid/translations" in tags["tensors"]:
        events = acc.Tensors("valid/translations")
        check([e.step for e in events] == validations, "valid/translations once per validation")
        table = tensor_util.make_ndarray(events[-1].tensor_proto)
        rows = min(eval_sample, result["val_pairs"])
        check(table.shape == (rows + 1, 3), f"a table of {rows} sentences + a header, got {table.shape}")
        check([c.decode() for c in table[0]] == ["**source**", "**reference**", "**output**"], "the header")
        check(all(c.decode() for c in table[1:, 0]), "every source is there")
        html = text_plugin.text_array_to_html(table, True)
        check(html.count("<tr>") == rows + 1 and "<strong>source</strong>" in html,
              "the text plugin renders the table")
        # The Markdown escapes are all consumed: the sentences read as they are.
        check("\\" not in html, "no backslash of an escape is left in the rendered table")

    # --- what the web UI serves ---------------------------------------------------------
    ui = plugin_event_accumulator.EventAccumulator(logdir, size_guidance={"tensors": 0})
    ui.Reload()
    check(set(ui.PluginTagToContent("scalars")) >= {"train/loss", "train/lr", "train/tokens_per_second",
                                                   "valid/loss", "valid/bleu", "valid/accuracy"},
          "the scalars plugin has the scalars")
    check(sorted(ui.PluginTagToContent("images")) == ["attention/0", "attention/1", "attention/2"],
          "the images plugin has the heatmaps")
    check(list(ui.PluginTagToContent("text")) == ["valid/translations"], "the text plugin has the translations")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"ok: {steps} steps, {len(batch_steps)} train points, {len(validations)} validations, "
          f"3 heatmaps each, {min(eval_sample, result['val_pairs'])} translations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
