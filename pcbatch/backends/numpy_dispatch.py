"""NumPy code on other array libraries: ``np.sqrt(x)`` runs ``jnp.sqrt`` on a JAX array.

Users write primitives with NumPy. On a backend whose arrays are not NumPy's
(JAX tracers, TensorFlow tensors), pcbatch hands the primitive `Dispatched`
values instead: NumPy's own dispatch protocols (``__array_ufunc__``,
``__array_function__``) send every ufunc and array function to the same-named
function of the backend's NumPy-compatible namespace (``jax.numpy``,
``tf.experimental.numpy``), and the results come back wrapped again. So one
program runs on every backend unchanged.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch.backends import (
    advanced_indexing,
    bounds,
    division,
    linalg,
    per_example,
    result_dtypes,
    scalars,
    tensorflow_numpy,
)
from pcbatch.backends.foreign import (
    JAX_NUMPY,
    TF_NUMPY,
    available,
    is_foreign_array,
    numpy_dtype,
)
from pcbatch.backends.per_example import (
    PerExampleValue,
    fitted_ints,
    one_shape_argument,
    weak_operands,
    weak_ufunc,
    weakened,
)
from pcbatch.backends.scalars import BatchedValueError, OtherLibraryCall, OtherLibraryError
from pcbatch.ir.types import is_pattern_node, rebuild

#: NumPy's scalar types and ``np.asarray(v, dtype=...)`` read one Python number too
_CONVERSION_HINT = (
    "; to convert a per-example value's dtype (np.int8(v), np.asarray(v, dtype=np.int16)), "
    "write v.astype(np.int8)"
)


class Dispatched(PerExampleValue):
    """An array of another library, dressed so NumPy calls reach that library."""

    __slots__ = ("value", "xp")

    def __init__(self, value: Any, xp):
        self.value = value
        self.xp = xp

    @property
    def shape(self) -> tuple:
        return tuple(self.value.shape)

    @property
    def ndim(self) -> int:
        return len(self.value.shape)

    @property
    def dtype(self):
        return np.dtype(getattr(self.value.dtype, "as_numpy_dtype", self.value.dtype))

    @property
    def real(self):
        return self._wrap(self.xp.real(self.value))

    @property
    def imag(self):
        return self._wrap(self.xp.imag(self.value))

    def __repr__(self) -> str:
        return f"Dispatched({self.value!r})"

    def as_weak(self) -> Dispatched:
        return WeakDispatched(self.value, self.xp)

    def as_strong(self) -> Dispatched:
        return Dispatched(self.value, self.xp)

    def converted(self, dtype: np.dtype, wrap: bool = False) -> Dispatched:
        from pcbatch.backends import weak

        if not wrap:
            weak.note_conversion(self.value, dtype, self.xp)
        return Dispatched(self.xp.asarray(self.value, dtype=dtype), self.xp)

    # A batched value cannot become one Python value; these work on concrete values
    # (type inference's dummies, eager runs) and say what to write instead elsewhere.
    def __bool__(self) -> bool:
        return bool(self._one_value("bool (an if or while condition)"))

    def __int__(self) -> int:
        return int(self._one_value("int"))

    def __float__(self) -> float:
        return float(self._one_value("float"))

    def __index__(self) -> int:
        return int(self._one_value("index"))

    def _one_value(self, what: str):
        try:
            return np.asarray(self.value)
        except Exception:  # a tracer or a symbolic tensor: no value until it runs
            raise BatchedValueError(
                f"a value computed per example (shape {self.shape}) was used as a Python "
                f"{what} inside a plain helper, or by a builtin that needs one Python value "
                "(sorted(v), any(v), a tuple indexed by a per-example number, "
                "range(n) outside a for); each example may differ. Use NumPy's array "
                "functions (np.where instead of if, np.sort, np.any, np.stack(...)[i]), or "
                "decorate the helper with ctx.batch so its control flow is batched"
                f"{_CONVERSION_HINT if what != 'bool (an if or while condition)' else ''}"
            ) from None

    def __getitem__(self, index):
        per_example.refuse_value_slices(index, _is_per_example)
        index = advanced_indexing.as_arrays(unwrap(index))
        parts = index if isinstance(index, tuple) else (index,)
        if any(is_foreign_array(p) and numpy_dtype(p).kind == "b" for p in parts):
            # TensorFlow's mask inside its vectorizer gave wrong items, JAX refuses it
            per_example.refuse_boolean_mask()
        index = bounds.checked_index(self.shape, index, self.xp)
        if self.xp.__name__ == TF_NUMPY and advanced_indexing.needs_gather(index):
            return self._wrap(advanced_indexing.gather(self.value, index))
        return self._wrap(self.value[index])

    def astype(self, dtype, **kwargs):
        return self._wrap(self.xp.asarray(self.value, dtype=available(dtype, self.xp)))

    def reshape(self, *shape, **kwargs):
        return self._wrap(self.xp.reshape(self.value, one_shape_argument(shape), **kwargs))

    def copy(self):
        return self._wrap(self.xp.asarray(self.value))

    def transpose(self, *axes):
        return self._wrap(self.xp.transpose(self.value, one_shape_argument(axes) or None))

    # The backend's own functions on a per-example value (``tf.reduce_sum(x, axis=-1)``,
    # ``jnp.sum(x)``): the value converts to the array it wraps, which inside the
    # backend's map (tf.vectorized_map, jax.vmap) or a trace on one example holds ONE
    # example, so axes, shapes and reductions are the example's own.
    def __tf_tensor__(self, dtype=None, name=None):
        if self.xp.__name__ != TF_NUMPY:
            raise OtherLibraryError(_other_library("TensorFlow", self.xp))
        import tensorflow as tf

        value = self.value
        if dtype is None and self.weak and self.dtype.kind == "f":
            # One example's weak value is a Python float, which TensorFlow makes float32.
            value = tf.cast(value, tf.float32)
        return tf.convert_to_tensor(value, dtype=dtype, name=name)

    def __jax_array__(self):
        if self.xp.__name__ != JAX_NUMPY:
            raise OtherLibraryError(_other_library("JAX", self.xp))
        return self.value

    def _wrap(self, value):
        return wrap(value, self.xp)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs or method == "at":
            raise TypeError(_written_in_place(ufunc, method, self.xp))
        if any(type(x) is WeakDispatched for x in inputs):
            return weak_ufunc(self, ufunc, method, inputs, kwargs)
        function = getattr(self.xp, ufunc.__name__, None)
        if function is None and ufunc.__name__ in _UFUNC_ALIASES:
            function = getattr(self.xp, _UFUNC_ALIASES[ufunc.__name__], None)
        if ufunc.__name__ in division.UFUNCS and method == "__call__":
            function = division.numpy_exact(ufunc.__name__, function, self.xp)
        if self.xp.__name__ == TF_NUMPY and (function is None or ufunc.__name__ in _TF_OWN):
            function = _tensorflow_ufunc(ufunc.__name__, self.xp)
        if ufunc is np.modf:
            function = _modf(self.xp)
        if ufunc is np.frexp:
            function = _frexp(self.xp)
        if ufunc is np.heaviside and self.xp.__name__ == JAX_NUMPY:
            function = _jax_heaviside(self.xp)  # JAX 0.6 gave 0.5 for nan
        if self.xp.__name__ == TF_NUMPY and ufunc.__name__ in _UNSIGNED_LACKING:
            function = _tensorflow_unsigned(ufunc.__name__, function)
        if method in ("reduce", "accumulate", "outer"):
            return _ufunc_method(ufunc, method, inputs, kwargs)
        if method != "__call__" or function is None:
            return NotImplemented
        inputs = tuple(_numbers_as_array(x) for x in unwrap(inputs))  # v * [1, 2]: an array
        if ufunc.nin == 2 and ufunc.__name__ not in _MIXED_TYPE_UFUNCS:
            inputs = _numpy_promotion(inputs, self.xp)
        if ufunc is np.true_divide:
            inputs = _float_division(inputs, self.xp)
        if ufunc.__name__ in _COMPARISONS:
            inputs = _exact_int_comparison(inputs, self.xp)
        inputs = _weak_scalars(inputs)
        inputs, narrowed = result_dtypes.numpy_loop(ufunc, inputs, self.xp)
        if ufunc is np.power:
            function = _integer_power(self.xp)
            inputs = _checked_exponent(*inputs, xp=self.xp)
        result = function(*inputs, **unwrap(kwargs))
        if narrowed is not None:
            result = self.xp.asarray(result, dtype=narrowed)
        return self._wrap(result)

    def __array_function__(self, func, types, args, kwargs):
        per_example.refuse_ragged(func, args)
        if func in _SHAPE_FUNCTIONS and args and isinstance(args[0], Dispatched):
            return _SHAPE_FUNCTIONS[func](args[0], *args[1:], **kwargs)
        if func in _COMPOSED and args and isinstance(args[0], Dispatched):
            composed = _COMPOSED[func](*args, **kwargs)
            if composed is not NotImplemented:
                return composed
        target = _counterpart(func, self.xp)
        if target is None:
            library = "tf.*" if self.xp.__name__ == TF_NUMPY else "jnp.*"
            raise TypeError(
                f"{func.__module__}.{func.__name__} has no counterpart in "
                f"{self.xp.__name__}: on this backend write it with the functions it "
                f"provides or the library's own ({library}), or run this function on the "
                "NumPy or Torch backend, which run every NumPy function"
            )
        renamed = _RENAMED.get(self.xp.__name__, {})
        widening = func in result_dtypes.WIDENING and "dtype" not in kwargs
        unsigned_sum = widening and result_dtypes.unsigned(args)
        kwargs = result_dtypes.result_dtype(func, args, kwargs, self.xp)
        if func in (np.where, np.clip):
            args, kwargs = fitted_ints(func, args, kwargs)
        kwargs = {renamed.get((func.__name__, k), k): v for k, v in kwargs.items()}
        weak_result = False
        if func in (np.where, np.clip) and any(type(x) is WeakDispatched for x in args):
            values = args[1:] if func is np.where else args
            values, weak_result = weak_operands(func.__name__, values)
            args = (args[0], *values) if func is np.where else values
        args = result_dtypes.float_input(func, unwrap(args), self.xp)
        args = _lists_as_arrays(func, args)
        if func in (np.where, np.clip):
            args = _weak_scalars(args)
        if weak_result:
            return weakened(self._wrap(target(*args, **unwrap(kwargs))))
        result = result_dtypes.numpy_indices(func, kwargs, target(*args, **unwrap(kwargs)), self.xp)
        if unsigned_sum and self.xp.__name__ == TF_NUMPY:
            result = self.xp.asarray(result, dtype=np.uint64)
        if func in linalg.FACTORING:
            linalg.note_singular(args, result, self.xp)
        return self._wrap(result)


def _numpy_functions(*names: str) -> frozenset:
    return frozenset(getattr(np, name) for name in names if hasattr(np, name))


#: functions whose list arguments are data (NumPy reads ``[10, 50]`` as an array), which
#: JAX's refuse (``percentile requires ndarray or scalar arguments``); lists elsewhere
#: may be shapes or axes, which the libraries take as they are
_DATA_LISTS = _numpy_functions(
    "percentile", "quantile", "nanpercentile", "nanquantile", "dot", "vdot", "inner",
    "outer", "polyval", "interp", "convolve", "correlate", "cross", "isin", "searchsorted",
    "digitize", "allclose", "isclose", "array_equal", "average", "where", "clip", "append",
)

#: functions of a sequence of arrays, whose items may be lists (``np.stack([v, [1, 1]])``)
_SEQUENCES = _numpy_functions(
    "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"
)


def _lists_as_arrays(func: Callable, args: tuple) -> tuple:
    """``args`` with their lists of numbers as NumPy reads them, where they are data."""
    if func in _DATA_LISTS:
        return tuple(_numbers_as_array(a) for a in args)
    if func in _SEQUENCES and args and isinstance(args[0], (list, tuple)):
        items = type(args[0])(_numbers_as_array(item) for item in args[0])
        return (items, *args[1:])
    return args


def _numbers_as_array(value: Any) -> Any:
    """A list of Python numbers (nested or not) as NumPy reads it; anything else as is."""
    if not isinstance(value, list):
        return value
    try:
        array = np.asarray(value)
    except ValueError:  # ragged
        return value
    return array if array.dtype.kind in "biufc" else value


#: what NumPy's shape functions give: Python ints and tuples, known when tracing
#: (TensorFlow's NumPy gave a tensor: ``return np.shape(x)`` came back an empty array)
_SHAPE_FUNCTIONS = {
    np.shape: lambda a: a.shape,
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
}


def _angle(z, deg: bool = False):
    """``np.angle`` of real numbers as NumPy computes it, ``arctan2(0, x)`` in NumPy's
    loop dtype: pi for -0.0, nan for nan, float16 for int8 (TensorFlow gave float32 and 0
    for both, JAX float64 for int8). Complex numbers: the library's own."""
    kind = np.dtype(z.dtype).kind
    if kind == "c":
        return NotImplemented
    if kind == "b":  # NumPy's 0 (a Python int) beside booleans is an int64
        z = z.astype(np.int64)
    angle = np.arctan2(np.zeros_like(z), z)
    return angle * (180 / np.pi) if deg else angle


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """``np.nan_to_num`` of real numbers (TensorFlow's NumPy has none): nan, inf and -inf
    replaced, by default with 0 and the dtype's largest and smallest finite values."""
    dtype = np.dtype(x.dtype)
    if dtype.kind != "f":
        return x if dtype.kind in "biu" else NotImplemented
    largest = np.finfo(dtype).max
    posinf = largest if posinf is None else posinf
    neginf = -largest if neginf is None else neginf
    x = np.where(np.isnan(x), np.asarray(nan, dtype), x)
    return np.where(np.isposinf(x), np.asarray(posinf, dtype),
                    np.where(np.isneginf(x), np.asarray(neginf, dtype), x))


