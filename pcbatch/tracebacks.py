"""Tracebacks that end in the user's code, not in pcbatch's machinery.

An exception leaving a batched call keeps only the frames outside the pcbatch
package: the user's call site, and the user's own lines that the frontend
compiled into primitives (those carry the user's filename). Set the
environment variable ``PCBATCH_FULL_TRACEBACKS=1`` to keep every frame.
"""

from __future__ import annotations

import os
import types

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _internal(tb: types.TracebackType) -> bool:
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR)


def without_internal_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` with pcbatch's own frames unlinked (the first frame is kept: the call site)."""
    if os.environ.get("PCBATCH_FULL_TRACEBACKS") or tb is None:
        return tb
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    kept = [frames[0]] + [f for f in frames[1:] if not _internal(f)]
    for here, after in zip(kept, kept[1:] + [None]):
        here.tb_next = after
    return kept[0]
