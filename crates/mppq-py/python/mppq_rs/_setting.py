"""Settings: a dict or a TOML/JSON file as ``mppq quantize --setting`` takes it, with keyword
arguments laid over it as the command's flags are. The native module validates the result with
the same messages as the command (unknown keys, wrong types, values out of range)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Optional, Union

from .errors import SettingError

SettingArg = Union[None, str, "os.PathLike[str]", Mapping[str, Any]]

# Keyword argument -> the setting key it sets (the command's flag of the same name).
KEYWORDS: dict[str, tuple[str, ...]] = {
    "platform": ("platform",),
    "dispatcher": ("dispatcher",),
    "optimize": ("pipeline", "optimize"),
    "calib_steps": ("pipeline", "calibration", "steps"),
    "edge_weight_bits": ("pipeline", "edge_weight_bits"),
    "bits": ("quantizer", "bits"),
    "weight_bits": ("quantizer", "weight_bits"),
    "block_size": ("quantizer", "block_size"),
    "per_channel": ("quantizer", "per_channel"),
    "symmetric": ("quantizer", "symmetric"),
    "observer": ("quantizer", "observer"),
    "reduce_range": ("quantizer", "reduce_range"),
    "target_cpu": ("quantizer", "target_cpu"),
    "ignore": ("ignore",),
    "target_snr": ("budget", "target_snr"),
    "max_float_ops": ("budget", "max_float_ops"),
    "layerwise": ("analysis", "layerwise"),
    "device": ("device",),
    "max_tensor_mib": ("max_tensor_mib",),
    "exporters": ("exporters",),
    "import_ranges": ("import_ranges",),
    "weights": ("weights",),
}


def _merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = dict(value) if isinstance(value, Mapping) else value
    return base


def resolve(setting: SettingArg, keywords: Mapping[str, Any]) -> tuple[Optional[str], str]:
    """(setting file or None, JSON patch) for the native module."""
    patch: dict[str, Any] = {}
    file: Optional[str] = None
    if isinstance(setting, (str, os.PathLike)):
        file = os.fspath(setting)
    elif isinstance(setting, Mapping):
        _merge(patch, setting)
    elif setting is not None:
        raise SettingError(f"setting: expected a dict or a path to a .toml/.json file, got {type(setting).__name__}")
    for name, value in keywords.items():
        if value is None:
            continue
        path = KEYWORDS[name]
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, (list, tuple)):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        node = patch
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    try:
        return file, json.dumps(patch)
    except TypeError as e:
        raise SettingError(f"setting: {e}") from None
