#!/usr/bin/env python3
"""Run two ONNX models in onnxruntime (CPU) on the same random inputs and compare their outputs.

Usage: ort_pair.py ORIGINAL.onnx CONVERTED.onnx [--shape NAME=D0,D1,...] [--runs N] [--seed S]

Inputs are drawn from N(0, 1) (integers: 0..9) with the shapes the original declares; a
dimension that is not a number takes the value given by --shape for that input, else 1. Prints
one JSON line: {"outputs": n, "max_abs_diff": x, "max_abs": y, "runs": N}.
"""
import argparse
import json
import sys

import numpy as np
import onnxruntime as ort

TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
         "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_, "tensor(uint8)": np.uint8}


def session(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("original")
    ap.add_argument("converted")
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    shapes = {}
    for s in args.shape:
        name, dims = s.split("=", 1)
        shapes[name] = [int(d) for d in dims.split(",")]
    a, b = session(args.original), session(args.converted)
    rng = np.random.default_rng(args.seed)
    worst, largest = 0.0, 0.0
    for _ in range(args.runs):
        feeds = {}
        for inp in a.get_inputs():
            given = shapes.get(inp.name)
            dims = given if given else [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
            dtype = TYPES.get(inp.type, np.float32)
            if np.issubdtype(dtype, np.floating):
                feeds[inp.name] = rng.standard_normal(dims).astype(dtype)
            else:
                feeds[inp.name] = rng.integers(0, 10, dims).astype(dtype)
        outs_a, outs_b = a.run(None, feeds), b.run(None, feeds)
        for x, y in zip(outs_a, outs_b):
            x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
            if x.shape != y.shape:
                print(json.dumps({"error": f"shape {list(x.shape)} vs {list(y.shape)}"}))
                return 1
            if x.size:
                worst = max(worst, float(np.max(np.abs(x - y))))
                largest = max(largest, float(np.max(np.abs(x))))
    print(json.dumps({"outputs": len(a.get_outputs()), "max_abs_diff": worst, "max_abs": largest, "runs": args.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
