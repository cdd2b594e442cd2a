"""Progress callbacks ``(done, total, label)`` drawn as one tqdm bar on stderr.

The engine and the workbench report progress through a plain callback; the CLI (and a
side-index build started outside it) show it here, so stdout keeps only the output.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any


class StderrBar:
    """A progress callback that draws one tqdm bar on stderr; close it, or use ``with``.

    The label is the bar's description, or its postfix when ``desc`` fixes the description
    (the query id while evaluating). A new total, or a new label when the label is the
    description, restarts the bar: each indexing stage counts from zero.
    """

    def __init__(
        self,
        *,
        unit: str = "item",
        desc: str | None = None,
        total: int | None = None,
        disable: bool = False,
        delay: float = 0.0,
    ) -> None:
        from tqdm import tqdm

        self._bar: Any = tqdm(
            total=total,
            desc=desc,
            unit=unit,
            file=sys.stderr,
            leave=False,
            disable=disable,
            delay=delay,
        )
        self._label_is_postfix = desc is not None
        self._label: str | None = None

    def __call__(self, done: int, total: int, label: str) -> None:
        bar = self._bar
        if total != bar.total or (not self._label_is_postfix and label != self._label):
            bar.reset(total=total)
        if self._label_is_postfix:
            bar.set_postfix_str(label, refresh=False)
        else:
            bar.set_description(label, refresh=False)
        self._label = label
        bar.update(done - bar.n)  # tqdm throttles redraws itself (mininterval)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> StderrBar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
