#!/usr/bin/env python3
"""Run models in onnxruntime (CPU) on ONNX backend-test data and compare with the stored outputs.

Reads lines `<id>\t<model.onnx>\t<case_dir>` from stdin; for every `case_dir/test_data_set_*`
feeds `input_<i>.pb` (tensor, sequence or optional protos, matched to the session's inputs by
name, else by position) and compares the outputs with `output_<i>.pb` (floats: rtol 1e-3,
atol 1e-7, NaN equal to NaN, as `cargo xtask conformance`; integers, booleans and strings
exact). Prints one JSON line per id, in input order:

    {"id": ..., "status": "pass" | "fail" | "error", "message": "..."}

"error": ORT could not load or run the model; "fail": it ran and an output differs.
"""
import glob
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

MAX_MSG = 300


def read_proto(path, ort_type):
    with open(path, "rb") as f:
        data = f.read()
    if ort_type.startswith("seq("):
        p = onnx.SequenceProto()
        p.ParseFromString(data)
        return p.name, numpy_helper.to_list(p)
    if ort_type.startswith("optional("):
        p = onnx.OptionalProto()
        p.ParseFromString(data)
        return p.name, numpy_helper.to_optional(p)
    p = onnx.TensorProto()
    p.ParseFromString(data)
    return p.name, numpy_helper.to_array(p)


def compare(got, want, where):
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: sequence of {len(want)} expected"
        for k, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w, f"{where}[{k}]")
            if why:
                return why
        return None
    if want is None or got is None:
        return None if want is None and got is None else f"{where}: optional presence differs"
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{where}: shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "fc":
        g, w = got.astype(np.float64), want.astype(np.float64)
        rtol = 2e-3 if want.dtype in (np.float16,) else 1e-3
        ok = np.isclose(g, w, rtol=rtol, atol=1e-7, equal_nan=True) | (g == w)
        if not ok.all():
            i = int(np.argmax(~ok.ravel()))
            diff = np.nanmax(np.abs(g - w)) if g.size else 0.0
            return f"{where}: {int((~ok).sum())} of {ok.size} values differ (first at {i}: {g.ravel()[i]} vs {w.ravel()[i]}; max |diff| {diff:.3g})"
        return None
    if not np.array_equal(got, want):
        return f"{where}: values differ"
    return None


def run_case(model, case_dir):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.intra_op_num_threads = 1
    try:
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - any load failure is reported
        return "error", "load: " + " ".join(str(e).split())[:MAX_MSG]
    inputs = sess.get_inputs()
    names = [o.name for o in sess.get_outputs()]
    sets = sorted(glob.glob(os.path.join(case_dir, "test_data_set_*")))
    if not sets:
        return "error", "no test data"
    for ds in sets:
        feeds = {}
        in_files = sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
        for i, path in enumerate(in_files):
            by_name = {x.name: x for x in inputs}
            with open(path, "rb") as f:
                head = onnx.TensorProto()
                try:
                    head.ParseFromString(f.read())
                    name = head.name
                except Exception:  # noqa: BLE001 - not a tensor: matched by position
                    name = ""
            target = by_name.get(name) or (inputs[i] if i < len(inputs) else None)
            if target is None:
                return "error", f"{os.path.basename(path)} matches no input"
            feeds[target.name] = read_proto(path, target.type)[1]
        try:
            outs = sess.run(names, feeds)
        except Exception as e:  # noqa: BLE001
            return "error", "run: " + " ".join(str(e).split())[:MAX_MSG]
        out_files = sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1][:-3]))
        types = [o.type for o in sess.get_outputs()]
        for i, path in enumerate(out_files):
            if i >= len(outs):
                return "fail", f"{len(outs)} outputs, {len(out_files)} expected"
            want = read_proto(path, types[i])[1]
            why = compare(outs[i], want, f"{os.path.basename(ds)} output {names[i]}")
            if why:
                return "fail", why[:MAX_MSG]
    return "pass", ""


def main() -> int:
    for raw in sys.stdin:
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        ident, model, case_dir = line.split("\t")
        status, message = run_case(model, case_dir)
        sys.stdout.write(json.dumps({"id": ident, "status": status, "message": message}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