def _sinc(x):
    """``np.sinc`` as NumPy computes it, ``sin(pi y) / (pi y)`` with ``y`` 1e-20 where
    ``x`` is 0: nan for an infinity (JAX gave 0), float64 for integers and booleans (JAX
    float32; TensorFlow failed)."""
    kind = np.dtype(x.dtype).kind
    if kind == "c":
        return NotImplemented
    if kind != "f":
        x = x.astype(np.float64)
    y = np.pi * np.where(x == 0, 1.0e-20, x)
    return np.sin(y) / y


def _i0(x):
    """``np.i0``, the modified Bessel function of order 0: float64 for integers and
    booleans (JAX gave float32); TensorFlow's NumPy has none (``bessel_i0`` instead)."""
    kind = np.dtype(x.dtype).kind
    if kind == "c":
        return NotImplemented
    if kind != "f":
        x = x.astype(np.float64)
    if x.xp.__name__ != TF_NUMPY:
        return wrap(x.xp.i0(x.value), x.xp)
    import tensorflow as tf

    return wrap(tf.math.special.bessel_i0(x.value), x.xp)


#: NumPy functions computed from other NumPy functions on one example's value, where the
#: libraries' own differ from NumPy's or are missing
_COMPOSED = {np.angle: _angle, np.nan_to_num: _nan_to_num, np.sinc: _sinc, np.i0: _i0}


