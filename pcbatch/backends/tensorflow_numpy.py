"""NumPy functions that ``tf.experimental.numpy`` lacks, written in TensorFlow's
operations with NumPy's meaning: order statistics (``median``, ``percentile``,
``quantile``, linear method), the NaN-ignoring reductions, ``trapezoid``,
``searchsorted``, ``interp``, ``var``/``std`` with ``ddof``, and ``argmax``/``argmin``
(NumPy's: the first NaN, else the first extreme item; TensorFlow's skipped NaN).

Each follows NumPy's own formulas, so that the values agree to the last bit where the
operations do: ``median`` averages the two middle items (``(a + b) / 2``) where the
length is even; ``quantile`` takes the virtual index ``(n - 1) * q`` and NumPy's
``lerp`` (from the upper item where the fraction is at least 0.5). A NaN makes an order
statistic NaN, as in NumPy. Only the arguments listed are taken; any other (``out=``,
``weights=``, another ``method=``) is a ``TypeError`` naming it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["REPLACED"]


def _tf():
    import tensorflow as tf

    return tf


def _refuse(function: str, **given) -> None:
    for name, value in given.items():
        if value is not None and value is not False:
            raise TypeError(f"np.{function}({name}=...) is not supported on TensorFlow")


def _float(a):
    """NumPy's order statistics and means give floats for integer input (float64)."""
    tf = _tf()
    a = tf.convert_to_tensor(a)
    return a if a.dtype.is_floating else tf.cast(a, tf.float64)


def _float64(q):
    """``q`` (a number, list, NumPy array or tensor) as a float64 tensor, as NumPy reads
    the quantiles (``np.asanyarray(q)``, then float64 arithmetic)."""
    tf = _tf()
    if isinstance(q, (int, float, list, tuple, np.ndarray, np.generic)):
        return tf.constant(np.asarray(q, dtype=np.float64))
    return tf.cast(q, tf.float64)


def _last_axis(a, axis):
    """``a`` with ``axis`` moved last (flattened when None), and that axis's position."""
    tf = _tf()
    if axis is None:
        return tf.reshape(a, [-1]), None
    rank = len(a.shape)
    axis = axis % rank
    order = [k for k in range(rank) if k != axis] + [axis]
    return tf.transpose(a, order), axis


def _restore(result, a, axis, keepdims: bool):
    """``result`` (the reduced axis gone) with it back as length 1 under ``keepdims``."""
    tf = _tf()
    if not keepdims:
        return result
    if axis is None:
        return tf.reshape(result, [1] * len(a.shape))
    return tf.expand_dims(result, axis)


def _sorted_with_nan(a):
    """``a`` sorted along its last axis, and whether each row holds a NaN."""
    tf = _tf()
    nan = tf.math.is_nan(a)
    rows_nan = tf.reduce_any(nan, axis=-1)
    return tf.sort(tf.where(nan, tf.constant(np.inf, a.dtype), a), axis=-1), rows_nan


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    tf = _tf()
    _refuse("median", out=out)
    a = _float(a)
    moved, axis_ = _last_axis(a, axis)
    ordered, nan = _sorted_with_nan(moved)
    n = int(moved.shape[-1])
    if n == 0:
        raise IndexError("np.median of an empty axis")
    half = n // 2
    if n % 2:
        result = ordered[..., half]
    else:
        result = (ordered[..., half - 1] + ordered[..., half]) / tf.constant(2, a.dtype)
    result = tf.where(nan, tf.constant(np.nan, a.dtype), result)
    return _restore(result, a, axis_, keepdims)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    tf = _tf()
    _refuse("quantile", out=out, weights=weights, interpolation=interpolation,
            keepdims=keepdims)
    if method != "linear":
        raise TypeError(f"np.quantile(method={method!r}) is not supported on TensorFlow")
    a = _float(a)
    moved, axis_ = _last_axis(a, axis)
    ordered, nan = _sorted_with_nan(moved)
    n = int(moved.shape[-1])
    q = _float64(q)
    virtual = tf.constant(n - 1, tf.float64) * q  # NumPy's virtual index, linear method
    below = tf.clip_by_value(tf.floor(virtual), 0, n - 1)
    above = tf.clip_by_value(below + 1, 0, n - 1)
    fraction = tf.cast(virtual - below, a.dtype)
    low = tf.gather(ordered, tf.cast(below, tf.int64), axis=-1)
    high = tf.gather(ordered, tf.cast(above, tf.int64), axis=-1)
    step = high - low
    result = tf.where(fraction >= 0.5, high - step * (1 - fraction), low + step * fraction)
    nan = tf.reshape(nan, nan.shape + [1] * len(q.shape))
    result = tf.where(nan, tf.constant(np.nan, a.dtype), result)
    rank = len(result.shape)  # NumPy puts q's axes first
    q_axes = list(range(rank - len(q.shape), rank))
    return tf.transpose(result, q_axes + list(range(rank - len(q.shape))))


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    q = _float64(q) / 100  # NumPy's true_divide(q, 100), in float64
    return quantile(a, q, axis, out, overwrite_input, method, keepdims,
                    weights=weights, interpolation=interpolation)


