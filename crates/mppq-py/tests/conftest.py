"""Shared fixtures: the repository's testdata, the `mppq` binary the package is compared with
(`MPPQ_BIN`, default target/debug/mppq), and batches loaded from the testdata folders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
TESTDATA = ROOT / "testdata"
MODELS = ["tiny_cnn", "tiny_transformer", "detect_branch", "tiny_mobilenet", "tiny_if"]


def mppq_bin() -> Path:
    path = Path(os.environ.get("MPPQ_BIN", ROOT / "target" / "debug" / "mppq"))
    if not path.exists():
        pytest.fail(f"the mppq binary the package is compared with is missing: {path} (cargo build, or set MPPQ_BIN)")
    return path


def cli_quantize(model: Path, calib: Path, out: Path, *flags: str) -> Path:
    """`mppq quantize` as a user runs it; returns the output folder."""
    subprocess.run(
        [str(mppq_bin()), "quantize", str(model), "--calib", str(calib), "-o", str(out), "--quiet", *flags],
        check=True,
        capture_output=True,
    )
    return out


def npz_batches(folder: Path) -> list[dict[str, np.ndarray]]:
    """Every `.npz` batch of a folder, in the order the command reads them."""
    return [dict(np.load(f)) for f in sorted(folder.glob("*.npz"))]


@pytest.fixture(scope="session")
def cli_outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`mppq quantize` of every testdata model, default settings."""
    base = tmp_path_factory.mktemp("cli")
    return {m: cli_quantize(TESTDATA / f"{m}.onnx", TESTDATA / f"{m}_calib", base / m) for m in MODELS}
