"""NumPy's integer-array indexing for TensorFlow, whose ``tensor[...]`` has none.

``v[k]`` with ``k`` an integer array (``v[np.array([0, 2])]``, ``v[[0, 2]]``,
``m[:, k]``, ``m[i, j]`` with per-example index arrays) selects items as NumPy does:
the indexed axes are gathered together (``tf.gather_nd``), and the broadcast shape of
the index arrays takes their place when they are adjacent in the index, else goes first
(NumPy's rule; an integer beside an index array counts as one). The index is already in
bounds here (`pcbatch.backends.bounds.checked_index`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pcbatch.backends import per_example


def needs_gather(index: Any) -> bool:
    """Whether ``index`` holds an integer array (NumPy's advanced indexing)."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(per_example.is_integer_array(p) for p in parts)


def as_arrays(index: Any) -> Any:
    """``index`` with each list of integers as an array, as NumPy reads it."""
    if isinstance(index, tuple):
        return tuple(as_arrays(p) for p in index)
    if isinstance(index, list):
        array = np.asarray(index)
        if array.dtype.kind in "iu" or (array.size == 0 and array.dtype.kind == "f"):
            return array.astype(np.int64)
    return index


def gather(value: Any, index: Any) -> Any:
    """``value[index]`` with NumPy's meaning, ``index`` holding an integer array."""
    import tensorflow as tf

    parts = _full(list(index) if isinstance(index, tuple) else [index], len(value.shape))
    advanced = [k for k, p in enumerate(parts) if not isinstance(p, slice)]
    sliced = [k for k, p in enumerate(parts) if isinstance(p, slice)]
    value = value[tuple(p if isinstance(p, slice) else slice(None) for p in parts)]
    value = tf.transpose(value, advanced + sliced)
    arrays = [tf.cast(tf.convert_to_tensor(parts[k]), tf.int64) for k in advanced]
    shape = np.broadcast_shapes(*(tuple(a.shape) for a in arrays))
    arrays = [
        tf.broadcast_to(tf.where(a < 0, a + value.shape[i], a), shape)
        for i, a in enumerate(arrays)
    ]
    out = tf.gather_nd(value, tf.stack(arrays, axis=-1))
    if advanced != list(range(advanced[0], advanced[0] + len(advanced))):
        return out  # not adjacent: the index's axes come first, as in NumPy
    before, width, rest = advanced[0], len(shape), len(sliced)
    order = [*range(width, width + before), *range(width), *range(width + before, width + rest)]
    return tf.transpose(out, order)


def _full(parts: list, ndim: int) -> list:
    """The parts, one per axis: ``...`` spelled out, missing axes as ``:``."""
    if any(p is None for p in parts):
        raise IndexError(
            "np.newaxis (None) beside an integer array index is not supported on "
            "TensorFlow: index first, then add the axis (v[k][:, None])"
        )
    if any(p is Ellipsis for p in parts):
        at = next(k for k, p in enumerate(parts) if p is Ellipsis)
        parts[at : at + 1] = [slice(None)] * (ndim - len(parts) + 1)
    return parts + [slice(None)] * (ndim - len(parts))