def _written_in_place(ufunc, method: str, xp) -> str:
    """Why a ufunc that writes into an array (``out=``, ``ufunc.at``, ``out += v``)
    cannot take a per-example value here, and what to write."""
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    library = "JAX" if xp.__name__ == JAX_NUMPY else "TensorFlow"
    return (
        f"{name} writes into an array (out=, .at, or an in-place operator such as out += v) "
        f"with a per-example value, which {library} cannot do: its arrays do not change in "
        "place. Make the array from the example's values instead (out = v * 2, "
        "out = np.zeros(2) + v), or run on the NumPy backend"
    )


_BACKEND_OF = {TF_NUMPY: ("TensorFlow", "tf.*"), JAX_NUMPY: ("JAX", "jnp.*")}


def _other_library(library: str, xp) -> str:
    backend, functions = _BACKEND_OF.get(xp.__name__, (xp.__name__, "its functions"))
    return (
        f"a {library} function got a per-example value of the {backend} backend: "
        f"{library} code runs on the {library} backend only (call the batched function "
        f"with {library} arrays, or pass its backend). Here use {functions} or NumPy "
        "functions (np.*), which run on every backend"
    )


def register_with_jax() -> None:
    """Lets ``jax.numpy`` functions take per-example values (`Dispatched` on the JAX
    backend). Most of them are jitted, and a jitted function takes only JAX types and
    pytrees (JAX no longer converts ``__jax_array__`` objects at its boundary): as a
    pytree the value passes its array in and is rebuilt inside, where ``jnp.asarray``
    calls ``__jax_array__``. A `BatchedArray` (the NumPy backend's value) raises
    `BatchedValueError` when flattened, which runs the primitive one example at a time,
    as for any other library's function. Idempotent; does nothing until JAX is imported
    (code that calls JAX has imported it)."""
    global _registered_with_jax
    if _registered_with_jax or "jax" not in sys.modules:
        return
    import jax

    from pcbatch.backends import batched_array

    def flatten(x):
        if x.xp.__name__ != JAX_NUMPY:
            raise OtherLibraryError(_other_library("JAX", x.xp))
        return (x.value,), x.xp

    for kind in (Dispatched, WeakDispatched):
        jax.tree_util.register_pytree_node(
            kind, flatten, lambda xp, children, kind=kind: kind(children[0], xp)
        )

    def batched(x):
        raise OtherLibraryCall("JAX", "JaxBackend()")

    for kind in (batched_array.BatchedArray, batched_array.WeakBatchedArray):
        jax.tree_util.register_pytree_node(kind, batched, lambda _, children: None)
    _registered_with_jax = True


_registered_with_jax = False


class WeakDispatched(Dispatched):
    """A `Dispatched` value whose examples are Python scalars (weak, NEP 50): see
    `pcbatch.backends.weak`."""

    __slots__ = ()
    weak = True


#: ``ufunc.reduce`` as the NumPy function that computes it (NaN propagates alike)
_REDUCTIONS = {"add": np.sum, "multiply": np.prod, "maximum": np.max, "minimum": np.min,
               "logical_and": np.all, "logical_or": np.any}
