"""The same post-training quantization written with mppq_rs, ONNX Runtime's quantize_static and
NNCF: tiny_cnn from testdata, its 8 calibration batches as a Python iterable, per-channel int8
weights, uint8 activations, QDQ ONNX out; each export run by ONNX Runtime on the batches and
compared with the float model. docs/python.md shows these functions side by side (with PPQ's).

    python crates/mppq-py/examples/side_by_side.py --tool all   # from the repository root
CI runs `--tool mppq`; ORT and NNCF are in the xtask's virtualenv.
"""

from __future__ import annotations

import argparse
import glob
import time

import numpy as np

MODEL = "testdata/tiny_cnn.onnx"
CALIB = sorted(glob.glob("testdata/tiny_cnn_calib/*.npz"))


def batches():
    """The user's data: any iterable of input arrays (a DataLoader works the same way)."""
    for f in CALIB:
        yield np.load(f)["input"]


def with_mppq(out: str) -> str:
    import mppq_rs

    result = mppq_rs.quantize(MODEL, batches(), progress=False)
    return result.save(out)["quantized model"]


def with_onnxruntime(out: str) -> str:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = ({"input": x} for x in batches())

        def get_next(self):
            return next(self.it, None)

    path = f"{out}.onnx"
    quantize_static(MODEL, path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return path


def with_nncf(out: str) -> str:
    import nncf
    import onnx

    quantized = nncf.quantize(onnx.load(MODEL), nncf.Dataset(list(batches()), lambda x: {"input": x}))
    path = f"{out}.onnx"
    onnx.save(quantized, path)
    return path


TOOLS = {"mppq": with_mppq, "onnxruntime": with_onnxruntime, "nncf": with_nncf}


def snr_in_ort(path: str) -> float:
    import onnxruntime as ort

    ref = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    q = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    a = np.concatenate([ref.run(None, {"input": x})[0] for x in batches()])
    b = np.concatenate([q.run(None, {"input": x})[0] for x in batches()])
    return float(10 * np.log10(np.sum(a.astype(np.float64) ** 2) / np.sum((a - b) ** 2.0)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tool", choices=[*TOOLS, "all"], default="all")
    p.add_argument("--out", default="target/side-by-side")
    args = p.parse_args()
    for name in TOOLS if args.tool == "all" else [args.tool]:
        started = time.perf_counter()
        path = TOOLS[name](f"{args.out}/{name}")
        seconds = time.perf_counter() - started
        print(f"{name:12} {snr_in_ort(path):6.2f} dB in ONNX Runtime  ({seconds:.2f} s)  {path}")


if __name__ == "__main__":
    main()
