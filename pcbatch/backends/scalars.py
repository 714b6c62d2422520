"""ndarray behaviour shared by the per-example array views of every backend.

`pcbatch.backends.batched_array.BatchedArray` (NumPy) and
`pcbatch.backends.numpy_dispatch.Dispatched` (JAX, TensorFlow) both stand for ONE
example's value; what an ndarray (or a NumPy scalar, which is what indexing one
example's row gives) does with it is written here once, with NumPy calls that each
view sends to its own library.
"""

from __future__ import annotations

import numpy as np


class BatchedValueError(TypeError):
    """A batched value was used where one Python value is needed."""


class OtherLibraryError(TypeError):
    """A per-example value met a function that cannot take it: another array library's
    (``tf.reduce_sum`` on the JAX backend), or NumPy's on what a traced library
    function returned. The message says what to write instead."""


class OtherLibraryCall(BatchedValueError):
    """On the NumPy backend, another library's function (``tf.*``, ``jnp.*``) got a
    per-example value: the primitive runs one example at a time instead."""

    def __init__(self, library: str, backend: str):
        super().__init__(
            f"a {library} function got a per-example value of the NumPy backend; call "
            f"the batched function with {library} arrays (or pass backend={backend}) to "
            f"batch {library} code"
        )


#: ndarray methods that are the same-named NumPy function applied to the array
#: (``x.sum(axis=0)`` is ``np.sum(x, axis=0)``); other attribute names are not
#: turned into functions (``x.size`` is data, not ``np.size``).
NDARRAY_FUNCTION_METHODS = frozenset(
    """all any argmax argmin argsort clip conj conjugate cumprod cumsum diagonal dot max
    mean min prod repeat round squeeze std sum swapaxes take trace var""".split()  # noqa: SIM905
)

#: the dtype of ``np.asarray(x.item())`` by the kind of ``x``'s dtype: a Python
#: bool, int, float or complex, as NumPy stacks them
_PYTHON_SCALAR_DTYPES = {
    "b": np.dtype(bool),
    "i": np.dtype(np.int64),
    "u": np.dtype(np.int64),
    "f": np.dtype(np.float64),
    "c": np.dtype(np.complex128),
}


def ndarray_method(value, name: str):
    """``value.name`` for a per-example view: only ndarray's methods that are the
    same-named NumPy function of the array, called through NumPy's function so that its
    dispatch applies as to ``np.name(x)``. An attribute that is data on an ndarray
    (``size``, ``real``) must not become a function, and a protocol probe
    (``hasattr(x, "__array_priority__")``) gets a plain AttributeError."""
    if name.startswith("_"):
        raise AttributeError(name)
    if name not in NDARRAY_FUNCTION_METHODS:
        raise AttributeError(
            f"{name!r}: pcbatch supports these ndarray methods on per-example values: "
            f"{', '.join(sorted(NDARRAY_FUNCTION_METHODS))}; call np.{name}(x) instead"
        )
    if name == "clip":
        return lambda *args, **kwargs: _clip_method(value, *args, **kwargs)
    function = getattr(np, name)
    return lambda *args, **kwargs: function(value, *args, **kwargs)


def _clip_method(value, min=None, max=None, **kwargs):  # noqa: A002 - ndarray.clip's names
    """``x.clip(lo)``, ``x.clip(max=hi)``: ndarray's method takes either bound alone,
    where ``np.clip`` takes both."""
    if min is None and max is None:
        raise ValueError("One of max or min must be given")  # NumPy's words
    if max is None:
        return np.maximum(value, min, **kwargs)
    if min is None:
        return np.minimum(value, max, **kwargs)
    return np.clip(value, min, max, **kwargs)


def as_python_scalar(x):
    """``x.item()`` for one example: its only element, with the dtype NumPy gives the
    Python scalar ``item()`` returns (float64 for any float, int64 for any integer)."""
    if x.size != 1:
        raise ValueError(
            f"item() of a per-example value of shape {x.shape}: only an array of size 1 "
            "converts to a Python scalar (as in NumPy)"
        )
    from pcbatch.backends import weak

    return weak.mark(x.reshape(()).astype(_PYTHON_SCALAR_DTYPES[x.dtype.kind]))


