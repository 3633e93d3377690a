"""Bad input raises the package's exceptions with the command's messages (file, node, op type,
fix), and the interpreter goes on; Ctrl-C stops the work between batches as KeyboardInterrupt
and the next job runs normally. (InternalError marks a bug in mppq and Interrupted a stop asked
for elsewhere in the process: no user input reaches them.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mppq_rs
from conftest import TESTDATA, npz_batches

MODEL = TESTDATA / "tiny_cnn.onnx"


@pytest.fixture(scope="module")
def xs() -> list[np.ndarray]:
    return [b["input"] for b in npz_batches(TESTDATA / "tiny_cnn_calib")]


def quantize(model: Any, calibration: Any, **kw: Any) -> mppq_rs.QuantizationResult:
    return mppq_rs.quantize(model, calibration, progress=False, **kw)


def graph_model(nodes: list[Any], initializers: list[Any]) -> Any:
    onnx = pytest.importorskip("onnx", reason="needs onnx (in the xtask's requirements)")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    del onnx
    return model


def test_every_error_is_an_mppq_error() -> None:
    for cls in (mppq_rs.ModelError, mppq_rs.DataError, mppq_rs.SettingError, mppq_rs.QuantizationError,
                mppq_rs.ExportError, mppq_rs.FileError, mppq_rs.Interrupted, mppq_rs.InternalError):
        assert issubclass(cls, mppq_rs.MppqError)
    assert issubclass(mppq_rs.FileError, OSError) and issubclass(mppq_rs.DataError, ValueError)


def test_model_errors_name_the_file_or_node(xs: list[np.ndarray]) -> None:
    with pytest.raises(mppq_rs.ModelError, match=r"`<model bytes>` is not a valid ONNX protobuf"):
        quantize(b"not a model", xs)
    helper = pytest.importorskip("onnx.helper", reason="needs onnx to build the test model (in the xtask's requirements)")

    mystery = graph_model([helper.make_node("FooBar", ["x"], ["z"], name="mystery")], [])
    with pytest.raises(mppq_rs.ModelError, match=r"operator FooBar .* of node `mystery` is not supported"):
        quantize(mystery, [np.ones((2, 4), np.float32)])


def test_data_errors_name_the_batch_and_input(xs: list[np.ndarray]) -> None:
    with pytest.raises(mppq_rs.DataError, match=r"batch 1`: input `input` must have shape float\[batch, 3, 32, 32\]"):
        quantize(MODEL, [xs[0], np.zeros((1, 3, 8, 8), np.float32)])
    with pytest.raises(mppq_rs.DataError, match="must be float, the file holds double"):
        quantize(MODEL, [xs[0].astype(np.float64)])
    with pytest.raises(mppq_rs.DataError, match="holds NaN at flat index 0"):
        quantize(MODEL, [np.full_like(xs[0], np.nan)])
    with pytest.raises(mppq_rs.DataError, match="array `extra` matches no graph input"):
        quantize(MODEL, [{"input": xs[0], "extra": xs[0]}])
    with pytest.raises(mppq_rs.DataError, match="no calibration data was given"):
        quantize(MODEL, [])
    with pytest.raises(mppq_rs.DataError, match="the model has 1 input"):
        quantize(MODEL, [(xs[0], xs[0])])


def test_setting_errors_name_the_key_and_the_choices(xs: list[np.ndarray]) -> None:
    with pytest.raises(mppq_rs.SettingError, match="unknown platform `nope` .known: academic-int8"):
        quantize(MODEL, xs, platform="nope")
    with pytest.raises(mppq_rs.SettingError, match="unknown field `optimise`, expected one of"):
        quantize(MODEL, xs, setting={"pipeline": {"optimise": 1}})
    with pytest.raises(mppq_rs.SettingError, match="optimize = 9: use 0"):
        quantize(MODEL, xs, optimize=9)
    with pytest.raises(mppq_rs.SettingError, match="observer `hqq` calibrates block-wise weights only"):
        quantize(MODEL, xs, observer="hqq")
    result = quantize(MODEL, xs)
    with pytest.raises(mppq_rs.SettingError, match=r"\[export.qdq\]: unknown field `no_such`"):
        result.export("qdq", "unused", no_such=1)


def test_file_errors_name_the_path(xs: list[np.ndarray], tmp_path: Path) -> None:
    with pytest.raises(mppq_rs.FileError, match="cannot read `/nonexistent/model.onnx`") as raised:
        quantize("/nonexistent/model.onnx", xs)
    assert isinstance(raised.value, OSError)
    with pytest.raises(mppq_rs.FileError, match="No such file"):
        quantize(MODEL, tmp_path / "no-such-folder")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(mppq_rs.FileError, match="Not a directory"):
        quantize(MODEL, xs).save(blocker / "out")


def test_quantization_and_export_errors_name_the_node() -> None:
    helper = pytest.importorskip("onnx.helper", reason="needs onnx to build the test model (in the xtask's requirements)")
    numpy_helper = pytest.importorskip("onnx.numpy_helper")

    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, 4], np.int64), "shape")
    fixed = graph_model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
         helper.make_node("Reshape", ["y", "shape"], ["z"], name="fixed_reshape")],
        [w, shape],
    )
    with pytest.raises(mppq_rs.QuantizationError, match=r"node `fixed_reshape` \(Reshape\): shapes \[2, 4\]"):
        quantize(fixed, [np.ones((2, 4), np.float32)])
    with pytest.raises(mppq_rs.ExportError, match=r"`resize` \(Resize, opset 11\) cannot be converted past opset 13"):
        quantize(TESTDATA / "tiny_opset11.onnx", TESTDATA / "tiny_opset11_calib", platform="trt-lowbit")


def test_ctrl_c_stops_between_batches_and_the_next_job_runs(xs: list[np.ndarray]) -> None:
    steps: list[str] = []

    def interrupt_during_calibration(task: str, done: int, total: int) -> None:
        steps.append(task)
        if task.startswith("calibration pass") and done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mppq_rs.quantize(MODEL, xs, progress=interrupt_during_calibration)
    # Stopped in the first calibration pass: nothing after it ran.
    assert not any(t.startswith("analysis") for t in steps), steps
    result = quantize(MODEL, xs)
    assert "logits 41.53 dB" in result.summary


def test_a_real_sigint_stops_the_work(xs: list[np.ndarray]) -> None:
    import os
    import signal
    import threading
    import time

    many = xs * 250  # 2,000 batches: seconds of work, far more than the signal's delay
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    returned = []
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        returned.append(quantize(MODEL, many))
        # Only if the job beat the signal: let it land here, inside the block, and fail below.
        timer.join()
        time.sleep(0.2)
    assert not returned, "the job finished before the signal: give it more batches"
    assert time.monotonic() - started < 10.0