#: ``ufunc.accumulate`` likewise; the other ufuncs accumulate item by item
_ACCUMULATIONS = {"add": np.cumsum, "multiply": np.cumprod}


def _ufunc_method(ufunc, method: str, inputs: tuple, kwargs: dict):
    """``np.add.reduce(v)``, ``np.maximum.accumulate(v)``, ``np.multiply.outer(a, b)`` of
    one example's values, as the NumPy functions and ufunc calls that compute them, which
    the backends have (their NumPy lacks the methods)."""
    if method == "outer":
        if len(inputs) != 2 or kwargs:
            raise TypeError(f"np.{ufunc.__name__}.outer takes two arrays and no options here")
        a, b = inputs
        return ufunc(np.reshape(a, np.shape(a) + (1,) * np.ndim(b)), b)
    unknown = set(kwargs) - {"axis", "dtype", "keepdims"}
    if len(inputs) != 1 or unknown or (method == "accumulate" and "keepdims" in kwargs):
        raise TypeError(
            f"np.{ufunc.__name__}.{method} with {sorted(unknown) or 'these arguments'} is not "
            "supported here: give the array and axis= (dtype=, keepdims= for reduce)"
        )
    kwargs = {"axis": 0, **kwargs}  # the methods' default axis is 0, the functions' None
    table = _REDUCTIONS if method == "reduce" else _ACCUMULATIONS
    function = table.get(ufunc.__name__)
    if function is not None:
        return function(*inputs, **kwargs)
    if method == "accumulate" and ufunc.nin == 2 and kwargs["axis"] is not None:
        return _accumulated(ufunc, inputs[0], kwargs["axis"], kwargs.get("dtype"))
    raise TypeError(f"np.{ufunc.__name__}.{method} is not supported on this backend")


def _accumulated(ufunc, a, axis: int, dtype=None):
    """``ufunc.accumulate`` along ``axis`` as a chain of calls (the example's length is
    known when compiling): item ``i`` is ``ufunc(item i - 1, a[i])``."""
    moved = np.moveaxis(a if dtype is None else a.astype(dtype), axis, 0)
    items = [moved[0]]
    for i in range(1, int(np.shape(moved)[0])):
        items.append(ufunc(items[-1], moved[i]))
    return np.moveaxis(np.stack(items), 0, axis)


# Binary ufuncs whose operands NumPy does not promote to one dtype (``ldexp(float, int)``).
_MIXED_TYPE_UFUNCS = frozenset({"ldexp"})

def _numpy_promotion(inputs: tuple, xp) -> tuple:
    """Arrays of different dtypes made NumPy's ``result_type`` of them first. JAX
    promotes by its own lattice (``float32 * int64`` is float32 there, float64 in
    NumPy, and so per example in the user's code); TensorFlow's NumPy already agrees.
    Under JAX without ``jax_enable_x64`` the result is its 32-bit counterpart."""
    arrays = [x for x in inputs if is_foreign_array(x) or isinstance(x, (np.ndarray, np.generic))]
    dtypes = {np.dtype(getattr(x.dtype, "as_numpy_dtype", x.dtype)) for x in arrays}
    if len(dtypes) < 2:
        return inputs
    target = available(np.result_type(*dtypes), xp)
    return tuple(
        xp.asarray(x, dtype=target) if any(x is a for a in arrays) and x.dtype != target else x
        for x in inputs
    )


def _tensorflow_ufunc(name: str, xp):
    """A ufunc TensorFlow's NumPy lacks or computes otherwise, from TensorFlow itself
    (None if none)."""
    import tensorflow as tf

    if name in _SHIFTS:
        return _tensorflow_shift(name)
    if name in _EXTREMA:
        integer_function = getattr(xp, {"fmax": "maximum", "fmin": "minimum"}.get(name, name))
        return _extremum(_EXTREMA[name], integer_function, xp)
    sign_bits = {"signbit": _tensorflow_signbit, "copysign": _tensorflow_copysign}
    own = {"rint": tf.math.round, "heaviside": _tensorflow_heaviside,  # rint: half to even
           "ldexp": _tensorflow_ldexp}
    return {**own, **sign_bits}.get(name)


def _tensorflow_shift(name: str):
    """NumPy's shifts: by a count below zero or at least the bit width, 0 (and -1 for a
    negative number shifted right); ``tf.bitwise``'s own are undefined there (``127 <<
    -2`` gave 127, NumPy 0)."""
    import tensorflow as tf

    def shift(a, count):
        a = tf.convert_to_tensor(a)
        count = tf.cast(count, a.dtype)
        bits = a.dtype.size * 8
        outside = (count < 0) | (count >= bits) if not a.dtype.is_unsigned else count >= bits
        shifted = getattr(tf.bitwise, name)(a, tf.where(outside, tf.zeros_like(count), count))
        if name == "left_shift" or a.dtype.is_unsigned:
            beyond = tf.zeros_like(shifted)
        else:
            beyond = tf.where(a < 0, -tf.ones_like(a), tf.zeros_like(a))
        return tf.where(outside, beyond, shifted)

    return shift


def _jax_heaviside(xp):
    def heaviside(x, at_zero):
        step = xp.where(x < 0, 0, xp.where(x > 0, 1, at_zero)).astype(x.dtype)
        return xp.where(xp.isnan(x), x, step)

    return heaviside


def _tensorflow_heaviside(x, at_zero):
    """NumPy's step: 0 below zero, ``at_zero`` at zero, 1 above, nan for nan
    (TensorFlow's NumPy gave 1 for nan)."""
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    at_zero = tf.cast(at_zero, x.dtype)
    step = tf.where(x < 0, tf.zeros_like(x), tf.where(x > 0, tf.ones_like(x), at_zero))
    return tf.where(tf.math.is_nan(x), x, step)


def _tensorflow_signbit(x):
    """NumPy's ``signbit``: the float's sign bit, read by a bitcast (-0.0 and -nan
    included, which no comparison sees)."""
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    if not x.dtype.is_floating:
        return x < 0
    return tf.bitcast(x, {2: tf.int16, 4: tf.int32, 8: tf.int64}[x.dtype.size]) < 0


