"""The package writes what the command writes: the QDQ model and quant.json byte for byte, on
every testdata model, whether the batches come as a folder, a list of dicts or a generator."""

from __future__ import annotations

from pathlib import Path

import pytest

import mppq_rs
from conftest import MODELS, TESTDATA, cli_quantize, npz_batches

COMPARED = ["model.qdq.onnx", "quant.json", "model.float.onnx"]


def assert_same_files(result: mppq_rs.QuantizationResult, cli_dir: Path) -> None:
    for name in COMPARED:
        assert result.read(name) == (cli_dir / name).read_bytes(), f"{name} differs from the command's"


@pytest.mark.parametrize("model", MODELS)
def test_folder_and_list_equal_the_command(model: str, cli_outputs: dict[str, Path]) -> None:
    onnx_path = TESTDATA / f"{model}.onnx"
    from_folder = mppq_rs.quantize(onnx_path, TESTDATA / f"{model}_calib", progress=False)
    assert_same_files(from_folder, cli_outputs[model])
    from_list = mppq_rs.quantize(str(onnx_path), npz_batches(TESTDATA / f"{model}_calib"), progress=False)
    assert_same_files(from_list, cli_outputs[model])
    # The summary line is the command's (with the job's own time).
    assert from_list.summary.split("; ")[:2] == from_folder.summary.split("; ")[:2]


def test_generator_bytes_and_model_proto_equal_the_command(cli_outputs: dict[str, Path]) -> None:
    onnx = pytest.importorskip("onnx", reason="needs onnx (in the xtask's requirements)")
    model = TESTDATA / "tiny_cnn.onnx"
    batches = (b for b in npz_batches(TESTDATA / "tiny_cnn_calib"))
    assert_same_files(mppq_rs.quantize(model.read_bytes(), batches, progress=False), cli_outputs["tiny_cnn"])
    proto = onnx.load(str(model))
    arrays = [b["input"] for b in npz_batches(TESTDATA / "tiny_cnn_calib")]
    assert_same_files(mppq_rs.quantize(proto, arrays, progress=False), cli_outputs["tiny_cnn"])


def test_settings_and_keywords_equal_the_command_flags(tmp_path: Path) -> None:
    model, calib = TESTDATA / "tiny_cnn.onnx", TESTDATA / "tiny_cnn_calib"
    cli = cli_quantize(model, calib, tmp_path / "cli", "--optimize", "0", "--platform", "academic-int8")
    by_keywords = mppq_rs.quantize(model, npz_batches(calib), optimize=0, platform="academic-int8", progress=False)
    by_dict = mppq_rs.quantize(
        model, npz_batches(calib), setting={"platform": "academic-int8", "pipeline": {"optimize": 0}}, progress=False
    )
    setting_file = tmp_path / "s.toml"
    setting_file.write_text('platform = "academic-int8"\n[pipeline]\noptimize = 0\n')
    by_file = mppq_rs.quantize(model, npz_batches(calib), setting=setting_file, progress=False)
    for result in (by_keywords, by_dict, by_file):
        assert result.read("model.qdq.onnx") == (cli / "model.qdq.onnx").read_bytes()


def test_result_gives_params_report_simulation_and_exports(tmp_path: Path, cli_outputs: dict[str, Path]) -> None:
    batches = npz_batches(TESTDATA / "tiny_cnn_calib")
    result = mppq_rs.quantize(TESTDATA / "tiny_cnn.onnx", batches, progress=False)
    assert result.quant_params["format"]
    snr = {t["tensor"]: t["snr_db"] for t in result.report["graphwise"] if t["graph_output"]}
    assert round(snr["logits"], 2) == 41.53, snr
    assert "logits 41.53 dB" in result.summary, result.summary
    assert "<html" in result.report_html.lower()
    # run(): the simulation, as `mppq run --quant-config` computes it.
    simulated = result.run(batches[0])["logits"]
    again = mppq_rs.run(TESTDATA / "tiny_cnn.onnx", batches[0], quant_config=cli_outputs["tiny_cnn"] / "quant.json")
    assert simulated.shape == (batches[0]["input"].shape[0], 10)
    assert (simulated == again["logits"]).all()
    float_out = mppq_rs.run(TESTDATA / "tiny_cnn.onnx", batches[0])["logits"]
    assert not (float_out == simulated).all() and abs(float_out - simulated).max() < 0.5
    # save(): the command's folder.
    saved = result.save(tmp_path / "out")
    listing = lambda d: sorted(p.name for p in d.iterdir())  # noqa: E731
    assert listing(tmp_path / "out") == listing(cli_outputs["tiny_cnn"])
    assert sorted(Path(p).name for p in saved.values()) == [n for n in listing(tmp_path / "out") if n[0] != "."]
    # export(): any registered exporter, with its options.
    written = result.export("ort-calib-cache", tmp_path / "cache")
    assert [Path(p).name for p in written.values()] == ["calibration_cache.json"]
    blocked = result.export("qdq", tmp_path / "float-bias", quantize_bias=False)
    assert Path(blocked["quantized model"]).read_bytes() != (cli_outputs["tiny_cnn"] / "model.qdq.onnx").read_bytes()
