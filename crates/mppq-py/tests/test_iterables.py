"""Calibration from whatever a Python user iterates: a torch DataLoader, a generator, a list of
tuples, objects with __array__ or DLPack. Each gives the files the equivalent .npz folder gives.
PyTorch's DataLoader and tensors: test_torch.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mppq_rs
from conftest import TESTDATA, npz_batches

MODEL = TESTDATA / "tiny_cnn.onnx"
CALIB = TESTDATA / "tiny_cnn_calib"


def qdq(calibration: Any, **kw: Any) -> bytes:
    return mppq_rs.quantize(MODEL, calibration, progress=False, **kw).read("model.qdq.onnx")


@pytest.fixture(scope="module")
def folder_qdq() -> bytes:
    return qdq(CALIB)


class ArrayLike:
    """Something that is not an ndarray but converts to one (as many libraries' tensors do)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._a


class DlpackOnly:
    """Exposes only the DLPack protocol (as JAX/CuPy arrays do)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self._a.__dlpack_device__()


def inputs() -> list[np.ndarray]:
    return [b["input"] for b in npz_batches(CALIB)]


def test_generator_tuples_and_array_protocols_equal_the_folder(folder_qdq: bytes) -> None:
    assert qdq(x for x in inputs()) == folder_qdq
    assert qdq([(x,) for x in inputs()]) == folder_qdq
    assert qdq([ArrayLike(x) for x in inputs()]) == folder_qdq
    assert qdq([DlpackOnly(x) for x in inputs()]) == folder_qdq
    # A non-contiguous view is made contiguous (a copy), same numbers.
    assert qdq([np.asfortranarray(x) for x in inputs()]) == folder_qdq


def test_labelled_pairs_need_collate_and_then_equal_the_folder(folder_qdq: bytes) -> None:
    pairs = [(x, np.zeros(len(x), dtype=np.int64)) for x in inputs()]
    with pytest.raises(mppq_rs.DataError, match=r"collate=lambda batch: batch\[0\]"):
        qdq(pairs)
    assert qdq(pairs, collate=lambda b: b[0]) == folder_qdq


def test_batches_past_the_cache_are_spilled_with_the_same_result(folder_qdq: bytes) -> None:
    assert qdq(inputs(), setting={"data": {"cache_mib": 0}}) == folder_qdq


def test_progress_callback_sees_each_task(folder_qdq: bytes) -> None:
    seen: list[tuple[str, int, int]] = []
    result = mppq_rs.quantize(MODEL, inputs(), progress=lambda task, done, total: seen.append((task, done, total)))
    assert result.read("model.qdq.onnx") == folder_qdq
    tasks = {t for t, _, _ in seen}
    assert any("calibrat" in t for t in tasks), tasks
    assert all(0 <= done <= total or total == 0 for _, done, total in seen)
