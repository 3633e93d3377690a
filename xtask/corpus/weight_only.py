#!/usr/bin/env python3
"""Weight-only block quantization (INT4/INT8 MatMul weights) against the peers, on the corpus's
transformer models and real data (issue 32).

For each model and setting (bits, block size, symmetric or not), in one run:
- mppq: `mppq quantize --platform weight-only` (its MatMulNBits export), by default (HQQ zero
  points when asymmetric, then GPTQ on the calibration batches, guarded) and round to nearest only
  (`mppq-rtn`: `--observer minmax`, `[pipeline.gptq] enabled = false`);
- ORT RTN: `matmul_nbits_quantizer` with `DefaultWeightOnlyQuantConfig` (MLAS's C++ RTN);
- ORT GPTQ: `matmul_nbits_quantizer` with `GPTQWeightOnlyQuantConfig` on the calibration batches;
- ORT HQQ (asymmetric settings only: HQQ has zero points by design);
  both import PyTorch and run in `--torch-python` (the corpus export venv, with onnxruntime added);
- NNCF: `compress_weights` at the same mode and group size, every weight layer at that mode
  (`ratio=1`, `backup_mode=NONE`: the embedding and last layer it keeps apart stay float), data-free and with AWQ + scale estimation on
  the calibration batches.
Each export is run in ONNX Runtime (default options) on the held-out batches: SNR against the float
model (padding tokens left out where the model says so), the model's task metric, how many MatMul
weights are compressed; quantize wall time and peak RSS come from the same `measure` wrapper the
corpus harness uses. For mppq-rtn the dequantized weights are compared with ORT RTN's (`rtn_equal`: %
of weight elements equal; 100 % means our RTN is ORT's to the step).

Usage: weight_only.py --root target/corpus --mppq target/release/mppq --models M41,M24
       [--bits 4] [--blocks 32,128] [--out results.json]
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402
import real_models as rm  # noqa: E402

HERE = Path(__file__).resolve()


def peer_ort_rtn(model, out, bits, block, symmetric):
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    cfg = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=symmetric, bits=bits)
    q = MatMulNBitsQuantizer(onnx.load(str(model)), algo_config=cfg)
    q.process()
    q.model.save_model_to_file(str(out / "model.onnx"), use_external_data_format=False)


def peer_ort_gptq(model, calib, out, bits, block, symmetric):
    """ORT's GPTQ (its vendored Intel Neural Compressor code, numpy): group size `block`, damping
    0.01, no act-order, on the calibration batches."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader
    from onnxruntime.quantization.matmul_nbits_quantizer import GPTQWeightOnlyQuantConfig, MatMulNBitsQuantizer

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.files = rm.batch_files(calib)
            self.it = iter(self.files)

        def get_next(self):
            f = next(self.it, None)
            return None if f is None else rm.load_batch(f)

        def __iter__(self):
            return (rm.load_batch(f) for f in self.files)

    cfg = GPTQWeightOnlyQuantConfig(calibration_data_reader=Reader())
    q = MatMulNBitsQuantizer(onnx.load(str(model)), bits=bits, block_size=block, is_symmetric=symmetric, algo_config=cfg)
    q.process()
    q.model.save_model_to_file(str(out / "model.onnx"), use_external_data_format=False)


