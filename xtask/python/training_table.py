"""Training passes on a trained CNN: test accuracy of the QDQ export in ONNX Runtime, wall time
and peak RSS of `mppq quantize`, per bit width and method (round-to-nearest, AdaRound, block
reconstruction, QDrop, LSQ), as a Markdown table.

    target/mppq-venv/bin/python xtask/python/training_table.py [--mppq target/release/mppq]

Model and data: testdata/digits (a CNN trained on scikit-learn's digits; see its README).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGITS = os.path.join(ROOT, "testdata", "digits")

METHODS = [
    ("round-to-nearest", {}),
    ("AdaRound", {"adaround": {"enabled": True}}),
    ("round tuning (PPQ's)", {"round_tuning": {"enabled": True}}),
    ("BRECQ (block_reconstruction = --optimize 3)", {"block_reconstruction": {"enabled": True}}),
    ("QDrop (block_reconstruction, drop 0.5, act. scales)", {"block_reconstruction": {"enabled": True, "drop": 0.5, "activation_scale": True}}),
    ("LSQ (weights + scales)", {"lsq": {"enabled": True}}),
    ("LSQ+ (weights, scales, act. offsets)", {"lsq": {"enabled": True, "activation_offset": True}}),
]
# (weight bits, activation bits, weight granularity). Per-tensor 4-bit weights are where
# round-to-nearest collapses (MQBench's academic setting quantizes weights per tensor).
WIDTHS = [(8, 8, "per-channel"), (4, 8, "per-channel"), (4, 8, "per-tensor"), (4, 4, "per-channel"), (2, 4, "per-channel")]


def accuracy(model_path, x, y):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    logits = s.run(None, {s.get_inputs()[0].name: x})[0]
    return 100.0 * float(np.mean(np.argmax(logits, axis=1) == y))


def run(mppq, weight_bits, act_bits, pipeline, out, granularity):
    setting = os.path.join(out, "setting.json")
    with open(setting, "w") as f:
        json.dump({"pipeline": pipeline}, f)
    cmd = [mppq, "quantize", os.path.join(DIGITS, "digits_cnn.onnx"), "--calib", os.path.join(DIGITS, "calib"),
           "--platform", "lowbit", "--bits", str(act_bits), "--weight-bits", str(weight_bits),
           "--setting", setting, "-o", out, "--quiet", f"--{granularity}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if p.returncode != 0:
        sys.exit(f"mppq failed: {' '.join(cmd)}\n{p.stderr}")
    return wall, max(rss, before) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mppq", default=os.path.join(ROOT, "target", "release", "mppq"))
    args = ap.parse_args()
    test = np.load(os.path.join(DIGITS, "test.npz"))
    x, y = test["x"], test["y"]
    print(f"float: {accuracy(os.path.join(DIGITS, 'digits_cnn.onnx'), x, y):.1f} % (test, 500 images)\n")
    print("| W/A (weights per channel unless stated) | method | test accuracy (ORT, QDQ export) | mppq quantize wall | peak RSS (largest so far) |")
    print("|---|---|---:|---:|---:|")
    for wb, ab, granularity in WIDTHS:
        for name, pipeline in METHODS:
            if (wb, ab) == (8, 8) and pipeline:
                continue
            with tempfile.TemporaryDirectory() as out:
                wall, rss = run(args.mppq, wb, ab, pipeline, out, granularity)
                acc = accuracy(os.path.join(out, "model.qdq.onnx"), x, y)
            label = f"W{wb}A{ab}" + (" per-tensor" if granularity == "per-tensor" else "")
            print(f"| {label} | {name} | {acc:.1f} % | {wall:.2f} s | {rss:.0f} MiB |", flush=True)


if __name__ == "__main__":
    main()
