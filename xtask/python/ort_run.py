#!/usr/bin/env python3
"""Run an ONNX model in onnxruntime (CPU) and dump its outputs.

Usage:
    ort_run.py MODEL.onnx INPUTS.npz OUT_DIR [--threads N] [--bench N --warmup W]

* INPUTS.npz holds one array per graph input (key = input name). Arrays are
  cast to the dtype the model declares when they differ.
* Each output is written as OUT_DIR/<sanitized output name>.npy, where the
  name is sanitized by replacing every character outside [A-Za-z0-9_.-] by
  '_' (see `sanitize`). A manifest OUT_DIR/outputs.json maps the original
  output names to the file names, in graph output order.
* --threads N sets intra_op_num_threads (default: ORT's default, 0).
* --bench N runs session.run N more times after --warmup W (default 3)
  warm-up runs and prints one JSON line {"median_ms": ..., "runs": N,
  "min_ms": ..., "mean_ms": ..., "threads": ...} on stdout.
ORT's default graph optimisations (ORT_ENABLE_ALL) are used.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
}


def sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    if s in ("", ".", ".."):
        s = "_" + s
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("inputs")
    ap.add_argument("out_dir")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--bench", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args(argv)

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if args.threads > 0:
        so.intra_op_num_threads = args.threads
    sess = ort.InferenceSession(args.model, sess_options=so, providers=["CPUExecutionProvider"])

    feeds = {}
    with np.load(args.inputs, allow_pickle=False) as data:
        for inp in sess.get_inputs():
            if inp.name not in data.files:
                print(f"error: input '{inp.name}' missing from {args.inputs} (has {data.files})", file=sys.stderr)
                return 2
            arr = data[inp.name]
            want = _ORT_TYPES.get(inp.type)
            if want is not None and arr.dtype != want:
                arr = arr.astype(want)
            feeds[inp.name] = np.ascontiguousarray(arr)

    out_names = [o.name for o in sess.get_outputs()]
    outs = sess.run(out_names, feeds)

    os.makedirs(args.out_dir, exist_ok=True)
    manifest = []
    used = set()
    for name, val in zip(out_names, outs):
        fname = sanitize(name)
        base, k = fname, 1
        while fname in used:
            fname = f"{base}_{k}"
            k += 1
        used.add(fname)
        np.save(os.path.join(args.out_dir, fname + ".npy"), np.asarray(val))
        manifest.append({"name": name, "file": fname + ".npy", "shape": list(np.shape(val)), "dtype": str(np.asarray(val).dtype)})
    with open(os.path.join(args.out_dir, "outputs.json"), "w") as f:
        json.dump(manifest, f, indent=1)

    if args.bench > 0:
        for _ in range(max(0, args.warmup)):
            sess.run(out_names, feeds)
        times = []
        for _ in range(args.bench):
            t0 = time.perf_counter()
            sess.run(out_names, feeds)
            times.append((time.perf_counter() - t0) * 1e3)
        print(json.dumps({
            "median_ms": statistics.median(times),
            "runs": args.bench,
            "min_ms": min(times),
            "mean_ms": statistics.fmean(times),
            "warmup": args.warmup,
            "threads": args.threads,
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