def _tensorflow_copysign(x, y):
    """NumPy's ``copysign``: ``x``'s magnitude with ``y``'s sign bit."""
    import tensorflow as tf

    magnitude = tf.abs(tf.convert_to_tensor(x))
    return tf.where(_tensorflow_signbit(tf.cast(y, magnitude.dtype)), -magnitude, magnitude)


def _modf(xp):
    """NumPy's ``modf``: the integral part truncated toward zero, the fractional part with
    ``x``'s sign (-0.0 for -0.0 and -inf, 0.0 for inf), in NumPy's loop dtype (float16
    for int8). TensorFlow's NumPy has none; JAX's gave nan for inf and 0.0 for -0.0."""

    def modf(x):
        dtype = np.modf(np.zeros((), numpy_dtype(x)))[0].dtype
        x = xp.asarray(x, dtype=dtype)
        whole = xp.where(x < 0, xp.ceil(x), xp.floor(x))
        fraction = xp.where(xp.isinf(x), xp.asarray(0, dtype=dtype), x - whole)
        if xp.__name__ == TF_NUMPY:
            return _tensorflow_copysign(fraction, x), whole
        return xp.copysign(fraction, x), whole

    return modf


def _frexp(xp):
    """NumPy's ``frexp``, in NumPy's loop dtype (float16 for int8: JAX gave float32);
    TensorFlow's NumPy has none."""

    def frexp(x):
        x = xp.asarray(x, dtype=np.frexp(np.zeros((), numpy_dtype(x)))[0].dtype)
        return _tensorflow_frexp(x) if xp.__name__ == TF_NUMPY else xp.frexp(x)

    return frexp


def _tensorflow_frexp(x):
    """``x == m * 2**e`` with ``0.5 <= |m| < 1`` (0, inf, nan: ``m = x``, ``e = 0``): the
    exponent from the logarithm, then moved by one where it rounded across a power of 2."""
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    computing = tf.float32 if x.dtype == tf.float16 else x.dtype
    wide = tf.cast(x, computing)
    regular = tf.math.is_finite(wide) & tf.not_equal(wide, 0)
    safe = tf.where(regular, wide, tf.ones_like(wide))
    exponent = tf.cast(tf.floor(tf.math.log(tf.abs(safe)) / np.log(2.0)), tf.int32) + 1
    mantissa = _tensorflow_ldexp(safe, -exponent)
    high, low = tf.abs(mantissa) >= 1, tf.abs(mantissa) < 0.5
    exponent = exponent + tf.cast(high, tf.int32) - tf.cast(low, tf.int32)
    mantissa = tf.where(high, mantissa / 2, tf.where(low, mantissa * 2, mantissa))
    mantissa = tf.where(regular, mantissa, wide)
    return tf.cast(mantissa, x.dtype), tf.where(regular, exponent, tf.zeros_like(exponent))


def _tensorflow_ldexp(x, n):
    """NumPy's ``ldexp``, ``x * 2**n``: three powers of two, each finite (one ``2**n``
    overflows where ``x * 2**n`` does not, and ``0 * inf`` is nan). A float ``n`` is
    NumPy's TypeError, from NumPy itself."""
    import tensorflow as tf

    x, n = tf.convert_to_tensor(x), tf.convert_to_tensor(n)
    np.ldexp(np.zeros((), x.dtype.as_numpy_dtype), np.zeros((), n.dtype.as_numpy_dtype))
    largest = {tf.float16: 15, tf.float32: 127}.get(x.dtype, 1023)
    n = tf.clip_by_value(tf.cast(n, tf.int32), -3 * largest, 3 * largest)
    first = n // 3
    second = (n - first) // 2
    for part in (first, second, n - first - second):
        x = x * tf.pow(tf.constant(2, x.dtype), tf.cast(part, x.dtype))
    return x


#: ufuncs whose TensorFlow kernels take no unsigned integers
_UNSIGNED_LACKING = frozenset({"negative", "absolute", "sign"})


def _tensorflow_unsigned(name: str, function):
    """NumPy's ``-n``, ``abs(n)`` and ``np.sign(n)`` of unsigned integers, which
    TensorFlow's kernels refuse: ``-n`` wraps (``0 - n``), ``abs`` is ``n``, the sign 0 or
    1. Other dtypes keep ``function``."""
    import tensorflow as tf

    def unsigned(x):
        x = tf.convert_to_tensor(x)
        if not x.dtype.is_unsigned:
            return function(x)
        if name == "negative":  # in int64 (no uint8 Sub kernel), wrapped back by the cast
            return tf.cast(tf.negative(tf.cast(x, tf.int64)), x.dtype)
        return tf.identity(x) if name == "absolute" else tf.cast(x > 0, x.dtype)

    return unsigned


#: ``np.maximum``, ``np.minimum``, ``np.fmax``, ``np.fmin``: where NumPy's float loop
#: keeps the first operand (a NaN that maximum propagates and fmax drops, and which of
#: two equal zeros it gives). TensorFlow's maximum and minimum drop a NaN; it has no fmax.
_EXTREMA = {
    "maximum": lambda a, b, xp: xp.isnan(a) | (a > b),
    "minimum": lambda a, b, xp: xp.isnan(a) | (a < b),
    "fmax": lambda a, b, xp: xp.isnan(b) | (a >= b),
    "fmin": lambda a, b, xp: xp.isnan(b) | (a <= b),
}
#: ufuncs TensorFlow's NumPy has but computes otherwise: NaN in extrema, the sign of -0.0
_TF_OWN = frozenset({*_EXTREMA, "signbit", "heaviside", "left_shift", "right_shift"})


def _extremum(keeps_first, integer_function, xp):
    def extremum(a, b):
        dtype = np.result_type(*(numpy_dtype(x) if is_foreign_array(x) else x for x in (a, b)))
        if dtype.kind != "f":
            return integer_function(a, b)  # no NaN, no signed zero
        a, b = xp.asarray(a, dtype=dtype), xp.asarray(b, dtype=dtype)
        return xp.where(keeps_first(a, b, xp), a, b)

    return extremum


