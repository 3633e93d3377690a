#!/usr/bin/env python3
"""Run a (QDQ) ONNX model in onnxruntime (CPU) on several input batches in one session.

Usage:
    ort_qdq.py MODEL.onnx OUT_DIR BATCH.npz [BATCH.npz ...] [--opt all|basic|none]

For the i-th batch (keys = input names) the outputs are written to OUT_DIR/ort_<i:03>.npz
(keys = output names). Graph optimisations default to ORT_ENABLE_ALL (how users run ORT: Q/DQ
pairs are fused into integer kernels). A JSON line {"ort": version, "opt": level} is printed.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort

LEVELS = {
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("batches", nargs="+")
    ap.add_argument("--opt", choices=sorted(LEVELS), default="all")
    args = ap.parse_args(argv)

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = LEVELS[args.opt]
    sess = ort.InferenceSession(args.model, sess_options=so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    os.makedirs(args.out_dir, exist_ok=True)
    for i, path in enumerate(args.batches):
        with np.load(path, allow_pickle=False) as data:
            feeds = {}
            for inp in sess.get_inputs():
                if inp.name not in data.files:
                    print(f"error: input '{inp.name}' missing from {path} (has {data.files})", file=sys.stderr)
                    return 2
                value = data[inp.name]
                # Float data as the float32 the model takes; other types (bool, int64) as stored.
                if value.dtype.kind == "f":
                    value = value.astype(np.float32)
                feeds[inp.name] = np.ascontiguousarray(value)
        outs = sess.run(names, feeds)
        np.savez(os.path.join(args.out_dir, f"ort_{i:03}.npz"), **{n: np.asarray(v) for n, v in zip(names, outs)})
    print(json.dumps({"ort": ort.__version__, "opt": args.opt}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
