"""Progress reporters the native module calls while it works (``begin``, ``advance``,
``finish``, ``note``): tqdm bars when tqdm is installed, or a plain callback."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

ProgressArg = Union[bool, None, Callable[[str, int, int], Any]]


class CallbackProgress:
    """Calls ``callback(task, done, total)`` when a task begins and on every step (total 0:
    unknown). One task at a time, as the command's bar: a task begun inside another replaces
    it, and steps after a task finished are not reported."""

    def __init__(self, callback: Callable[[str, int, int], Any]) -> None:
        self._callback = callback
        self._task: Optional[str] = None
        self._done, self._total = 0, 0

    def begin(self, task: str, total: int) -> None:
        self._task, self._done, self._total = task, 0, total
        self._callback(task, 0, total)

    def advance(self, n: int) -> None:
        if self._task is not None:
            self._done += n
            self._callback(self._task, self._done, self._total)

    def finish(self) -> None:
        self._task = None

    def note(self, text: str) -> None:
        pass


class TqdmProgress:
    """One tqdm bar per task of more than one step (calibration passes, measurements, the
    analysis; notebook-aware through ``tqdm.auto``); single-step tasks (most passes) draw none."""

    def __init__(self) -> None:
        from tqdm.auto import tqdm

        self._tqdm = tqdm
        self._bar: Any = None

    def begin(self, task: str, total: int) -> None:
        self.finish()
        if total != 1:
            self._bar = self._tqdm(total=total or None, desc=task, leave=False, unit="batch")

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text)


def reporter(progress: ProgressArg) -> Optional[Any]:
    """The reporter for a ``progress=`` argument: True -> tqdm when installed (else none),
    a callable -> :class:`CallbackProgress`, False/None -> none (Ctrl-C still works)."""
    if callable(progress):
        return CallbackProgress(progress)
    if progress:
        try:
            return TqdmProgress()
        except ImportError:
            return None
    return None
