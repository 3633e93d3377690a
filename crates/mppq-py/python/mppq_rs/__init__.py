"""mppq from Python: post-training quantization of ONNX models, with the same numbers as the
``mppq`` command.

    import mppq_rs
    result = mppq_rs.quantize("model.onnx", loader)          # any iterable of batches
    result.save("out")                                       # model.qdq.onnx, quant.json, report
    print(result.summary)

Batches are NumPy arrays, torch tensors (CPU memory shared, not copied) or anything with
``__array__``/DLPack; a batch is one array (single-input models), a dict keyed by input name, or
a tuple in input order. A folder of ``.npy``/``.npz``/``.bin`` files or images works as with
the command. Settings are a dict or a TOML/JSON file as ``mppq quantize --setting`` takes them;
keyword arguments override them as the command's flags do. Errors are :mod:`mppq_rs.errors`
exceptions carrying the command's messages. Long work releases the GIL, shows tqdm bars (when
tqdm is installed; ``progress=callback`` otherwise) and stops cleanly on Ctrl-C.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, Union

from . import _native
from ._convert import arrays_out, batches, feeds, model_source
from ._progress import ProgressArg, reporter
from ._setting import KEYWORDS, SettingArg, resolve
from . import errors
from .errors import (
    DataError,
    ExportError,
    FileError,
    InternalError,
    Interrupted,
    MppqError,
    ModelError,
    QuantizationError,
    SettingError,
)

__version__: str = _native.__version__

__all__ = [
    "quantize",
    "analyse",
    "run",
    "info",
    "platforms",
    "exporters",
    "host_cpu",
    "QuantizationResult",
    *errors.__all__,
]

ModelArg = Union[str, "os.PathLike[str]", bytes, Any]
CalibrationArg = Union[str, "os.PathLike[str]", Iterable[Any]]


class QuantizationResult:
    """What :func:`quantize` produced: the exporters' files and the report (kept in a private
    temporary folder until :meth:`save`), and the quantized graph for :meth:`run` and
    :meth:`export`."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self.files: dict[str, str] = {what: name for what, name in native.files()}
        """What each file is (``"quantized model"``) -> its file name."""
        self.summary: str = native.summary()
        """The line ``mppq quantize`` ends with: ops quantized, output SNR, time."""
        self.notes: list[str] = native.notes()
        """What the run decided that you should know (opset conversion, data, budget)."""

    def read(self, file_name: str) -> bytes:
        """The bytes of one of :attr:`files`."""
        return bytes(self._native.read(file_name))

    def _file(self, suffix: str) -> Optional[str]:
        return next((name for name in self.files.values() if name.endswith(suffix)), None)

    @property
    def qdq_model(self) -> bytes:
        """The quantized ONNX model (``model.qdq.onnx``) as bytes."""
        name = self._file(".qdq.onnx") or next(
            (n for w, n in self.files.items() if n.endswith(".onnx") and "float" not in w), None
        )
        if name is None:
            raise ExportError(f"no quantized ONNX model among the files written: {sorted(self.files.values())}")
        return self.read(name)

    def onnx_model(self) -> Any:
        """The quantized model as an ``onnx.ModelProto`` (needs the ``onnx`` package)."""
        import onnx

        return onnx.load_from_string(self.qdq_model)

    @property
    def quant_params(self) -> dict[str, Any]:
        """The quantization parameters (``quant.json``: scales, zero points, bits per tensor)."""
        name = self._file("quant.json")
        if name is None:
            raise ExportError("no quant.json was written (add the `quant-json` exporter)")
        result: dict[str, Any] = json.loads(self.read(name))
        return result

    @property
    def report(self) -> dict[str, Any]:
        """The error analysis (``report.json``): SNR per output and layer, pass outcomes."""
        result: dict[str, Any] = json.loads(self.read("report.json"))
        return result

    @property
    def report_html(self) -> str:
        """The error analysis as an HTML page (``report.html``)."""
        return self.read("report.html").decode("utf-8")

    def save(self, directory: Union[str, "os.PathLike[str]"]) -> dict[str, str]:
        """Writes every file into ``directory`` as ``mppq quantize -o DIR`` does (together, never
        over the model or the calibration data); returns what -> path."""
        return dict(self._native.save(os.fspath(directory)))

    def export(self, name: str, directory: Union[str, "os.PathLike[str]"], **options: Any) -> dict[str, str]:
        """Runs one registered exporter (:func:`exporters`) with ``options`` (its
        ``[export.NAME]`` keys) into ``directory``; returns what -> path."""
        return dict(self._native.export(name, json.dumps(options), os.fspath(directory)))

    def run(self, inputs: Any) -> dict[str, Any]:
        """The quantization simulation on one batch (an array, a dict or a tuple as for
        calibration): the graph outputs as NumPy arrays."""
        return arrays_out(self._native.run(feeds(inputs, self._native.input_names(), "run inputs")))

    def __repr__(self) -> str:
        return f"QuantizationResult({self.summary!r})"


def _session(model: ModelArg, setting: SettingArg, keywords: Mapping[str, Any]) -> Any:
    path, data, label = model_source(model)
    file, patch = resolve(setting, keywords)
    return _native.Session(path, data, label, file, patch)


def _feed(session: Any, calibration: CalibrationArg, collate: Optional[Callable[[Any], Any]], report: Any) -> None:
    if isinstance(calibration, (str, os.PathLike)):
        if collate is not None:
            raise SettingError("collate applies to iterables of batches, not to a folder")
        session.use_folder(os.fspath(calibration), report)
        return
    for batch in batches(calibration, collate, session.input_names()):
        session.add_batch(batch)


