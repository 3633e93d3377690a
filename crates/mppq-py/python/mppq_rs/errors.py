"""The exceptions mppq raises. Each carries the message the ``mppq`` command prints: the file,
node, operator type and opset concerned, and what would fix it.

``MppqError`` is the base of all of them; ``except mppq_rs.MppqError`` catches everything the
package raises on bad input. Ctrl-C raises Python's own ``KeyboardInterrupt``.
"""

from __future__ import annotations

__all__ = [
    "MppqError",
    "ModelError",
    "DataError",
    "SettingError",
    "QuantizationError",
    "ExportError",
    "FileError",
    "Interrupted",
    "InternalError",
]


class MppqError(Exception):
    """Base class of every error mppq raises."""


class ModelError(MppqError):
    """The model cannot be read or run: a malformed file, an unsupported operator or opset, a
    node whose inputs do not fit (the message names the node and its op type)."""


class DataError(MppqError, ValueError):
    """Calibration or run data that do not fit the model: unknown or missing input names, wrong
    dtypes or shapes, NaN/Inf, an empty set (the message names the batch and the input)."""


class SettingError(MppqError, ValueError):
    """A setting, keyword or platform choice that cannot be honoured (unknown keys, values out of
    range, an option the platform does not take)."""


class QuantizationError(MppqError):
    """A quantization pass, the analysis or training could not go on."""


class ExportError(MppqError):
    """An exporter could not write what the target runtime loads."""


class FileError(MppqError, OSError):
    """A file or folder could not be read or written (the message names it)."""


class Interrupted(MppqError):
    """The work was stopped on request before it finished; nothing was written."""


class InternalError(MppqError):
    """A bug in mppq (please report it, with the message): the work stopped, the interpreter
    goes on."""