def _nan_reduction(name: str, fill: float, reduce: Callable, all_nan_is_nan: bool):
    def reduction(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        tf = _tf()
        _refuse(f"nan{name}", dtype=dtype, out=out, **{k: v for k, v in kwargs.items()})
        a = tf.convert_to_tensor(a)
        if not a.dtype.is_floating:
            return reduce(a, axis=axis, keepdims=keepdims)
        nan = tf.math.is_nan(a)
        result = reduce(tf.where(nan, tf.constant(fill, a.dtype), a), axis=axis,
                        keepdims=keepdims)
        if all_nan_is_nan:
            every = tf.reduce_all(nan, axis=axis, keepdims=keepdims)
            result = tf.where(every, tf.constant(np.nan, a.dtype), result)
        return result

    reduction.__name__ = f"nan{name}"
    return reduction


def _reduce_sum(a, axis, keepdims):
    return _tf().reduce_sum(a, axis=axis, keepdims=keepdims)


def _nanmean(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
    tf = _tf()
    _refuse("nanmean", dtype=dtype, out=out, **kwargs)
    a = _float(a)
    nan = tf.math.is_nan(a)
    total = tf.reduce_sum(tf.where(nan, tf.zeros_like(a), a), axis=axis, keepdims=keepdims)
    count = tf.reduce_sum(tf.cast(tf.logical_not(nan), a.dtype), axis=axis, keepdims=keepdims)
    return total / count  # 0 / 0: NaN where every item is NaN, as NumPy gives


def trapezoid(y, x=None, dx=1.0, axis=-1):
    tf = _tf()
    y = _float(y)
    moved, _ = _last_axis(y, axis)
    if x is None:
        d = tf.constant(dx, y.dtype)
    else:
        x = tf.cast(tf.convert_to_tensor(x), y.dtype)
        if len(x.shape) != 1:
            raise TypeError("np.trapezoid with a multi-dimensional x is not supported on "
                            "TensorFlow: pass x of one dimension")
        d = x[1:] - x[:-1]
    return tf.reduce_sum(d * (moved[..., 1:] + moved[..., :-1]) / tf.constant(2, y.dtype), -1)


def searchsorted(a, v, side="left", sorter=None):
    tf = _tf()
    _refuse("searchsorted", sorter=sorter)
    a, v = tf.convert_to_tensor(a), tf.convert_to_tensor(v)
    if len(a.shape) != 1:
        raise ValueError("object too deep for desired array")  # NumPy's words
    dtype = tf.experimental.numpy.result_type(a.dtype, v.dtype)
    found = tf.searchsorted(
        tf.cast(a, dtype)[None], tf.reshape(tf.cast(v, dtype), [1, -1]), side=side,
        out_type=tf.int64,
    )
    return tf.reshape(found, tf.shape(v))


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    """NumPy's: the mean subtracted, squares summed, divided by ``max(n - ddof, 0)``
    (TensorFlow's NumPy takes no ``ddof``)."""
    tf = _tf()
    _refuse("var", out=out, where=where, mean=mean)
    if correction is not None:
        ddof = correction
    a = _float(a) if dtype is None else tf.cast(a, tf.as_dtype(np.dtype(dtype)))
    count = int(np.prod([a.shape[k] for k in _axes(axis, len(a.shape))], dtype=np.int64))
    centred = a - tf.reduce_sum(a, axis=axis, keepdims=True) / tf.constant(count, a.dtype)
    total = tf.reduce_sum(centred * centred, axis=axis, keepdims=keepdims)
    return total / tf.constant(max(count - ddof, 0), a.dtype)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        mean=None, correction=None):
    return _tf().sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                          correction=correction))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """NumPy's: `var` of the items that are not NaN, NaN where ``n - ddof <= 0`` (every
    item NaN, say). TensorFlow's NumPy has none."""
    tf = _tf()
    _refuse("nanvar", out=out, where=where, mean=mean)
    if correction is not None:
        ddof = correction
    a = _float(a) if dtype is None else tf.cast(a, tf.as_dtype(np.dtype(dtype)))
    nan = tf.math.is_nan(a)
    zero = tf.zeros_like(a)
    count = tf.reduce_sum(tf.cast(tf.logical_not(nan), a.dtype), axis=axis, keepdims=True)
    centre = tf.reduce_sum(tf.where(nan, zero, a), axis=axis, keepdims=True) / count
    centred = tf.where(nan, zero, a - centre)
    total = tf.reduce_sum(centred * centred, axis=axis, keepdims=keepdims)
    freedom = tf.reduce_sum(tf.cast(tf.logical_not(nan), a.dtype), axis=axis,
                            keepdims=keepdims) - tf.constant(ddof, a.dtype)
    positive = freedom > 0
    spread = total / tf.where(positive, freedom, tf.ones_like(freedom))
    return tf.where(positive, spread, tf.constant(np.nan, a.dtype))


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    return _tf().sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                             correction=correction))


def interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's piecewise-linear interpolation, in float64: ``fp[j]`` where ``x`` is
    ``xp[j]`` itself, else the slope from ``xp[j]`` (from ``xp[j + 1]`` where that gives
    NaN), ``left``/``right`` (``fp[0]``/``fp[-1]``) outside, NaN for a NaN ``x``."""
    tf = _tf()
    _refuse("interp", period=period)
    x = tf.cast(tf.convert_to_tensor(x), tf.float64)
    xp = tf.cast(tf.convert_to_tensor(xp), tf.float64)
    fp = tf.cast(tf.convert_to_tensor(fp), tf.float64)
    n = int(xp.shape[0])
    if n == 0:
        raise ValueError("array of sample points is empty")  # NumPy's words
    low = fp[0] if left is None else tf.cast(left, tf.float64)
    high = fp[n - 1] if right is None else tf.cast(right, tf.float64)
    if n == 1:  # NumPy's own case: a NaN x compares neither below nor above
        return tf.where(x < xp[0], low, tf.where(x > xp[0], high, fp[0]))
    j = searchsorted(xp, x, side="right") - 1  # xp[j] <= x < xp[j + 1]
    at = tf.clip_by_value(j, 0, n - 2)
    x0, f0 = tf.gather(xp, at), tf.gather(fp, at)
    x1, f1 = tf.gather(xp, at + 1), tf.gather(fp, at + 1)
    slope = (f1 - f0) / (x1 - x0)
    inner = slope * (x - x0) + f0
    inner = tf.where(tf.math.is_nan(inner), slope * (x - x1) + f1, inner)
    inner = tf.where(tf.math.is_nan(inner) & (f0 == f1), f0, inner)
    inner = tf.where(x0 == x, f0, inner)
    result = tf.where(j == n - 1, fp[n - 1], inner)
    result = tf.where(x < xp[0], low, tf.where(x > xp[n - 1], high, result))
    return tf.where(tf.math.is_nan(x), x, result)


def _axes(axis, rank: int) -> list:
    if axis is None:
        return list(range(rank))
    return [k % rank for k in (axis if isinstance(axis, (tuple, list)) else (axis,))]


def _arg_extremum(name: str, largest: bool) -> Callable:
    """``np.argmax``/``np.argmin``: the index of the first NaN along the axis if there is
    one (NaN is the extreme, as NumPy propagates it), else of the first extreme item.
    TensorFlow's argmax ignored NaN: ``[2.5, nan]`` gave 0 where NumPy gives 1."""

    def arg(a, axis=None, out=None, *, keepdims=False):
        _refuse(name, out=out)
        tf = _tf()
        a = tf.convert_to_tensor(a)
        if a.dtype == tf.bool:
            a = tf.cast(a, tf.int8)
        moved, axis = _last_axis(a, axis)
        reduce = tf.reduce_max if largest else tf.reduce_min
        hit = tf.equal(moved, reduce(moved, axis=-1, keepdims=True))
        if a.dtype.is_floating:
            nan = tf.math.is_nan(moved)
            hit = tf.where(tf.reduce_any(nan, axis=-1, keepdims=True), nan, hit)
        size = tf.shape(moved, out_type=tf.int64)[-1]
        positions = tf.range(size, dtype=tf.int64)
        index = tf.reduce_min(tf.where(hit, positions, size), axis=-1)
        if keepdims:
            index = tf.reshape(index, [1] * len(a.shape)) if axis is None else (
                tf.expand_dims(index, axis))
        return index

    return arg


#: name -> (tf.experimental.numpy -> the function), as `numpy_dispatch._REPLACED` takes them
REPLACED = {
    "median": lambda xp: median,
    "quantile": lambda xp: quantile,
    "percentile": lambda xp: percentile,
    "nansum": lambda xp: _nan_reduction("sum", 0.0, _reduce_sum, False),
    "nanmax": lambda xp: _nan_reduction(
        "max", -np.inf, lambda a, axis, keepdims: _tf().reduce_max(a, axis, keepdims), True),
    "nanmin": lambda xp: _nan_reduction(
        "min", np.inf, lambda a, axis, keepdims: _tf().reduce_min(a, axis, keepdims), True),
    "nanmean": lambda xp: _nanmean,
    "trapezoid": lambda xp: trapezoid,
    "searchsorted": lambda xp: searchsorted,
    "interp": lambda xp: interp,
    "var": lambda xp: var,
    "std": lambda xp: std,
    "nanvar": lambda xp: nanvar,
    "nanstd": lambda xp: nanstd,
    "argmax": lambda xp: _arg_extremum("argmax", largest=True),
    "argmin": lambda xp: _arg_extremum("argmin", largest=False),
}