def _float_division(inputs: tuple, xp) -> tuple:
    """NumPy divides integers (and bools) in float64; JAX's ``int32 / int32`` is float32,
    and TensorFlow's ``uint8 / uint8`` too. Integer operands are made the default float
    first (float64; under JAX without x64 float32, its float)."""
    arrays = [x for x in inputs if is_foreign_array(x)]
    kinds = {np.dtype(getattr(x.dtype, "as_numpy_dtype", x.dtype)).kind for x in arrays}
    if not arrays or not kinds <= set("biu"):
        return inputs
    return tuple(xp.asarray(x, dtype=float) if is_foreign_array(x) else x for x in inputs)


_COMPARISONS = frozenset({"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"})


def _exact_int_comparison(inputs: tuple, xp) -> tuple:
    """NumPy 2 compares an integer array with a Python int out of its dtype's range
    exactly (``uint8_x < 300`` is True); JAX and TensorFlow would fail to convert the int.
    Such a comparison runs in int64 instead (values below 2**63 compare the same)."""
    ints = [x for x in inputs if type(x) is int]
    arrays = [x for x in inputs if is_foreign_array(x)]
    kinds = [np.dtype(getattr(x.dtype, "as_numpy_dtype", x.dtype)) for x in arrays]
    if not ints or not kinds or any(d.kind not in "iu" for d in kinds):
        return inputs
    if all(np.iinfo(d).min <= v <= np.iinfo(d).max for v in ints for d in kinds):
        return inputs
    return tuple(xp.asarray(x, dtype=np.int64) if is_foreign_array(x) else x for x in inputs)


def _checked_exponent(base, exponent, xp) -> tuple:
    """``(base, exponent)`` of NumPy's integer power, checked: NumPy raises ValueError for
    an integer to a negative integer power, which JAX computes a wrong number for and
    TensorFlow's kernel fails the whole run on. The examples that do it are noted for the
    compiled machine's probe (`weak.note_fault`: they stop, and the error names the
    line after the run), and computed with exponent 0 meanwhile."""
    dtypes = [np.dtype(getattr(d, "as_numpy_dtype", d)) for d in map(_dtype_of, (base, exponent))]
    if not all(d is not None and d.kind in "iub" for d in dtypes):
        return base, exponent
    from pcbatch.backends import weak

    fixed = not is_foreign_array(exponent)
    if fixed and np.all(np.asarray(exponent) >= 0):
        return base, exponent  # ``n ** 2``: nothing to check
    negative = xp.less(exponent, 0)
    # over the base too: a fixed exponent's flag says nothing of the example
    weak.note_fault(xp.logical_or(negative, xp.not_equal(base, base)), xp, weak.NEGATIVE_POWER)
    return base, xp.where(negative, xp.zeros_like(exponent), exponent)


def _dtype_of(x):
    if isinstance(x, (bool, int)):
        return np.dtype(bool) if isinstance(x, bool) else np.dtype(int)
    return getattr(x, "dtype", None)


def _integer_power(xp):
    """NumPy's ``power`` on JAX and TensorFlow. Integers to an integer array's powers go
    bit by bit over the whole exponent, wrapping as NumPy's product does: ``jnp.power``
    reads only the exponent's low six bits there (``3 ** 100`` came out ``3 ** 36``),
    TensorFlow's gave 1 for ``2 ** 3000000`` (NumPy: 0). A fixed exponent keeps the
    library's power (JAX's exact ``integer_pow``)."""

    def power(base, exponent, **kwargs):
        dtype = np.result_type(*(numpy_dtype(x) if is_foreign_array(x) else x
                                 for x in (base, exponent)))
        fixed = np.ndim(exponent) == 0 and not is_foreign_array(exponent)
        if dtype.kind not in "iu" or fixed or kwargs:
            return xp.power(base, exponent, **kwargs)
        base, exponent = xp.asarray(base, dtype), xp.asarray(exponent, dtype)
        result = xp.ones_like(base * exponent)  # the broadcast shape
        if xp.__name__ == TF_NUMPY:
            return _tensorflow_integer_power(result, base, exponent)
        for _ in range(8 * dtype.itemsize):  # negative exponents were refused before
            result = xp.where((exponent & 1) == 1, result * base, result)
            exponent, base = exponent >> 1, base * base
        return result

    return power


def _tensorflow_integer_power(ones, base, exponent):
    """`_integer_power` on TensorFlow: its own kernel wraps as NumPy does, XLA's reads the
    exponent's low bits only (as JAX's), so under XLA the power goes bit by bit."""
    import tensorflow as tf

    from pcbatch.backends.tensorflow import in_xla_context

    if not in_xla_context() and not base.dtype.is_unsigned:  # its kernel has no unsigned
        return tf.pow(base, exponent) * ones
    one = tf.ones_like(exponent)
    result = ones
    for _ in range(8 * exponent.dtype.size):  # negative exponents were refused before
        odd = tf.equal(tf.bitwise.bitwise_and(exponent, one), one)
        result = tf.where(odd, result * base, result)
        exponent, base = tf.bitwise.right_shift(exponent, one), base * base
    return result


def _weak_scalars(inputs: tuple) -> tuple:
    """NumPy 2's rule for Python scalars beside arrays (NEP 50): the scalar takes the
    array's dtype when its kind fits (``float32_array * 0.5`` stays float32).
    TensorFlow's NumPy would otherwise promote such a product to float64."""
    dtypes = [
        np.dtype(getattr(x.dtype, "as_numpy_dtype", x.dtype))
        for x in inputs
        if is_foreign_array(x)
    ]
    if not dtypes or len(dtypes) == len(inputs):
        return inputs
    # A condition's bool says nothing about the values' dtype (np.where(c, 0.5, x)).
    dtype = next((d for d in dtypes if d.kind != "b"), dtypes[0])
    return tuple(_fit_scalar(x, dtype) if _is_python_scalar(x) else x for x in inputs)


def _is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def _fit_scalar(x, dtype: np.dtype):
    if isinstance(x, bool) or dtype.kind == "b":
        return x
    if isinstance(x, float) and dtype.kind in "iu":
        return x  # a float beside integers promotes to float, as in NumPy
    return np.asarray(x, dtype=dtype)


