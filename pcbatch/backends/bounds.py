"""Index bounds, per example: ``v[k]`` with ``k`` past ``v``'s length raises IndexError.

Per example, NumPy raises ``IndexError`` for an integer index outside ``[-n, n)``. A
batched gather does not say which example's index failed, and JAX (and TensorFlow's
gathers on some devices) clamp such an index or drop such a write without a word. So
every view checks a per-example integer index against the per-example axis it reads:

- the NumPy and Torch views (`check_batched`) raise NumPy's message at once, naming the
  example's axis (a batched gather would name the batch's);
- the JAX and TensorFlow view (`checked_index`) cannot raise inside a compiled loop: it
  notes the examples whose index is out of range for the machine's probe
  (`weak.note_fault`: they stop and the call raises after the run, naming the line)
  and reads index 0 for them meanwhile;
- a constant index (a Python int or NumPy integer array) is checked when tracing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pcbatch.backends import weak
from pcbatch.backends.weak import INDEX  # the kind `weak.note_fault` records

__all__ = ["INDEX", "check_batched", "checked_index", "index_error"]


def _parts(index: Any) -> tuple:
    return index if isinstance(index, tuple) else (index,)


def _axes(parts: tuple, ndim: int) -> list | None:
    """The axis each part of an index reads (None for ``None``/``...``); None when a
    boolean mask is among them (it reads several axes: not checked here)."""
    if any(_is_boolean(p) for p in parts):
        return None
    consuming = sum(1 for p in parts if p is not None and p is not Ellipsis)
    axes, axis = [], 0
    for part in parts:
        if part is Ellipsis:
            axes.append(None)
            axis += ndim - consuming
        elif part is None:
            axes.append(None)
        else:
            axes.append(axis)
            axis += 1
    return axes


def _is_boolean(part: Any) -> bool:
    dtype = getattr(part, "dtype", None)
    if isinstance(part, bool):
        return True
    return dtype is not None and np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).kind == "b"


def index_error(value: Any, axis: int, size: int) -> IndexError:
    """NumPy's message, naming the example's axis; a failure of that example alone
    (`LaneStatus.ERROR` with ``return_status=True``)."""
    from pcbatch.errors import lane_check_failed

    return lane_check_failed(
        IndexError(f"index {value} is out of bounds for axis {axis} with size {size}")
    )


def _check_constant(part: Any, axis: int, size: int) -> None:
    """A Python int or NumPy integer array index, the same for every example."""
    if isinstance(part, (bool, np.bool_)) or not isinstance(part, (int, np.integer, np.ndarray)):
        return
    values = np.asarray(part)
    if values.dtype.kind not in "iu" or not values.size:
        return
    bad = (values < -size) | (values >= size)
    if bad.any():
        raise index_error(values[bad].flat[0], axis, size)


def check_batched(shape: tuple, index: Any, batch_values) -> None:
    """NumPy's IndexError for an out-of-range index of one example of ``shape``;
    ``batch_values(part)``: a per-example part's values over the batch (NumPy), or None
    for a part that is not per-example."""
    parts = _parts(index)
    axes = _axes(parts, len(shape))
    if axes is None:
        return
    for part, axis in zip(parts, axes):
        if axis is None or axis >= len(shape):
            continue
        values = batch_values(part)
        if values is None:
            _check_constant(part, axis, shape[axis])
            continue
        values = np.asarray(values)
        if values.dtype.kind not in "iu":
            continue
        bad = (values < -shape[axis]) | (values >= shape[axis])
        if bad.any():
            raise index_error(values[bad].flat[0], axis, shape[axis])


def checked_index(shape: tuple, index: Any, xp) -> Any:
    """``index`` of one example's array of ``shape`` (JAX or TensorFlow values): a
    constant part checked now, a traced integer part noted for the probe where it is
    out of range and replaced by 0 there."""
    parts = _parts(index)
    axes = _axes(parts, len(shape))
    if axes is None:
        return index
    checked = []
    for part, axis in zip(parts, axes):
        if axis is not None and axis < len(shape) and shape[axis] is not None:
            if _is_traced_int(part):
                size = xp.asarray(shape[axis], dtype=part.dtype)
                bad = xp.logical_or(xp.less(part, -size), xp.greater_equal(part, size))
                weak.note_fault(bad, xp, INDEX)
                part = xp.where(bad, xp.zeros_like(part), part)
            else:
                _check_constant(part, axis, shape[axis])
        checked.append(part)
    return tuple(checked) if isinstance(index, tuple) else checked[0]


def _is_traced_int(part: Any) -> bool:
    if isinstance(part, (int, float, slice, np.ndarray, np.generic)) or part is None:
        return False
    dtype = getattr(part, "dtype", None)
    if dtype is None or not hasattr(part, "shape"):
        return False
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).kind in "iu"