def as_python_round(x, ndigits=None):
    """Python's ``round(x)`` / ``round(x, ndigits)`` on one example's NumPy scalar:
    an int (int64) without ``ndigits``, ``x``'s dtype with it (both round half to even)."""
    if x.ndim:
        raise TypeError(
            f"round() of a per-example array (shape {x.shape}): Python's round takes one "
            "number (on an ndarray it raises); use np.round(x) or x.round() for arrays"
        )
    from pcbatch.backends import weak

    if ndigits is None:
        return weak.mark(np.round(x).astype(np.int64))  # a Python int
    if weak.is_marked(x) and np.dtype(x.dtype).kind == "f":
        return weak.mark(python_float_round(x, ndigits))  # a Python float
    return np.round(x, ndigits)  # NumPy's scalar rounds as np.round (2.675 -> 2.68)


#: Dekker's splitters, 2**ceil(mantissa bits / 2) + 1, by float dtype
_SPLITTERS = {"float64": 134217729.0, "float32": 4097.0, "float16": 65.0}


def _two_product(a, b, dtype: str = "float64"):
    """``(p, e)`` with ``p + e == a * b`` exactly (Dekker; no fused multiply-add): the
    rounding error of a product, for operands far from overflow."""
    splitter = _SPLITTERS[dtype]
    p = a * b
    a_big = splitter * a
    a_hi = a_big - (a_big - a)
    a_lo = a - a_hi
    b_big = splitter * b
    b_hi = b_big - (b_big - b)
    b_lo = b - b_hi
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def python_float_round(x, ndigits: int):
    """Python's ``round(f, ndigits)`` of a Python float per example: half to even on
    ``f``'s exact binary value, then the nearest float. NumPy scales first and rounds the
    scaled value, which is not exact: ``np.round(2.675, 2)`` is 2.68 where Python gives
    2.67 (2.675 is 2.67499999999999982...). The scaled value's rounding error (an exact
    product, `_two_product`) moves NumPy's candidate by one where it crossed a midpoint.
    Scales of 10**0 to 10**22 are exact floats; past them, and where the scaled value
    is 2**52 or more (no digit left to round), NumPy's answer stands."""
    ndigits = int(ndigits)
    x = x.as_strong() if hasattr(x, "as_strong") else x  # float64 arithmetic, unchecked
    if not -22 <= ndigits <= 22:
        return np.round(x, ndigits)
    with np.errstate(all="ignore"):  # inf and nan pass through, as in Python
        return _rounded_to_digits(x, ndigits)


def _rounded_to_digits(x, ndigits: int):
    scale = 10.0 ** abs(ndigits)
    if ndigits >= 0:
        scaled, error = _two_product(x, scale)
    else:
        scaled = x / scale
    candidate = np.rint(scaled)
    if ndigits >= 0:
        # the exact scaled value is scaled + error, and scaled - candidate is exact
        offset = scaled - candidate
        up = (offset == 0.5) & (error > 0)
        down = (offset == -0.5) & (error < 0)
    else:
        # x against the midpoints (candidate +- 0.5) * scale, each an exact product
        above, above_error = _two_product(candidate + 0.5, scale)
        below, below_error = _two_product(candidate - 0.5, scale)
        # (an exact tie divides exactly: rint chose the even side already)
        up = (x > above) | ((x == above) & (above_error < 0))
        down = (x < below) | ((x == below) & (below_error > 0))
    exact = np.isfinite(scaled) & (np.abs(scaled) < 2.0**52)
    candidate = candidate + np.where(exact & up, 1.0, 0.0) - np.where(exact & down, 1.0, 0.0)
    result = divided(candidate, scale) if ndigits >= 0 else candidate * scale
    result = np.copysign(result, x)  # round(-0.001, 2) is -0.0, as Python's
    return np.where(exact, result, x if ndigits >= 0 else np.round(x, ndigits))


def divided(a, b, dtype: str = "float64", xp=np):
    """``a / b`` correctly rounded where XLA multiplies by the reciprocal of a constant
    divisor instead (1 ulp off in a third of cases): one correction by the exact
    residual (`_two_product`); an infinite or nan quotient stands. ``xp``: the arrays'
    library (NumPy for per-example views)."""
    quotient = a / b
    product, error = _two_product(quotient, b, dtype)
    correction = ((a - product) - error) / b
    return xp.where(xp.isfinite(correction), quotient + correction, quotient)