# Ufuncs some counterparts know by another name (``~x`` is ``np.invert``).
_UFUNC_ALIASES = {"invert": "bitwise_not", "trunc": "fix", "degrees": "rad2deg",
                  "radians": "deg2rad"}
#: ``n << k``, ``n >> k``: on TensorFlow, tf.bitwise's, with NumPy's answer for counts
#: outside the bit width (`_tensorflow_shift`)
_SHIFTS = ("left_shift", "right_shift")

# Keyword arguments whose names differ between NumPy and its counterparts.
_RENAMED = {"jax.numpy": {("clip", "a_min"): "min", ("clip", "a_max"): "max"}}


def _round_as_numpy(rint: Callable, xp) -> Callable:
    """``np.round`` of floats as NumPy computes it (scale by 10**decimals, round half to
    even, unscale), its divisions correctly rounded (`scalars.divided`): XLA multiplies
    by a constant divisor's reciprocal, which gave ``np.round(21.33, 2)`` as
    21.330000000000002 on JAX. TensorFlow's NumPy's own round calls ``Tensor.astype``,
    which tensors lack unless NumPy behaviour is switched on for the whole process."""

    def round_(a, decimals=0, out=None):
        dtype = np.dtype(getattr(a.dtype, "as_numpy_dtype", a.dtype))
        if dtype.kind == "b":  # NumPy rounds booleans in float16
            a, dtype = xp.asarray(a, dtype=xp.float16), np.dtype(np.float16)
        if dtype.kind in "iu" and decimals >= 0:
            return a
        if decimals == 0:
            return rint(a)
        scale = 10.0 ** abs(decimals)
        if dtype.kind in "iu":  # to tens, hundreds: in float64, as NumPy, then back
            wide = xp.asarray(a, dtype=xp.float64)
            rounded = rint(scalars.divided(wide, scale, "float64", xp)) * scale
            return xp.asarray(rounded, dtype=a.dtype)
        if decimals > 0:
            return scalars.divided(rint(a * scale), scale, dtype.name, xp)
        return rint(scalars.divided(a, scale, dtype.name, xp)) * scale

    return round_


def _tensorflow_round(xp):
    import tensorflow as tf

    return _round_as_numpy(tf.math.round, xp)


def _jax_round(xp):
    return _round_as_numpy(xp.rint, xp)


def _tensorflow_norm(xp):
    """``np.linalg.norm`` with NumPy's ``ord`` on TensorFlow, whose NumPy lacks it: a
    vector's along ``axis`` (None or 2, inf, -inf, 0, 1, any p), a matrix's over two axes
    (None or "fro", "nuc", 1, -1, inf, -inf, 2, -2)."""
    import tensorflow as tf

    def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - NumPy's name
        x = tf.convert_to_tensor(x)
        if not x.dtype.is_floating and not x.dtype.is_complex:
            x = tf.cast(x, tf.float64)
        if axis is None and ord is None:
            axes = tuple(range(x.shape.rank))
            result = tf.sqrt(tf.reduce_sum(_squared(x), axis=axes, keepdims=True))
        elif axis is None and x.shape.rank not in (1, 2):
            raise ValueError("Improper number of dimensions to norm.")
        else:
            axes = tuple(range(x.shape.rank)) if axis is None else axis
            axes = (axes,) if isinstance(axes, int) else tuple(axes)
            axes = tuple(a % x.shape.rank for a in axes)
            vector = len(axes) == 1
            result = _vector_norm(x, ord, *axes) if vector else _matrix_norm(x, ord, *axes)
        return result if keepdims else tf.squeeze(result, axis=axes)

    return norm


def _squared(x):
    import tensorflow as tf

    magnitude = tf.abs(x)
    return magnitude * magnitude


def _vector_norm(x, ord, axis: int):  # noqa: A002 - NumPy's name
    """NumPy's vector norm of ``x`` along ``axis``, the axis kept."""
    import tensorflow as tf

    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    magnitude = tf.abs(x)
    if ord is None or ord == 2:
        return tf.sqrt(tf.reduce_sum(magnitude * magnitude, axis=axis, keepdims=True))
    if ord == np.inf:
        return tf.reduce_max(magnitude, axis=axis, keepdims=True)
    if ord == -np.inf:
        return tf.reduce_min(magnitude, axis=axis, keepdims=True)
    if ord == 0:
        nonzero = tf.cast(tf.not_equal(magnitude, 0), magnitude.dtype)
        return tf.reduce_sum(nonzero, axis=axis, keepdims=True)
    if ord == 1:
        return tf.reduce_sum(magnitude, axis=axis, keepdims=True)
    p = tf.constant(float(ord), magnitude.dtype)
    return tf.reduce_sum(magnitude**p, axis=axis, keepdims=True) ** (1 / p)


def _matrix_norm(x, ord, row: int, column: int):  # noqa: A002 - NumPy's name
    """NumPy's matrix norm of ``x`` over axes ``row`` and ``column``, both kept."""
    import tensorflow as tf

    magnitude = tf.abs(x)
    if ord is None or ord == "fro":
        return tf.sqrt(tf.reduce_sum(magnitude * magnitude, axis=(row, column), keepdims=True))
    if ord in (1, -1, np.inf, -np.inf):
        summed, over = (row, column) if ord in (1, -1) else (column, row)
        sums = tf.reduce_sum(magnitude, axis=summed, keepdims=True)
        pick = tf.reduce_max if ord > 0 else tf.reduce_min
        return pick(sums, axis=over, keepdims=True)
    if ord in (2, -2, "nuc"):
        rank = x.shape.rank
        rest = [a for a in range(rank) if a not in (row, column)]
        moved = tf.transpose(x, [*rest, row, column])
        values = tf.linalg.svd(moved, compute_uv=False)
        if ord == "nuc":
            reduced = tf.reduce_sum(values, axis=-1)
        else:
            reduced = (tf.reduce_max if ord == 2 else tf.reduce_min)(values, axis=-1)
        for axis in sorted((row, column)):  # back where they stood, as size 1
            reduced = tf.expand_dims(reduced, axis)
        return reduced
    raise ValueError("Invalid norm order for matrices.")