def quantize(
    model: ModelArg,
    calibration: CalibrationArg,
    *,
    platform: Optional[str] = None,
    setting: SettingArg = None,
    optimize: Optional[int] = None,
    calib_steps: Optional[int] = None,
    bits: Optional[int] = None,
    weight_bits: Optional[int] = None,
    block_size: Optional[int] = None,
    per_channel: Optional[bool] = None,
    symmetric: Optional[bool] = None,
    observer: Optional[str] = None,
    reduce_range: Optional[bool] = None,
    target_cpu: Optional[str] = None,
    dispatcher: Optional[str] = None,
    ignore: Optional[list[str]] = None,
    target_snr: Optional[float] = None,
    max_float_ops: Optional[int] = None,
    layerwise: Optional[bool] = None,
    edge_weight_bits: Optional[int] = None,
    exporters: Optional[list[str]] = None,
    device: Optional[str] = None,
    max_tensor_mib: Optional[int] = None,
    import_ranges: Optional[str] = None,
    weights: Optional[str] = None,
    collate: Optional[Callable[[Any], Any]] = None,
    progress: ProgressArg = True,
) -> QuantizationResult:
    """Quantizes ``model`` on ``calibration``: ``mppq quantize``'s job, the same files byte for
    byte.

    Args:
        model: a path (ONNX, or a Caffe ``.prototxt`` with ``weights=``), the bytes of an ONNX
            model, or an ``onnx.ModelProto``.
        calibration: an iterable of batches (a ``DataLoader``, a generator, a list): each one
            array (single-input models), a dict keyed by input name or a tuple in input order,
            of NumPy arrays, torch tensors or anything with ``__array__``/DLPack; or a folder (or
            file) of ``.npy``/``.npz``/``.bin``/images as ``--calib`` takes.
        platform: who runs the model (:func:`platforms`); default ``default`` (ONNX Runtime).
        setting: a dict or a ``.toml``/``.json`` file as ``--setting`` takes; the keywords below
            override it like the command's flags of the same names.
        collate: applied to each item of ``calibration`` first (e.g. ``lambda b: b[0]`` for a
            loader of (input, label) pairs).
        progress: True: tqdm bars when tqdm is installed; a callable ``f(task, done, total)``;
            False: none. Ctrl-C stops the work between batches in every case.

    Returns:
        a :class:`QuantizationResult`.

    Raises:
        ModelError, DataError, SettingError, QuantizationError, ExportError, FileError: with the
        command's message (file, node, op type, fix). ``KeyboardInterrupt`` on Ctrl-C.
    """
    keywords = {k: v for k, v in locals().items() if k not in ("model", "calibration", "setting", "collate", "progress")}
    report = reporter(progress)
    session = _session(model, setting, keywords)
    _feed(session, calibration, collate, report)
    return QuantizationResult(session.quantize(report))


def analyse(
    model: ModelArg,
    calibration: CalibrationArg,
    *,
    quant_config: Optional[Union[str, "os.PathLike[str]"]] = None,
    setting: SettingArg = None,
    collate: Optional[Callable[[Any], Any]] = None,
    progress: ProgressArg = True,
    **keywords: Any,
) -> dict[str, Any]:
    """``mppq analyse``: quantize in memory (or apply ``quant_config``, a ``quant.json``) and
    return the error analysis as a dict (what ``report.json`` holds). Keywords as :func:`quantize`."""
    unknown = set(keywords) - set(KEYWORDS)
    if unknown:
        raise SettingError(f"analyse() got unknown keyword(s): {', '.join(sorted(unknown))}")
    report = reporter(progress)
    session = _session(model, setting, keywords)
    _feed(session, calibration, collate, report)
    qc = os.fspath(quant_config) if quant_config is not None else None
    result: dict[str, Any] = json.loads(session.analyse(qc, report))
    return result


def run(
    model: ModelArg, inputs: Any, *, quant_config: Optional[Union[str, "os.PathLike[str]"]] = None
) -> dict[str, Any]:
    """``mppq run``: the model's outputs on one batch (an array, a dict or a tuple as for
    calibration); with ``quant_config`` (a ``quant.json``), its quantization simulated. A QDQ model
    runs as ONNX Runtime runs it (Q/DQ convolutions fused into integer kernels)."""
    path, data, label = model_source(model)
    names = list(inputs) if isinstance(inputs, Mapping) else _native.input_names(path, data, label)
    qc = os.fspath(quant_config) if quant_config is not None else None
    return arrays_out(_native.run_model(path, data, label, feeds(inputs, names, "run inputs"), qc))


def info(model: ModelArg) -> dict[str, Any]:
    """What ``mppq info --json`` prints: versions, inputs and outputs, initializers, op types."""
    path, data, label = model_source(model)
    result: dict[str, Any] = json.loads(_native.info(path, data, label))
    return result


def platforms() -> list[dict[str, Any]]:
    """The registered platforms: name, description, dispatcher, exporters."""
    result: list[dict[str, Any]] = json.loads(_native.platforms())
    return result


def exporters() -> list[dict[str, Any]]:
    """The registered exporters: name, description, default options."""
    result: list[dict[str, Any]] = json.loads(_native.exporters())
    return result


def host_cpu() -> tuple[str, str]:
    """This machine's CPU class (``x86-vnni``, ``x86-avx2``, ``arm64``, ...) and its description:
    which integer arithmetic ONNX Runtime uses here."""
    name, description = _native.host_cpu()
    return name, description
