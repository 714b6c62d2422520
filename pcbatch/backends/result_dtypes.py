"""NumPy's result dtypes where JAX's and TensorFlow's NumPy choose others.

Per example, the user's ``np.cumsum(int8_v)`` is int64, ``np.mean(int_v)`` float64 and
``np.sqrt(int32_n)`` float64: NumPy's rules. JAX kept int8 (and wrapped), made the mean
float32 and computed every float function of integers in float32; TensorFlow kept
``np.trace`` of int8 in int8 and failed on ``np.floor`` of integers. The dispatching
view (`pcbatch.backends.numpy_dispatch.Dispatched`) applies these rules before it
calls the library: `result_dtype` (a ``dtype=`` for reductions), `float_input`
(functions without one) and `numpy_loop` (ufuncs, by ``ufunc.resolve_dtypes``).
"""

from __future__ import annotations

import numpy as np

from pcbatch.backends.foreign import TF_NUMPY, available, is_foreign_array, numpy_dtype

#: NumPy sums and multiplies booleans and integers narrower than 64 bits in int64 (uint64
#: for unsigned ones): ``np.cumsum(int8_v)`` does not wrap at 127. JAX's cumsum and
#: cumprod kept int8 and wrapped, TensorFlow's trace too.
WIDENING = frozenset({
    np.sum, np.prod, np.cumsum, np.cumprod, np.trace,
    np.nansum, np.nanprod, np.nancumsum, np.nancumprod,
})
#: NumPy's mean, variance and standard deviation of integers are float64 (JAX's mean of
#: int8 was float32)
_FLOAT_OF_INTEGERS = frozenset({np.mean, np.var, np.std, np.nanmean, np.nanvar, np.nanstd})


def unsigned(args: tuple) -> bool:
    return bool(args) and is_foreign_array(args[0]) and numpy_dtype(args[0]).kind == "u"


def result_dtype(func, args: tuple, kwargs: dict, xp) -> dict:
    """``kwargs`` with the ``dtype`` NumPy would compute ``func`` of booleans or integers
    in, where the library would choose another; unchanged if the caller gave one."""
    if "dtype" in kwargs or not args or not is_foreign_array(args[0]):
        return kwargs
    dtype = numpy_dtype(args[0])
    if dtype.kind not in "biu":
        return kwargs
    if func in WIDENING and (dtype.kind == "b" or dtype.itemsize < 8):
        # uint64 would be NumPy's for unsigned ones; XLA under TensorFlow has no uint64
        # cumsum, and int64 holds any sum of narrower unsigned values the same
        wide = np.uint64 if dtype.kind == "u" and xp.__name__ != TF_NUMPY else np.int64
        return {**kwargs, "dtype": available(wide, xp)}
    if func in _FLOAT_OF_INTEGERS:
        return {**kwargs, "dtype": available(np.float64, xp)}
    return kwargs


#: functions with no ``dtype`` argument that NumPy computes in float64 for integers (JAX
#: in float32)
_FLOAT_INPUT = frozenset({np.average, np.median, np.nanmedian, np.percentile, np.quantile})


def float_input(func, args: tuple, xp) -> tuple:
    if func not in _FLOAT_INPUT or not args or not is_foreign_array(args[0]):
        return args
    if numpy_dtype(args[0]).kind not in "biu":
        return args
    return (xp.asarray(args[0], dtype=available(np.float64, xp)), *args[1:])


def numpy_loop(ufunc, inputs: tuple, xp) -> tuple:
    """``(inputs, narrowed)``: the operands in the dtypes of the loop NumPy runs ``ufunc``
    in, and the dtype to round the result to (or None). NumPy computes ``np.sqrt(int8)``
    in float16 and ``np.sqrt(int32)`` in float64, where JAX computed both in float32 and
    TensorFlow failed; and NumPy's float16 loops compute in float32 and round the result,
    where JAX's ``exp2`` in float16 gave 8.01 for 8. (Integer loops need nothing.)"""
    if ufunc.nout != 1 or not all(is_foreign_array(x) or isinstance(x, np.ndarray)
                                  for x in inputs):
        return inputs, None
    dtypes = tuple(numpy_dtype(x) for x in inputs)
    if not any(d.kind in "biu" or d == np.float16 for d in dtypes) and ufunc is not np.float_power:
        return inputs, None  # (float_power computes float32 in float64: JAX, TF did not)
    try:
        loop = ufunc.resolve_dtypes((*dtypes, None))
    except (TypeError, ValueError):
        return inputs, None  # no loop: the library says so itself
    *wanted, out = loop
    if all(d.kind in "biu" for d in wanted):
        if xp.__name__ == TF_NUMPY and ufunc.__name__ in _TF_FLOAT_ONLY:
            float64 = available(np.float64, xp)
            return tuple(xp.asarray(x, dtype=float64) for x in inputs), out
        # booleans in NumPy's int8 loop (``np.square(flags)`` is int8; JAX gave int32)
        return tuple(
            xp.asarray(x, dtype=available(w, xp)) if d.kind == "b" and w.kind != "b" else x
            for x, d, w in zip(inputs, dtypes, wanted)
        ), None
    computing = [np.dtype(np.float32) if d == np.float16 else d for d in wanted]
    inputs = tuple(
        x if d == c else xp.asarray(x, dtype=available(c, xp))
        for x, d, c in zip(inputs, dtypes, computing)
    )
    return inputs, (out if out == np.float16 else None)


#: ufuncs TensorFlow's NumPy takes floats only for (``np.floor(int8_v)`` is int8 in
#: NumPy: computed in float64 there and converted back, exactly)
_TF_FLOAT_ONLY = frozenset({"floor", "ceil", "trunc", "isnan", "isinf", "isfinite"})


#: functions whose results are indices or counts, int64 (intp) in NumPy: JAX gave int32
#: for searchsorted, digitize and argpartition with x64 on, and float64 counts for
#: histogram (which NumPy counts in int64 unless weighted or a density)
_INDICES = frozenset({
    np.searchsorted, np.digitize, np.argpartition, np.argmax, np.argmin, np.nanargmax,
    np.nanargmin, np.lexsort, np.count_nonzero, np.ravel_multi_index,
})
_COUNTS = frozenset({np.histogram, np.bincount})


def numpy_indices(func, kwargs: dict, result, xp):
    """``result`` with NumPy's int64 indices and counts (where it has them)."""
    if func in _INDICES and is_foreign_array(result) and numpy_dtype(result).kind in "iu":
        return _as_int64(result, xp)
    if func in _COUNTS and kwargs.get("weights") is None and not kwargs.get("density"):
        if func is np.bincount:
            return _as_int64(result, xp)
        counts, edges = result
        return _as_int64(counts, xp), edges
    return result


def _as_int64(array, xp):
    want = available(np.int64, xp)
    return array if numpy_dtype(array) == want else xp.asarray(array, dtype=want)
