#!/usr/bin/env python3
"""Run a (QDQ) ONNX model in OpenVINO's runtime (CPU plugin) on several input batches.

Usage:
    ov_qdq.py MODEL.onnx OUT_DIR BATCH.npz [BATCH.npz ...] [--opt all]

The same interface and output files as ort_qdq.py (OUT_DIR/ort_<i:03>.npz, keys = output
names), so `cargo xtask qdq-check --runtime openvino` compares OpenVINO with our simulation the
way it compares ONNX Runtime. OpenVINO turns Q/DQ pairs into FakeQuantize and runs the
quantized operations in int8 (LPT). --opt is accepted and ignored. Prints {"openvino": version}.
"""
import argparse
import json
import os
import sys

import numpy as np
import openvino as ov


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("batches", nargs="+")
    ap.add_argument("--opt", default="all")
    args = ap.parse_args(argv)

    core = ov.Core()
    model = core.read_model(args.model)
    # f32 inference precision: the CPU plugin would otherwise run bf16/f16 where the host has it.
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    names = [o.get_any_name() for o in compiled.outputs]
    inputs = [i.get_any_name() for i in compiled.inputs]
    os.makedirs(args.out_dir, exist_ok=True)
    request = compiled.create_infer_request()
    for i, path in enumerate(args.batches):
        with np.load(path, allow_pickle=False) as data:
            feeds = {}
            for name in inputs:
                if name not in data.files:
                    print(f"error: input '{name}' missing from {path} (has {data.files})", file=sys.stderr)
                    return 2
                value = data[name]
                if value.dtype.kind == "f":
                    value = value.astype(np.float32)
                # np.array, not ascontiguousarray: that makes a 0-d input 1-d.
                feeds[name] = np.array(value, order="C")
        result = request.infer(feeds)
        outs = {n: np.asarray(result[compiled.output(n)]) for n in names}
        np.savez(os.path.join(args.out_dir, f"ort_{i:03}.npz"), **outs)
    print(json.dumps({"openvino": ov.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
