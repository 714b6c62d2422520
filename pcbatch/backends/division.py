"""NumPy's division ufuncs (``//``, ``%``, ``divmod``, ``np.fmod``) on JAX and TensorFlow,
to NumPy's values at the edges.

Per example, the user's ``a // b`` on NumPy arrays runs NumPy's loops. JAX's and
TensorFlow's counterparts agree with them on ordinary operands and differ, silently, at
the edges (measured on jax 0.10 and TensorFlow 2.21):

- an integer divided by zero: NumPy's quotient and remainder are 0 (with a
  RuntimeWarning); XLA's quotient is -1 or -2, TensorFlow's remainder the dividend;
- floats: TensorFlow's ``inf // 2`` is inf where NumPy's is nan, ``1.0 // -inf`` is -0.0
  where NumPy's is -1.0; both libraries give some zeros the other sign;
- TensorFlow's NumPy has no ``fmod``.

`numpy_exact` wraps a library's counterpart so that it computes NumPy's values: integer
operands divide by 1 where the divisor is 0 and get NumPy's 0 there; float operands
follow NumPy's own floor-division algorithm (C's ``fmod``, then the sign correction,
then the rounding of the quotient), written in the library's operations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["UFUNCS", "numpy_exact"]

#: the ufuncs `numpy_exact` handles
UFUNCS = frozenset({"floor_divide", "remainder", "divmod", "fmod"})


def numpy_exact(name: str, function: Callable | None, xp) -> Callable:
    """``function`` (the library's counterpart of NumPy's ufunc ``name``, None if it
    has none) made to compute NumPy's values; two operands, already promoted."""

    def run(a, b):
        kinds = {_kind(a), _kind(b)}
        if kinds <= set("biu"):
            return _integer(name, function, xp, a, b, bools=kinds == {"b"})
        if kinds <= set("biuf"):
            return _float(name, xp, a, b)
        return _library(name, function, xp)(a, b)  # complex: the library's own error

    return run


def _kind(x: Any) -> str:
    if isinstance(x, bool):
        return "b"
    if isinstance(x, int):
        return "i"
    if isinstance(x, float):
        return "f"
    dtype = getattr(x, "dtype", None)
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).kind if dtype is not None else "O"


def _library(name: str, function: Callable | None, xp) -> Callable:
    if function is not None:
        return function
    if name == "fmod":  # TensorFlow's NumPy has none; C's fmod is truncatemod
        return _tensorflow_fmod
    raise TypeError(f"{xp.__name__} has no {name}")


def _integer(name: str, function, xp, a, b, bools: bool):
    """NumPy's integer division: 0 (quotient and remainder) where the divisor is 0."""
    if bools:  # NumPy divides booleans as int8
        a, b = xp.asarray(a, dtype=np.int8), xp.asarray(b, dtype=np.int8)
    if _nonzero_constant(b):  # ``n // 2``, ``x // np.uint32(256)``: nothing to guard
        return _library(name, function, xp)(a, b)
    b = xp.asarray(b)
    zero = xp.equal(b, xp.zeros_like(b))
    divided = _library(name, function, xp)(a, xp.where(zero, xp.ones_like(b), b))
    if isinstance(divided, tuple):
        return tuple(xp.where(zero, xp.zeros_like(r), r) for r in divided)
    return xp.where(zero, xp.zeros_like(divided), divided)


def _nonzero_constant(b) -> bool:
    """A divisor the same in every example (a literal, a NumPy constant), with no zero."""
    return isinstance(b, (int, np.integer, np.ndarray)) and bool(np.all(np.asarray(b) != 0))


def _float(name: str, xp, a, b):
    dtype = xp.result_type(a, b)
    a, b = xp.asarray(a, dtype=dtype), xp.asarray(b, dtype=dtype)
    if name == "fmod":
        return _fmod(xp, a, b)
    quotient, remainder = _floor_divmod(xp, a, b)
    return {"floor_divide": quotient, "remainder": remainder}.get(name, (quotient, remainder))


def _fmod(xp, a, b):
    fmod = getattr(xp, "fmod", None)
    return fmod(a, b) if fmod is not None else _tensorflow_fmod(a, b)


def _tensorflow_fmod(a, b):
    """C's ``fmod``: TensorFlow's ``truncatemod``, which takes no int8/int16/unsigned
    operands; those compute in int64 (the remainder is smaller than the divisor)."""
    import tensorflow as tf

    a, b = tf.convert_to_tensor(a), tf.convert_to_tensor(b)
    if a.dtype.is_floating or a.dtype in (tf.int32, tf.int64):
        return tf.truncatemod(a, b)
    wide = tf.truncatemod(tf.cast(a, tf.int64), tf.cast(b, tf.int64))
    return tf.cast(wide, a.dtype)


def _floor_divmod(xp, a, b) -> tuple:
    """NumPy's float ``divmod``: the remainder takes the divisor's sign, the quotient is
    rounded to the integer nearest ``(a - remainder) / b``; a zero divisor gives
    ``(a / b, nan)``; zeros keep the signs NumPy gives them."""
    zero, one = xp.zeros_like(a), xp.ones_like(a)
    mod = _fmod(xp, a, b)
    by_zero = xp.equal(b, zero)
    safe_b = xp.where(by_zero, one, b)
    div = (a - mod) / safe_b
    has_mod = xp.not_equal(mod, zero)
    flip = xp.logical_and(has_mod, xp.not_equal(xp.less(b, zero), xp.less(mod, zero)))
    mod = xp.where(flip, mod + b, xp.where(has_mod, mod, _signed_zero(xp, b, zero)))
    div = xp.where(flip, div - one, div)
    floor = xp.floor(div)
    floor = xp.where(xp.greater(div - floor, one / (one + one)), floor + one, floor)
    quotient = xp.where(xp.not_equal(div, zero), floor, _signed_zero(xp, a / safe_b, zero))
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = xp.where(by_zero, a / b, quotient)
    return quotient, xp.where(by_zero, _fmod(xp, a, b), mod)


def _signed_zero(xp, like, zero):
    """0.0 with the sign of ``like`` (TensorFlow's ``signbit`` reads -0.0 as positive;
    ``1 / -0.0`` is -inf)."""
    with np.errstate(divide="ignore"):
        negative = xp.less(xp.where(xp.equal(like, zero), (zero + 1) / like, like), zero)
    return xp.where(negative, -zero, zero)
