"""What a Python user holds, turned into what the native module takes: models (paths, bytes,
``onnx.ModelProto``), arrays (NumPy, torch tensors, anything with ``__array__`` or DLPack) and
calibration batches (dicts, single arrays, tuples in input order), and outputs back as NumPy."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

import numpy as np

from .errors import DataError, SettingError

ModelSource = tuple[Optional[str], Optional[bytes], str]


def model_source(model: Any) -> ModelSource:
    """(path, bytes, label) of a model given as a path, bytes or an ``onnx.ModelProto``."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        return path, None, path
    if isinstance(model, (bytes, bytearray, memoryview)):
        return None, bytes(model), "<model bytes>"
    serialize = getattr(model, "SerializeToString", None)
    if callable(serialize):
        name = getattr(getattr(model, "graph", None), "name", "") or "model"
        try:
            data = serialize()
        except ValueError as e:  # protobuf refuses messages over 2 GiB
            raise SettingError(
                f"onnx.ModelProto `{name}` cannot be serialised ({e}): save it with "
                "onnx.save(model, path, save_as_external_data=True) and pass the path"
            ) from None
        return None, data, f"<onnx.ModelProto {name}>"
    raise SettingError(
        f"model: expected a path, bytes or an onnx.ModelProto, got {type(model).__name__}"
    )


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__ == "torch" and hasattr(value, "detach")


def to_numpy(value: Any, where: str) -> np.ndarray:
    """``value`` as a C-contiguous, native-order NumPy array, sharing memory where it can
    (NumPy arrays and CPU torch tensors are not copied when already contiguous)."""
    array: Any
    if isinstance(value, np.ndarray):
        array = value
    elif _is_torch_tensor(value):
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            raise DataError(f"{where}: bfloat16 tensors have no NumPy dtype; convert with .float()")
        array = tensor.numpy()
    elif hasattr(value, "__dlpack__"):
        try:
            array = np.from_dlpack(value)
        except (TypeError, RuntimeError, BufferError):
            array = np.asarray(value)
    else:
        array = np.asarray(value)
    array = np.asarray(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if array.dtype.hasobject or array.dtype.kind in "USV":
        raise DataError(f"{where}: arrays of {array.dtype} cannot feed a model")
    return array


def array_in(name: str, value: Any, where: str) -> tuple[str, str, list[int], np.ndarray]:
    """One array as the native module takes it: name, descr, shape and a flat uint8 view."""
    array = to_numpy(value, f"{where}, input `{name}`")
    return name, array.dtype.str, list(array.shape), array.reshape(-1).view(np.uint8)


def arrays_out(outputs: list[tuple[str, str, list[int], np.ndarray]]) -> dict[str, np.ndarray]:
    """The native module's outputs as NumPy arrays (views of the bytes it returned: no copy)."""
    return {name: raw.view(np.dtype(descr)).reshape(shape) for name, descr, shape, raw in outputs}


def _is_array(value: Any) -> bool:
    return (
        isinstance(value, np.ndarray)
        or _is_torch_tensor(value)
        or hasattr(value, "__array__")
        or hasattr(value, "__dlpack__")
    )


def feeds(item: Any, input_names: list[str], where: str) -> list[tuple[str, str, list[int], np.ndarray]]:
    """One batch: a mapping (input name -> array), one array (a single-input model), or a tuple
    or list of arrays in the model's input order."""
    if isinstance(item, Mapping):
        named = dict(item)
    elif _is_array(item):
        if len(input_names) != 1:
            raise DataError(
                f"{where}: one array was given, but the model has {len(input_names)} inputs "
                f"({', '.join(input_names)}): give a dict keyed by input name, or a tuple in that order"
            )
        named = {input_names[0]: item}
    elif isinstance(item, (tuple, list)):
        if len(item) != len(input_names) or not all(_is_array(v) for v in item):
            raise DataError(
                f"{where}: a {type(item).__name__} of {len(item)} item(s) was given, but the model has "
                f"{len(input_names)} input(s) ({', '.join(input_names)}). A DataLoader that yields "
                "(input, label) pairs needs collate=lambda batch: batch[0]"
            )
        named = dict(zip(input_names, item))
    else:
        raise DataError(
            f"{where}: expected an array, a dict of arrays or a tuple of arrays, got {type(item).__name__}"
        )
    return [array_in(str(name), value, where) for name, value in named.items()]


def batches(
    calibration: Iterable[Any], collate: Optional[Callable[[Any], Any]], input_names: list[str]
) -> Iterable[list[tuple[str, str, list[int], np.ndarray]]]:
    """The batches of an iterable (a DataLoader, a generator, a list), collated when asked."""
    if isinstance(calibration, (np.ndarray, Mapping)) or _is_torch_tensor(calibration):
        raise DataError(
            "calibration: give an iterable of batches (a list, a generator, a DataLoader) or a folder, "
            f"not a single {type(calibration).__name__} (wrap one batch in a list)"
        )
    for index, item in enumerate(calibration):
        if collate is not None:
            item = collate(item)
        yield feeds(item, input_names, f"calibration, batch {index}")
