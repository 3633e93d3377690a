"""PyTorch data: a DataLoader and torch tensors give the files the equivalent .npz folder gives,
and the simulation of a torch tensor equals that of the NumPy array. Needs PyTorch: where it is
not installed, every test here is reported as skipped with the reason (CI cannot fetch PyTorch;
docs/python.md says where these ran)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import mppq_rs
from conftest import TESTDATA, npz_batches
from test_iterables import CALIB, MODEL, inputs, qdq

torch = pytest.importorskip("torch", reason="PyTorch is not installed in this environment")


@pytest.fixture(scope="module")
def folder_qdq() -> bytes:
    return qdq(CALIB)


def test_dataloader_equals_the_folder(folder_qdq: bytes) -> None:
    from torch.utils.data import DataLoader, TensorDataset

    # The folder's batches are 8 images each: the same batching from a dataset of single images.
    stacked = torch.from_numpy(np.concatenate(inputs()))
    loader = DataLoader(TensorDataset(stacked), batch_size=len(inputs()[0]), shuffle=False)
    assert qdq(loader) == folder_qdq
    labelled = DataLoader(
        TensorDataset(stacked, torch.zeros(len(stacked), dtype=torch.long)), batch_size=len(inputs()[0])
    )
    assert qdq(labelled, collate=lambda b: b[0]) == folder_qdq


def test_torch_tensors_equal_numpy_arrays(folder_qdq: bytes) -> None:
    tensors = [torch.from_numpy(x) for x in inputs()]
    assert qdq(tensors) == folder_qdq
    result = mppq_rs.quantize(MODEL, tensors, progress=False)
    from_torch = result.run(tensors[0])["logits"]
    from_numpy = result.run(inputs()[0])["logits"]
    assert (from_torch == from_numpy).all()
    # requires_grad tensors (a model's activations) are detached, not refused.
    assert qdq([t.clone().requires_grad_(True) for t in tensors]) == folder_qdq


def test_dict_batches_of_tensors_for_a_multi_input_model(tmp_path: Path) -> None:
    model = TESTDATA / "tiny_if.onnx"
    folder = mppq_rs.quantize(model, TESTDATA / "tiny_if_calib", progress=False).read("model.qdq.onnx")

    def gen() -> Iterator[dict[str, Any]]:
        for b in npz_batches(TESTDATA / "tiny_if_calib"):
            yield {k: torch.from_numpy(np.asarray(v)) for k, v in b.items()}

    assert mppq_rs.quantize(model, gen(), progress=False).read("model.qdq.onnx") == folder
