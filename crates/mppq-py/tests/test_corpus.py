"""End to end on a trained model from the corpus (docs/real-models.md): M03, PP-OCR's text
direction classifier from the rapidocr-onnxruntime wheel (opset 11, converted on load), its real
calibration crops fed as a generator. The package's QDQ model is the command's byte for byte,
and ONNX Runtime runs it on the held-out crops at the SNR the corpus table reports (24.39 dB on
x86-vnni and x86-avx2). Needs the corpus batches (`cargo xtask real-models` prepares them; CI
runs this after that step) and onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mppq_rs
from conftest import ROOT, cli_quantize, npz_batches

CORPUS = ROOT / "target" / "corpus"
MODEL = CORPUS / "models" / "M03_ch_ppocr_mobile_v2.0_cls_infer.onnx"
BATCHES = CORPUS / "batches" / "M03"


def snr_db(reference: np.ndarray, test: np.ndarray) -> float:
    noise = np.sum((reference.astype(np.float64) - test) ** 2)
    return float(10 * np.log10(np.sum(reference.astype(np.float64) ** 2) / max(noise, 1e-30)))


@pytest.mark.skipif(not MODEL.exists(), reason=f"corpus model missing: {MODEL} (run `cargo xtask real-models --ci`)")
def test_corpus_model_from_a_generator_equals_the_command_and_holds_in_ort(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (in the xtask's requirements)")
    cli = cli_quantize(MODEL, BATCHES / "calib", tmp_path / "cli")
    result = mppq_rs.quantize(MODEL, (b for b in npz_batches(BATCHES / "calib")), progress=False)
    assert result.qdq_model == (cli / "model.qdq.onnx").read_bytes()
    assert result.read("quant.json") == (cli / "quant.json").read_bytes()
    float_session = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    quant_session = ort.InferenceSession(result.qdq_model, providers=["CPUExecutionProvider"])
    reference, quantized = [], []
    for batch in npz_batches(BATCHES / "eval"):
        reference.append(float_session.run(None, batch)[0])
        quantized.append(quant_session.run(None, batch)[0])
    snr = snr_db(np.concatenate(reference), np.concatenate(quantized))
    agreement = np.mean(np.concatenate(reference).argmax(-1) == np.concatenate(quantized).argmax(-1))
    print(f"M03 held-out, ORT {ort.__version__}, host {mppq_rs.host_cpu()[0]}: {snr:.2f} dB, top-1 {agreement:.1%}")
    assert snr >= 24.0 and agreement == 1.0