def peer_ort_hqq(model, out, bits, block):
    """ORT's HQQ (PyTorch): zero point and scale refined per block (asymmetric by design)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import HQQWeightOnlyQuantConfig, MatMulNBitsQuantizer
    q = MatMulNBitsQuantizer(onnx.load(str(model)), algo_config=HQQWeightOnlyQuantConfig(block_size=block, bits=bits))
    q.process()
    q.model.save_model_to_file(str(out / "model.onnx"), use_external_data_format=False)


def peer_nncf(model, calib, out, bits, block, symmetric, data_aware):
    import nncf
    import onnx
    mode = {(4, True): nncf.CompressWeightsMode.INT4_SYM, (4, False): nncf.CompressWeightsMode.INT4_ASYM,
            (8, True): nncf.CompressWeightsMode.INT8_SYM, (8, False): nncf.CompressWeightsMode.INT8_ASYM}[bits, symmetric]
    # Every MatMul at the mode, except what NNCF keeps apart by design (the embedding and the last
    # layer; `all_layers=True` makes NNCF 3.4 write the embedding Gather as a MatMulNBits on int64
    # token ids, which ORT refuses): those stay float with `backup_mode=NONE`.
    # A weight computed at run time (a Gemm of two activations, M24) has no channel size:
    # `IGNORE` leaves such layers out instead of failing the whole model.
    from nncf.quantization.advanced_parameters import AdvancedCompressionParameters
    kw = dict(mode=mode, ratio=1.0, backup_mode=nncf.BackupMode.NONE,
              advanced_parameters=AdvancedCompressionParameters(group_size_fallback_mode=nncf.GroupSizeFallbackMode.IGNORE))
    if bits == 4:
        kw["group_size"] = block
    if data_aware:
        data = [rm.load_batch(f) for f in rm.batch_files(calib)]
        kw.update(dataset=nncf.Dataset(data), awq=True, scale_estimation=True, subset_size=len(data))
    m = nncf.compress_weights(onnx.load(str(model)), **kw)
    onnx.save(m, str(out / "model.onnx"))


def cmd_peer(args):
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    model, calib = Path(args.model).resolve(), Path(args.calib).resolve()
    os.chdir(out)
    if args.tool == "ort-rtn":
        peer_ort_rtn(model, out, args.bits, args.block, args.symmetric)
    elif args.tool == "ort-hqq":
        peer_ort_hqq(model, out, args.bits, args.block)
    elif args.tool == "ort-gptq":
        peer_ort_gptq(model, calib, out, args.bits, args.block, args.symmetric)
    elif args.tool in ("nncf", "nncf-awq-se"):
        peer_nncf(model, calib, out, args.bits, args.block, args.symmetric, args.tool == "nncf-awq-se")
    else:
        raise SystemExit(f"unknown tool {args.tool}")


def measured(cmd, out_json, timeout=3600):
    subprocess.run([sys.executable, str(HERE.parent / "real_models.py"), "measure", "--out", str(out_json),
                    "--timeout", str(timeout), "--", *cmd], check=True)
    return json.loads(Path(out_json).read_text())


def dequantized_weights(path):
    """{(MatMul data input, output): [K, N] float weight} of every MatMulNBits / blocked-DQ MatMul."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(path))
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type != "MatMulNBits":
            continue
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        K, N, bits, bs = a["K"], a["N"], a.get("bits", 4), a["block_size"]
        kb = (K + bs - 1) // bs
        b = init[n.input[1]].reshape(N, kb, -1)
        codes = np.zeros((N, kb, bs), np.int32)
        per = 8 // bits
        for j in range(per):
            codes[:, :, j::per] = (b >> (j * bits)) & ((1 << bits) - 1)
        scales = init[n.input[2]].reshape(N, kb).astype(np.float32)
        if len(n.input) > 3 and n.input[3]:
            z = init[n.input[3]].reshape(N, -1)
            zp = np.zeros((N, z.shape[1] * per), np.int32)
            for j in range(per):
                zp[:, j::per] = (z >> (j * bits)) & ((1 << bits) - 1)
            zp = zp[:, :kb]
        else:
            zp = np.full((N, kb), 1 << (bits - 1), np.int32)
        w = ((codes - zp[:, :, None]).astype(np.float32) * scales[:, :, None]).reshape(N, -1)[:, :K]
        out[(n.input[0], n.output[0])] = w.T
    return out


def rtn_equal(ours, ort):
    a, b = dequantized_weights(ours), dequantized_weights(ort)
    same = total = 0
    for k, w in a.items():
        if k in b:
            same += int((w == b[k]).sum())
            total += w.size
    return {"weights": len(a), "matched": sum(k in b for k in a), "equal_pct": 100.0 * same / max(total, 1)}


def evaluate(m, meta, ref, batches, path):
    _, got = rm.run_model(path, batches)
    valid = (lambda i, k: m.snr_valid(meta["extra"], i, k)) if m.snr_valid else None
    value, text = m.metric(ref, got, meta["extra"])
    q, total = rm.weight_ops(path)
    return {"snr_db": rm.snr_db(ref, got, valid), "metric": value, "metric_text": text, "weight_ops": [q, total]}