#: NumPy functions whose counterpart in a namespace is replaced
def _sorting(name: str):
    """``np.sort``/``np.argsort`` with NumPy's ``kind=`` and ``stable=`` (JAX refuses
    ``kind``, TensorFlow any kind but quicksort). Both give the stable order, a right
    answer for every kind: NumPy leaves the order of ties unspecified but for stable
    sorts (its own default order depends on the CPU's vector instructions)."""

    def replacement(xp):
        def sort(a, axis=-1, kind=None, order=None, *, stable=None):
            if order is not None:
                raise TypeError(f"np.{name}(order=...) sorts structured arrays; pcbatch has none")
            if xp.__name__ == JAX_NUMPY:
                return getattr(xp, name)(a, axis=axis, stable=True)
            import tensorflow as tf

            if axis is None:
                a, axis = tf.reshape(a, [-1]), -1
            order = _tensorflow_argsort(tf.convert_to_tensor(a), axis, xp)
            return order if name == "argsort" else xp.take_along_axis(a, order, axis)

        return sort

    return replacement


def _tensorflow_argsort(a, axis: int, xp):
    """NumPy's stable argsort on TensorFlow: every NaN after every number, whatever its
    sign bit (tf.argsort puts -nan first): the numbers' order with NaN as inf, then the
    NaNs moved last, stably."""
    import tensorflow as tf

    if not a.dtype.is_floating:
        return tf.cast(tf.argsort(a, axis=axis, stable=True), tf.int64)
    nan = tf.math.is_nan(a)
    order = tf.argsort(tf.where(nan, tf.constant(np.inf, a.dtype), a), axis=axis, stable=True)
    nan_in_order = tf.cast(xp.take_along_axis(nan, order, axis), tf.int8)
    order = xp.take_along_axis(order, tf.argsort(nan_in_order, axis=axis, stable=True), axis)
    return tf.cast(order, tf.int64)


_REPLACED = {
    "tensorflow.experimental.numpy": {
        "round": _tensorflow_round,
        "around": _tensorflow_round,
        "norm": _tensorflow_norm,
        "sort": _sorting("sort"),
        "argsort": _sorting("argsort"),
        **{name: linalg.tensorflow_linalg(name) for name in ("solve", "inv", "cholesky")},
        **tensorflow_numpy.REPLACED,
    },
    "jax.numpy": {
        "round": _jax_round, "around": _jax_round,
        "sort": _sorting("sort"), "argsort": _sorting("argsort"),
    },
}


def _counterpart(func: Callable, xp):
    replacement = _REPLACED.get(xp.__name__, {}).get(func.__name__)
    if replacement is not None:
        return replacement(xp)
    module = func.__module__ or "numpy"
    parts = module.split(".")[1:]  # numpy.linalg -> ["linalg"]
    namespace = xp
    for part in parts:
        if part.startswith("_"):
            break
        namespace = getattr(namespace, part, None)
        if namespace is None:
            return None
    return getattr(namespace, func.__name__, None) or getattr(xp, func.__name__, None)


def wrap(value: Any, xp) -> Any:
    if isinstance(value, Dispatched):
        return value
    if is_pattern_node(value):
        return rebuild(value, [wrap(v, xp) for v in value])
    if is_foreign_array(value):
        return Dispatched(value, xp)
    return value


def _is_per_example(value: Any) -> bool:
    return isinstance(value, Dispatched) or is_foreign_array(value)


def unwrap(value: Any) -> Any:
    if isinstance(value, Dispatched):
        return value.value
    if isinstance(value, dict):
        return {k: unwrap(v) for k, v in value.items()}
    if is_pattern_node(value) or isinstance(value, list):
        return (
            type(value)(unwrap(v) for v in value)
            if not hasattr(value, "_fields")
            else rebuild(value, [unwrap(v) for v in value])
        )
    if isinstance(value, slice):
        return slice(unwrap(value.start), unwrap(value.stop), unwrap(value.step))
    return value


def _mixing_advice(error: Exception) -> str | None:
    """What to write instead, where ``error`` comes from mixing a library's own values
    with functions that cannot take them; None for any other error."""
    text = str(error)
    if isinstance(error, ValueError) and "__jax_array__" in text:
        # jax.lax's functions take JAX types only (not even pytrees of them).
        return (
            "a jax.lax function got a per-example value: write jnp.asarray(x) first (it "
            "gives the example's JAX array), or use the jax.numpy function"
        )
    if type(error).__name__ == "TracerArrayConversionError":
        library, own = "JAX", "jax.numpy"
    elif isinstance(error, NotImplementedError) and "symbolic tf.Tensor" in text:
        library, own = "TensorFlow", "tf.* or tf.experimental.numpy"
    else:
        return None
    return (
        f"a NumPy function got what a {library} function returned ({error}): the "
        f"value has no NumPy array while the batch is traced. Use {own} functions on "
        f"{library} results, or NumPy functions on the per-example values themselves"
    )


def _as_numpy_scalars(results):
    """A Python number among a primitive's results as NumPy holds it (``2.6`` float64,
    ``3`` int64): TensorFlow would make it float32 (int32), and a float64 result
    would then hold 2.5999999046 (``return n * 2, 2.6``)."""
    if is_pattern_node(results):
        return rebuild(results, [_as_numpy_scalars(r) for r in results])
    if isinstance(results, (int, float, complex)) and not isinstance(results, bool):
        return np.asarray(results)
    return results


def adapt(function: Callable, namespace: str) -> Callable:
    """``function`` (written with NumPy) applied to arrays of the library ``namespace``."""
    xp = importlib.import_module(namespace)
    register_with_jax()

    as_stored = _as_numpy_scalars if namespace == TF_NUMPY else (lambda results: results)

    def adapted(*args):
        try:
            return as_stored(unwrap(function(*wrap(args, xp))))
        except (ValueError, TypeError, NotImplementedError) as e:
            advice = _mixing_advice(e)
            if advice is None:
                raise
            raise OtherLibraryError(advice) from e

    adapted.__name__ = getattr(function, "__name__", "primitive")
    adapted.__wrapped__ = function
    return adapted
