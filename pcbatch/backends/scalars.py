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
    if ndigits is not None:
        return np.round(x, ndigits)
    from pcbatch.backends import weak

    return weak.mark(np.round(x).astype(np.int64))  # a Python int