def cmd_run(args):
    root = Path(args.root).resolve()
    runs = root / "runs" / "weight-only"
    results = []
    for mid in args.models.split(","):
        meta = json.loads((root / "batches" / mid / "meta.json").read_text())
        m = corpus.MODELS[mid]
        batches = [rm.load_batch(f) for f in rm.batch_files(meta["eval"])]
        _, ref = rm.run_model(meta["model"], batches)
        for block in [int(b) for b in args.blocks.split(",")]:
            for symmetric in (True, False):
                tag = f"{mid}-w{args.bits}-g{block}-{'sym' if symmetric else 'asym'}"
                row = {"model": mid, "name": m.name, "bits": args.bits, "block": block, "symmetric": symmetric, "tools": {}}
                tools = ["mppq-rtn", "mppq", "ort-rtn", "ort-gptq", "nncf", "nncf-awq-se"]
                if not symmetric:
                    tools.insert(4, "ort-hqq")
                for tool in tools:
                    out = runs / tag / tool
                    out.mkdir(parents=True, exist_ok=True)
                    if tool.startswith("mppq"):
                        cmd = [args.mppq, "quantize", meta["model"], "--calib", meta["calib"], "--platform", "weight-only",
                               "--weight-bits", str(args.bits), "--block-size", str(block),
                               "--symmetric" if symmetric else "--asymmetric", "--output", str(out), "--export", "qdq"]
                        if tool == "mppq-rtn":  # round to nearest only: min/max blocks, GPTQ off
                            (out / "setting.toml").write_text("[pipeline.gptq]\nenabled = false\n")
                            cmd += ["--setting", str(out / "setting.toml"), "--observer", "minmax"]
                        path = out / "model.qdq.onnx"
                    else:
                        # ORT's GPTQ and HQQ import PyTorch: they run in the export venv (torch + ORT).
                        python = args.torch_python if tool in ("ort-gptq", "ort-hqq") else sys.executable
                        cmd = [python, str(HERE), "peer", "--tool", tool, "--model", meta["model"],
                               "--calib", meta["calib"], "--out", str(out), "--bits", str(args.bits),
                               "--block", str(block)] + (["--symmetric"] if symmetric else [])
                        path = out / "model.onnx"
                    r = measured(cmd, out / "measure.json")
                    entry = {"wall_s": r["wall_s"], "peak_rss_mb": r["peak_rss_mb"]}
                    if r["rc"] != 0:
                        entry["error"] = r["error"]
                    else:
                        try:
                            entry.update(evaluate(m, meta, ref, batches, path))
                        except Exception as e:
                            entry["error"] = f"evaluation: {rm.describe(e)}"
                    row["tools"][tool] = entry
                    print(f"{tag} {tool}: {json.dumps(entry)}", flush=True)
                mp, op = runs / tag / "mppq-rtn" / "model.qdq.onnx", runs / tag / "ort-rtn" / "model.onnx"
                if mp.exists() and op.exists():
                    row["rtn_vs_ort"] = rtn_equal(mp, op)
                    print(f"{tag} rtn_vs_ort: {row['rtn_vs_ort']}", flush=True)
                results.append(row)
    text = json.dumps(rm.finite(results), indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print_table(results)


def print_table(results):
    print(f"{'model':6} {'setting':14} {'tool':12} {'SNR dB':>8} {'metric':>8} {'weights':>8} {'wall s':>7} {'RSS MB':>7}")
    for r in results:
        setting = f"w{r['bits']} g{r['block']} {'sym' if r['symmetric'] else 'asym'}"
        for tool, e in r["tools"].items():
            if "error" in e:
                print(f"{r['model']:6} {setting:14} {tool:12} error: {e['error']}")
                continue
            wq = f"{e['weight_ops'][0]}/{e['weight_ops'][1]}"
            print(f"{r['model']:6} {setting:14} {tool:12} {e['snr_db']:8.2f} {e['metric']:8.2f} {wq:>8} {e['wall_s']:7.2f} {e['peak_rss_mb']:7.0f}")
        if "rtn_vs_ort" in r:
            print(f"{'':6} {setting:14} mppq-rtn = ORT RTN on {r['rtn_vs_ort']['equal_pct']:.4f}% of weight elements ({r['rtn_vs_ort']['matched']}/{r['rtn_vs_ort']['weights']} MatMuls matched)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("--root", required=True)
    p.add_argument("--mppq", required=True)
    p.add_argument("--models", default="M41,M24")
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--blocks", default="32,128")
    p.add_argument("--out")
    p.add_argument("--torch-python", default="target/corpus/export-venv/bin/python",
                   help="a Python with PyTorch and onnxruntime (ORT's GPTQ and HQQ need torch)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("peer")
    for a in ("--tool", "--model", "--calib", "--out"):
        p.add_argument(a, required=True)
    p.add_argument("--bits", type=int, required=True)
    p.add_argument("--block", type=int, required=True)
    p.add_argument("--symmetric", action="store_true")
    p.set_defaults(func=cmd_peer)
    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
