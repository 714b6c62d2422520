"""The sampler's progress bar: draws finished over all chains, counted while it runs.

The whole sampler is one batched call, so progress comes from inside the running
program: after each draw, the chains that finished it report through
`pcbatch.host_callback` to `report_draws`, a constant of the compiled program that
forwards to the bar of the run in progress. Counting is cheap (one addition per
call); the tqdm bar is redrawn at most every `REFRESH_SECONDS`. Without tqdm, a
`LineProgress` prints a plain line at every tenth of the draws instead.

Where the backend cannot call the host from its compiled program (TensorFlow under
XLA) nothing is counted while it runs, and the bar jumps to the total at the end.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
import time
from collections.abc import Iterator, Sized
from typing import Any, TextIO

#: the least time between two redraws of the bar
REFRESH_SECONDS = 0.1

_active: DrawProgress | LineProgress | None = None


def wanted(progress_bar: bool | None) -> bool:
    """``progress_bar`` resolved: None means on when tqdm is installed and stderr is a TTY;
    True is on, with tqdm or without it (`new_bar`)."""
    if progress_bar is None:
        return importlib.util.find_spec("tqdm") is not None and sys.stderr.isatty()
    return bool(progress_bar)


def new_bar(total: int, description: str) -> DrawProgress | LineProgress:
    """A tqdm bar of ``total`` draws, or plain lines where tqdm is not installed."""
    if importlib.util.find_spec("tqdm") is None:
        return LineProgress(total, description)
    return DrawProgress(total, description=description)


class DrawProgress:
    """Counts finished draws and shows them on a tqdm bar of ``total`` draws."""

    def __init__(self, total: int, description: str = "NUTS draws", **tqdm_options: Any):
        from tqdm.auto import tqdm

        self.total = total
        self.count = 0
        self._shown = 0
        self._last = time.monotonic()
        self._lock = threading.Lock()  # JAX may call back from another thread
        self.bar = tqdm(total=total, desc=description, unit="draw", **tqdm_options)

    def add(self, draws: int) -> None:
        with self._lock:
            self.count += draws
            now = time.monotonic()
            if now - self._last >= REFRESH_SECONDS:
                self._redraw(self.count)
                self._last = now

    def close(self, finished: bool) -> None:
        """A finished run did every draw, whether or not each was reported."""
        with self._lock:
            self._redraw(self.total if finished else self.count)
            self.bar.close()

    def _redraw(self, count: int) -> None:
        self.bar.update(count - self._shown)
        self._shown = count


class LineProgress:
    """Counts finished draws as `DrawProgress` does, without tqdm: one plain line when the
    run starts, one at every tenth of ``total`` draws, one at the end."""

    def __init__(
        self, total: int, description: str = "NUTS draws", file: TextIO | None = None
    ) -> None:
        self.total = total
        self.count = 0
        self.description = description
        self.file = file  # None: sys.stderr when a line is printed
        self._tenths = 0  # tenths of the draws reported so far
        self._start = time.monotonic()
        self._lock = threading.Lock()  # JAX may call back from another thread
        self._print(f"0 of {total:,}")

    def add(self, draws: int) -> None:
        with self._lock:
            self.count += draws
            tenths = 10 * self.count // self.total if self.total else 10
            if self._tenths < tenths < 10:
                self._tenths = tenths
                self._print(self._share(self.count) + f" after {self._seconds()}")

    def close(self, finished: bool) -> None:
        """A finished run did every draw, whether or not each was reported."""
        with self._lock:
            if finished:
                self._print(self._share(self.total) + f" in {self._seconds()}")
            else:
                self._print("stopped at " + self._share(self.count) + f" after {self._seconds()}")

    def _share(self, count: int) -> str:
        percent = 100 * count // self.total if self.total else 100
        return f"{percent}% ({count:,} of {self.total:,})"

    def _seconds(self) -> str:
        return f"{time.monotonic() - self._start:.1f} s"

    def _print(self, text: str) -> None:
        print(f"{self.description}: {text}", file=self.file or sys.stderr, flush=True)


def report_draws(chains: Sized) -> None:
    """The host callback in the sampler's draw loop: ``chains`` just finished a draw."""
    bar = _active
    if bar is not None:
        bar.add(len(chains))


@contextlib.contextmanager
def showing(
    bar: DrawProgress | LineProgress | None,
) -> Iterator[DrawProgress | LineProgress | None]:
    """Routes `report_draws` to ``bar`` while the block runs, then completes the bar."""
    global _active
    previous, _active = _active, bar
    finished = False
    try:
        yield bar
        finished = True
    finally:
        if bar is not None and "jax" in sys.modules:
            sys.modules["jax"].effects_barrier()  # JAX's callbacks may still be on their way
        _active = previous
        if bar is not None:
            bar.close(finished)
