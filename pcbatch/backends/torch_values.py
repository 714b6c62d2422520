"""Per-example values on the Torch backend: torch kernels with NumPy's meaning.

`TorchBatched` wraps a tensor of shape ``[batch, *s]`` on the run's device and behaves
like ONE example's value of shape ``s``, as `pcbatch.backends.batched_array.BatchedArray`
does for NumPy arrays. NumPy calls and Python operators on it (``np.sqrt(x)``,
``x / n``) run as torch operations on the whole batch, with NumPy's meaning: the dtype
NumPy gives (``int / int`` float64, Python numbers weak by NEP 50, ``float32 * int64``
float64) is computed first and the operands are cast to it, and where torch's kernels
mean something else (an integer divided by zero, an integer raised to a negative power)
the case is computed or refused as NumPy does. ``torch`` functions called on it run with
torch's own meaning, per example (``torch.func.vmap``; pointwise ones on the batch
directly).

What has no torch counterpart here raises `NotNative`: the backend then runs the whole
primitive on the host with pcbatch's NumPy machinery (`pcbatch.backends.torch`), which
means NumPy's meaning by construction. Every such case is listed at the raise.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from pcbatch.backends import bounds, per_example
from pcbatch.backends.per_example import BatchedView
from pcbatch.ir.types import is_pattern_node, python_scalar_of, rebuild

__all__ = ["NotNative", "OneExample", "TorchBatched", "WeakTorchBatched", "map_examples"]

TORCH_OF_NUMPY = {
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.complex64): torch.complex64,
    np.dtype(np.complex128): torch.complex128,
}
NUMPY_OF_TORCH = {t: n for n, t in TORCH_OF_NUMPY.items()}


class NotNative(Exception):
    """This primitive needs NumPy's own machinery: the backend runs it on the host."""


def _torch(dtype: Any) -> torch.dtype:
    dtype = np.dtype(dtype)
    if dtype not in TORCH_OF_NUMPY:  # a uint16 constant, say: torch has too few kernels
        raise NotNative(f"dtype {dtype}")
    return TORCH_OF_NUMPY[dtype]


def _numpy(dtype: torch.dtype) -> np.dtype:
    if dtype not in NUMPY_OF_TORCH:
        raise NotNative(f"torch dtype {dtype}")
    return NUMPY_OF_TORCH[dtype]


class TorchBatched(BatchedView):
    """A tensor of shape ``[batch, *shape]`` that acts like one example of shape ``shape``."""

    __slots__ = ()

    def _same(self, data: torch.Tensor) -> TorchBatched:
        """``data`` as a value of this view's kind (a one-example view stays one)."""
        return type(self).strong()(data)

    @staticmethod
    def _permute(data: torch.Tensor, order: list) -> torch.Tensor:
        return data.permute(*order)

    @staticmethod
    def _copy(data: torch.Tensor) -> torch.Tensor:
        return data.clone()

    @classmethod
    def strong(cls) -> type:
        return TorchBatched

    def as_weak(self) -> TorchBatched:
        return WeakTorchBatched(self.data)

    def converted(self, dtype: np.dtype, wrap: bool = False) -> TorchBatched:
        data = self.data
        if dtype.kind in "iu" and not data.is_floating_point() and data.numel() and not wrap:
            per_example.check_int_range(data, dtype)
        return TorchBatched(data.to(_torch(dtype)))

    @property
    def dtype(self) -> np.dtype:
        return _numpy(self.data.dtype)

    @property
    def real(self) -> TorchBatched:
        return self._same(torch.real(self.data) if self.data.is_complex() else self.data)

    @property
    def imag(self) -> TorchBatched:
        if self.data.is_complex():
            return self._same(torch.imag(self.data))
        return self._same(torch.zeros_like(self.data))

    def astype(self, dtype, **kwargs) -> TorchBatched:
        if kwargs:
            raise NotNative("astype keywords")
        return self._same(self.data.to(_torch(dtype)))

    def __getitem__(self, index: Any) -> TorchBatched:
        parts = index if isinstance(index, tuple) else (index,)
        per_example.refuse_value_slices(parts, lambda bound: isinstance(bound, TorchBatched))
        if any(isinstance(p, TorchBatched) for p in parts):
            if not all(per_example.is_simple_index(p) for p in parts):
                raise NotNative("a per-example index beside slices or arrays")
            rows = torch.arange(self.data.shape[0], device=self.data.device)
            key = [p.data.to(torch.int64) if isinstance(p, TorchBatched) else p for p in parts]
            try:
                return self._same(self.data[(rows, *key)])
            except IndexError:  # torch names the batch's dimension: say the example's
                bounds.check_batched(self.shape, parts, _batch_values)
                raise
        if all(isinstance(p, slice) for p in parts) and any(
            p.step is not None and p.step < 0 for p in parts
        ):
            return self._same(_sliced(self.data, parts))
        if per_example.advanced_apart(parts):
            # NumPy puts the index's axes first; torch, whose ints are no advanced index,
            # would not: every advanced part a tensor, the batch's rows one more in front
            return self._same(self.data[_rows_first(parts, self)])
        return self._same(self.data[(slice(None), *(_constant_index(p, self) for p in parts))])

    def __setitem__(self, index, value) -> None:
        # Per example in a batched run, item assignment is lowered by the frontend; a
        # plain helper's in-place update of an argument is refused there as on NumPy.
        raise NotNative("item assignment")

    # -- NumPy protocols -------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if WeakTorchBatched in map(type, inputs):
            return per_example.weak_ufunc(self, ufunc, method, inputs, kwargs)
        out = kwargs.get("out")
        if isinstance(self, OneExample) and len(kwargs) == 1 and out and out[0] is inputs[0]:
            return self._in_place(ufunc(*inputs), out[0])
        if method != "__call__" or kwargs:  # out=, where=, dtype=, reduce, at: NumPy's
            raise NotNative(f"np.{ufunc.__name__}.{method} with {sorted(kwargs)}")
        if ufunc is np.matmul:
            return _matmul(self, *inputs)
        result = _ufunc(ufunc, inputs)
        # One-example views come in dry_run only: elsewhere the result is as it is.
        return self._same_kind(result, inputs) if OneExample in map(type, inputs) else result

    def __array_function__(self, func, types, args, kwargs):
        per_example.refuse_ragged(func, args)
        rule = _RULES.get(func)
        if rule is None:  # everything else: NumPy's own implementation, on the host
            raise NotNative(f"{func.__module__}.{func.__name__}")
        result = rule(func, args, dict(kwargs))
        # ``types``: those of the arguments NumPy dispatched on (one-example views only
        # in dry_run)
        return self._same_kind(result, args) if OneExample in types else result

    def _same_kind(self, result, inputs):
        """A primitive's views keep one kind (a one-example view's results stay one)."""
        views = (x for x in per_example.leaves(inputs, lists=True) if isinstance(x, TorchBatched))
        kind = next((type(x).strong() for x in views), TorchBatched)
        if kind is TorchBatched:
            return result
        return _map(lambda r: kind(r.data) if type(r) is TorchBatched else r, result)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _torch_call(func, args, kwargs or {})


class WeakTorchBatched(TorchBatched):
    """A `TorchBatched` whose examples are Python scalars (weak, NEP 50)."""

    __slots__ = ()
    weak = True

    @classmethod
    def strong(cls) -> type:
        return TorchBatched


class OneExample(TorchBatched):
    """ONE example's value as a batch of one: ``dry_run``'s per-example value for code that
    calls torch functions. Python control flow reads its value, and item assignment
    updates it (it is the plain function's own copy)."""

    __slots__ = ()

    @classmethod
    def strong(cls) -> type:
        return OneExample

    def as_weak(self) -> TorchBatched:
        return self

    def _one(self):
        return self.data[0].detach().cpu().numpy()

    def __bool__(self):
        return bool(self._one())

    def __int__(self):
        return int(self._one())

    def __float__(self):
        return float(self._one())

    def __index__(self):
        return int(self._one())

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._one(), dtype=dtype)

    def _in_place(self, result: TorchBatched, target: OneExample) -> OneExample:
        """``x += y`` on one example: a scalar (a NumPy scalar, per example) is rebound
        to the result; an array is updated in place, under NumPy's same-kind rule."""
        if not target.ndim:
            return result
        if not np.can_cast(result.dtype, target.dtype, "same_kind"):
            raise TypeError(
                f"Cannot cast ufunc output from dtype('{result.dtype}') to "
                f"dtype('{target.dtype}') with casting rule 'same_kind'"
            )
        target.data.copy_(result.data.to(target.data.dtype))
        return target

    def __setitem__(self, index, value) -> None:
        parts = index if isinstance(index, tuple) else (index,)
        key = tuple(int(p) if isinstance(p, OneExample) else _constant_index(p, self)
                    for p in parts)
        value = value.data[0] if isinstance(value, TorchBatched) else value
        self.data[0][key] = torch.as_tensor(value, device=self.data.device).to(self.data.dtype)

    def __repr__(self) -> str:
        return f"OneExample({self.data[0]!r})"


def _map(function: Callable, value: Any) -> Any:
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map(function, v) for v in value)
    if is_pattern_node(value):
        return rebuild(value, [_map(function, v) for v in value])
    return function(value)


def _sliced(data: torch.Tensor, parts: tuple) -> torch.Tensor:
    """``data[:, *parts]`` for slices, some with a negative step (torch slices have none):
    each such slice picks its rows by their indices, as NumPy's slice would."""
    for dim, part in enumerate(parts, start=1):
        if part.step is not None and part.step < 0:
            rows = range(data.shape[dim])[part]
            data = data.index_select(dim, torch.as_tensor(list(rows), dtype=torch.int64,
                                                          device=data.device))
        else:
            data = data[(slice(None),) * dim + (part,)]
    return data


def _batch_values(part):
    return part.data.cpu().numpy() if isinstance(part, TorchBatched) else None


def _rows_first(parts: tuple, like: TorchBatched) -> tuple:
    """``parts`` with its ints and arrays as tensors and the batch's rows in front, for
    an index whose advanced parts are apart (`per_example.advanced_apart`)."""
    device = like.data.device
    key = [
        torch.as_tensor(int(p), device=device) if isinstance(p, (int, np.integer))
        else _constant_index(p, like)
        for p in parts
    ]
    rank = len(np.broadcast_shapes(*(tuple(k.shape) for k in key if isinstance(k, torch.Tensor))))
    size = like.data.shape[0]
    rows = torch.arange(size, device=device).reshape((size,) + (1,) * rank)
    return (rows, *key)


def _constant_index(part, like: TorchBatched):
    if isinstance(part, slice):
        if part.step is not None and part.step < 0:
            raise NotNative("a negative slice step (torch has none)")
        return part
    if isinstance(part, (np.ndarray, list)):
        array = np.asarray(part)
        if array.dtype.kind not in "biu":
            raise NotNative("an index array that is neither integers nor booleans")
        return torch.as_tensor(array, device=like.data.device)
    if isinstance(part, np.integer):
        return int(part)
    return part


# -- ufuncs -----------------------------------------------------------------------------

#: NumPy ufuncs whose torch function has another name; every other ufunc runs as the
#: torch function of its own name, if there is one and it is not listed in _NOT_SAME.
_TORCH_NAMES = {
    "equal": "eq",
    "not_equal": "ne",
    "power": "pow",
    "absolute": "abs",
    "fabs": "abs",
    "invert": "bitwise_not",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "mod": "remainder",
    "conjugate": "conj_physical",
    "conj": "conj_physical",
    "rint": "round",
    "degrees": "rad2deg",
    "radians": "deg2rad",
    "positive": "clone",
}

#: torch functions named as a ufunc but meaning something else for some input: these
#: ufuncs run on the host. ``reciprocal``: NumPy's integer reciprocal truncates (torch
#: returns floats); ``float_power``/``ldexp``/``frexp``/``heaviside``/``nextafter``/
#: ``spacing``/``gcd``/``lcm``: rarely per-example, their dtype rules differ (torch
#: refuses or promotes otherwise), and the host keeps them exact. ``sign``: torch's is 0
#: at NaN. ``fmax``/``fmin``: which of 0.0 and -0.0 NumPy returns depends on the dtype.
_NOT_SAME = frozenset(
    {"reciprocal", "float_power", "ldexp", "frexp", "heaviside", "nextafter", "spacing",
     "gcd", "lcm", "modf", "divmod", "matmul", "vecdot", "matvec", "vecmat", "isnat",
     "sign", "fmax", "fmin"}
)

_EXTREMA = frozenset({"maximum", "minimum"})
_INTEGER_DIVISIONS = frozenset({"floor_divide", "remainder", "mod", "fmod"})
_COMPARISONS = frozenset({"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"})


@functools.cache
def _torch_ufunc(name: str):
    if name in _NOT_SAME:
        return None
    return getattr(torch, _TORCH_NAMES.get(name, name), None)


def _dtype_key(x) -> Any:
    """What NumPy's type resolution sees of an operand: a dtype, or a Python type (weak)."""
    if isinstance(x, TorchBatched):
        return _numpy(x.data.dtype)
    if type(x) in (int, float, complex):
        return type(x)
    if type(x) is bool:
        return np.dtype(bool)
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    if isinstance(x, torch.Tensor):  # a tensor the user made: its dtype
        return _numpy(x.dtype)
    raise NotNative(f"an operand of type {type(x).__name__}")


class _Loop(NamedTuple):
    """How one ufunc runs on operands of some dtypes: NumPy's loop (its input and output
    dtypes, and torch's), the torch function, and which of NumPy's meanings it needs."""

    in_dtypes: tuple
    out_dtypes: tuple
    in_torch: tuple
    out_torch: tuple
    function: Callable
    integer_division: bool  # floor_divide, remainder, fmod of integers
    integer_power: bool
    float_extrema: bool  # maximum, minimum of floats: which of 0.0 and -0.0
    float_remainder: bool  # the sign of a zero remainder


@functools.lru_cache(maxsize=4096)
def _loop(ufunc, keys: tuple) -> _Loop:
    """``ufunc`` on operands ``keys`` (see `_dtype_key`), worked out once per dtypes: a
    primitive runs the same loops at every block."""
    function = _torch_ufunc(ufunc.__name__)
    if function is None:
        raise NotNative(f"np.{ufunc.__name__}")
    try:
        dtypes = ufunc.resolve_dtypes((*keys, *(None,) * ufunc.nout))
    except (TypeError, ValueError) as e:  # no loop (say, bool - bool): NumPy's own error
        raise NotNative(str(e)) from None
    in_dtypes, out_dtypes = dtypes[: ufunc.nin], dtypes[ufunc.nin :]
    name, kind = ufunc.__name__, in_dtypes[0].kind
    return _Loop(
        in_dtypes, out_dtypes, tuple(map(_torch, in_dtypes)), tuple(map(_torch, out_dtypes)),
        function,
        integer_division=name in _INTEGER_DIVISIONS and kind in "iu",
        integer_power=name == "power" and kind in "iu",
        float_extrema=name in _EXTREMA and kind == "f",
        float_remainder=name in ("remainder", "mod") and kind == "f",
    )  # fmt: skip


def _device(values) -> torch.device:
    """The device of the views among ``values`` (in a structure or a list, too)."""
    for v in values:  # the common case: a view at the top
        if isinstance(v, TorchBatched):
            return v.data.device
    views = per_example.leaves(values, lists=True)
    return next(v.data.device for v in views if isinstance(v, TorchBatched))


def _as_tensor(value, dtype: np.dtype, device) -> torch.Tensor:
    """An operand as a tensor of ``dtype`` (a NumPy constant, a Python number, a tensor)."""
    if isinstance(value, torch.Tensor):
        return value.to(device=device, dtype=_torch(dtype))
    if type(value) in (int, float, bool):
        # A literal of the user's code (``x % 2``) meets the same dtype at every block.
        return _literal(type(value), value, _sign_bit(value), dtype, device,
                        torch.is_inference_mode_enabled())
    return torch.as_tensor(np.asarray(value, dtype=dtype), device=device)


def _sign_bit(value: int | float | bool) -> bool:
    """Whether ``value`` is negative or -0.0: the cache's key tells 0.0 from -0.0, which
    compare equal."""
    return math.copysign(1.0, value) < 0


@functools.lru_cache(maxsize=1024)
def _literal(kind: type, value: Any, negative: bool, dtype: np.dtype, device: torch.device,
             inference: bool) -> torch.Tensor:
    """The 0-d tensor of a Python number (never written to: operations make new tensors;
    one made in inference mode may only be used there, hence ``inference``). An int out
    of ``dtype``'s range raises, at every call (a raise is not cached)."""
    if kind is int and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:  # NumPy 2 raises here too
            raise OverflowError(f"Python integer {value} out of bounds for {dtype.name}")
    return torch.as_tensor(np.asarray(value, dtype=dtype), device=device)


def _kernel(function: Callable, *args, **kwargs):
    """``function(*args, **kwargs)``; a kernel torch lacks for these dtypes or this device
    (an integer matrix product on CUDA, np.floor of booleans) leaves the primitive to the
    host, which is NumPy."""
    try:
        return function(*args, **kwargs)
    except (NotImplementedError, RuntimeError) as e:
        if "not implemented for" not in str(e):
            raise
        raise NotNative(f"{getattr(function, '__name__', function)}: {e}") from None


def _ufunc(ufunc, inputs) -> Any:
    keys = tuple(map(_dtype_key, inputs))
    if ufunc.__name__ in _COMPARISONS:
        keys = _exact_comparison(keys, inputs)
    loop = _loop(ufunc, keys)
    device = next(x.data.device for x in inputs if isinstance(x, TorchBatched))
    operands = [
        _view_data(a, want) if isinstance(x, TorchBatched) else _as_tensor(a, d, device)
        for x, a, d, want in zip(inputs, per_example.align(inputs), loop.in_dtypes,
                                 loop.in_torch)
    ]
    function = loop.function
    if loop.integer_division:
        results = (_integer_division(function, *operands, divisor=inputs[1]),)
    else:
        if loop.integer_power:
            _check_integer_power(operands[1], inputs[1])
        results = _kernel(function, *operands)
        results = results if isinstance(results, tuple) else (results,)
        if loop.float_extrema:
            # Equal operands (0.0 and -0.0): NumPy returns the second, torch the first
            a, b = operands
            results = (torch.where(a == b, b, results[0]),)
        if loop.float_remainder:
            # A zero remainder takes the divisor's sign in NumPy (-0.0 % 1.0 is 0.0)
            zero = torch.copysign(torch.zeros_like(results[0]), operands[1])
            results = (torch.where(results[0] == 0, zero, results[0]),)
    if len(results) == 1:
        return TorchBatched(_view_data(results[0], loop.out_torch[0]))
    return tuple(TorchBatched(_view_data(r, want)) for r, want in zip(results, loop.out_torch))


def _view_data(data: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A view's ``data`` (on the run's device already) in ``dtype``."""
    return data if data.dtype is dtype else data.to(dtype)


def _exact_comparison(keys: tuple, inputs) -> tuple:
    """NumPy 2 compares an integer array with a Python int out of the array's range
    exactly (``uint8_x < 300`` is True): such a comparison runs in int64."""
    strong = [k for k in keys if isinstance(k, np.dtype)]
    if not strong or any(k.kind not in "iub" for k in strong):
        return keys
    for x in inputs:
        if type(x) is int and any(
            k.kind in "iu" and not _int_range(k)[0] <= x <= _int_range(k)[1] for k in strong
        ):
            return tuple(np.dtype(np.int64) if isinstance(k, np.dtype) else k for k in keys)
    return keys


@functools.cache
def _int_range(dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _integer_division(function, a: torch.Tensor, b: torch.Tensor, divisor: Any = None
                      ) -> torch.Tensor:
    """``a // b`` (``%``, ``fmod``) on integers as NumPy computes it: torch raises on a zero
    divisor (NumPy gives 0, with a warning) and the smallest integer over -1 traps the
    CPU; NumPy gives 0 for both remainders and wraps the quotient. A Python int
    ``divisor`` (the operand ``b`` came from) other than 0 and -1 needs none of that."""
    if type(divisor) is int and divisor not in (0, -1):
        return function(a, b)
    zero = b == 0
    # The smallest integer over -1 traps; an unsigned -1 does not exist (uint8's 255
    # would compare equal to it).
    minus_one = b == -1 if b.dtype.is_signed else torch.zeros_like(zero)
    if bool(zero.any()):
        _divide_by_zero(function.__name__)
    safe = torch.where(zero | minus_one, torch.ones_like(b), b)
    result = function(a, safe)
    if function is torch.floor_divide:
        result = torch.where(minus_one, -a, result)
    else:
        result = torch.where(minus_one, torch.zeros_like(result), result)
    return torch.where(zero, torch.zeros_like(result), result)


def _divide_by_zero(name: str) -> None:
    """NumPy's report of an integer division by zero, as its error state asks."""
    message = f"divide by zero encountered in {name}"
    action = np.geterr()["divide"]
    if action == "raise":
        raise FloatingPointError(message)
    if action != "ignore":
        warnings.warn(message, RuntimeWarning, stacklevel=4)


def _check_integer_power(exponent: torch.Tensor, operand: Any) -> None:
    """``operand``: what ``exponent`` came from (a Python int needs no look at the tensor)."""
    if operand < 0 if type(operand) is int else bool((exponent < 0).any()):  # NumPy's error
        raise ValueError("Integers to negative integer powers are not allowed.")


def _matmul(self: TorchBatched, a, b) -> TorchBatched:
    """Per-example ``a @ b`` for vectors and matrices, as one einsum over the batch."""
    spec = per_example.einsum_spec(a, b)
    if spec is None:
        raise NotNative("matmul of stacks of matrices")
    dtype = _numpy_result(np.matmul, (a, b), {})
    if dtype.kind == "b":
        raise NotNative("matmul of booleans")  # torch has no boolean matrix product
    device = _device((a, b))
    operands = [
        x.data.to(_torch(dtype)) if isinstance(x, TorchBatched) else _as_tensor(x, dtype, device)
        for x in (a, b)
    ]
    return TorchBatched(_kernel(torch.einsum, spec, *operands))


# -- array functions --------------------------------------------------------------------

def _dummy(x):
    """A NumPy stand-in for an operand, of its per-example dtype and shape."""
    if isinstance(x, TorchBatched):
        if x.weak:
            return python_scalar_of(x.dtype)
        return np.ones(x.shape, x.dtype)
    if isinstance(x, list):
        return [_dummy(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_dummy(v) for v in x)
    if isinstance(x, torch.Tensor):
        return np.ones(tuple(x.shape), _numpy(x.dtype))
    return x


def _numpy_result(func, args, kwargs) -> np.dtype:
    """The dtype NumPy's ``func`` gives on these operands (run on ones of their types),
    worked out once per operand types where each has a key (`_type_key`)."""
    try:
        key = (func, _type_key(tuple(args)), _type_key(tuple(kwargs.items())))
    except TypeError:  # an operand without a key (a NumPy array): no cache
        return _numpy_result_of(func, args, kwargs)
    dtype = _numpy_results.get(key)
    if dtype is None:
        dtype = _numpy_result_of(func, args, kwargs)
        if len(_numpy_results) < 4096:  # programs have few; a bound against the odd one
            _numpy_results[key] = dtype
    return dtype


#: `_numpy_result`'s dtypes by their operands' `_type_key`
_numpy_results: dict = {}


def _numpy_result_of(func, args, kwargs) -> np.dtype:
    with np.errstate(all="ignore"):
        return np.asarray(func(*_dummy(tuple(args)), **_dummy(kwargs) if kwargs else {})).dtype


def _type_key(x) -> Any:
    """What of ``x`` decides the dtype `_numpy_result` finds: a view's kind, dtype and
    shape, a tensor's or NumPy scalar's dtype and shape, a Python number's type (and an
    int's value: out of range it decides too); a NumPy array has none (TypeError)."""
    if isinstance(x, TorchBatched):
        return (x.weak, x.dtype, x.shape)
    if isinstance(x, (list, tuple)):
        return (type(x), *(_type_key(v) for v in x))
    if isinstance(x, (torch.Tensor, np.generic)):
        return (x.dtype, tuple(x.shape))
    if type(x) in (float, complex):
        return type(x)
    if type(x) in (int, bool, str) or x is None:
        return (type(x), x)
    raise TypeError(f"no key for {type(x).__name__}")


def _shift_axis(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(int(a) % ndim + 1 for a in axis)
    return (int(axis) % ndim + 1,)


def _reduction(func, args, kwargs):
    x = args[0]
    if not isinstance(x, TorchBatched) or len(args) > 2 or x.weak:
        raise NotNative(f"np.{func.__name__} with these arguments")
    if len(args) == 2:
        kwargs["axis"] = args[1]
    axis = kwargs.pop("axis", None)
    keepdims = bool(kwargs.pop("keepdims", False))
    ddof = kwargs.pop("ddof", 0)
    if kwargs or not x.ndim and axis not in (None, 0, -1, ()):
        raise NotNative(f"np.{func.__name__} with {sorted(kwargs)}")
    dims = _shift_axis(axis, x.ndim) if x.ndim else ()
    dtype = _numpy_result(func, (x,), {"axis": axis} if axis is not None else {})
    data = x.data
    if data.dtype != _torch(dtype) and dtype.kind != "b":
        data = data.to(_torch(dtype))  # NumPy accumulates in the result's dtype
    if not dims:  # a per-example scalar: NumPy's reduction of one element
        result = _reduce_nothing(func, data, dtype, ddof)
    else:
        result = _kernel(_REDUCERS[func], data, dims, keepdims, ddof)
    if keepdims and not dims:
        result = result.reshape(data.shape)
    return TorchBatched(result.to(_torch(dtype)))


def _reduce_nothing(func, data, dtype, ddof):
    if func in (np.std, np.var):
        return torch.where(torch.isnan(data), data, torch.zeros_like(data)) if ddof == 0 else (
            torch.full_like(data, float("nan")))
    if func in (np.any, np.all):
        return data != 0
    return data


def _prod(data, dims, keepdims, ddof):
    for d in sorted(dims, reverse=True):  # torch.prod takes one dim
        data = torch.prod(data, dim=d, keepdim=keepdims)
    return data


_REDUCERS = {
    np.sum: lambda d, dims, k, _: torch.sum(d, dim=dims, keepdim=k),
    np.prod: _prod,
    np.mean: lambda d, dims, k, _: torch.mean(d, dim=dims, keepdim=k),
    np.max: lambda d, dims, k, _: torch.amax(d, dim=dims, keepdim=k),
    np.amax: lambda d, dims, k, _: torch.amax(d, dim=dims, keepdim=k),
    np.min: lambda d, dims, k, _: torch.amin(d, dim=dims, keepdim=k),
    np.amin: lambda d, dims, k, _: torch.amin(d, dim=dims, keepdim=k),
    np.any: lambda d, dims, k, _: torch.any(d, dim=dims, keepdim=k),
    np.all: lambda d, dims, k, _: torch.all(d, dim=dims, keepdim=k),
    np.std: lambda d, dims, k, ddof: torch.std(d, dim=dims, correction=ddof, keepdim=k),
    np.var: lambda d, dims, k, ddof: torch.var(d, dim=dims, correction=ddof, keepdim=k),
}


def _argreduction(func, args, kwargs):
    x = args[0]
    axis = kwargs.pop("axis", args[1] if len(args) > 1 else None)
    if not isinstance(x, TorchBatched) or axis is None or kwargs or x.weak:
        raise NotNative(f"np.{func.__name__} without an axis")  # the flat index: NumPy's
    dim = _shift_axis(axis, x.ndim)[0]
    data = x.data
    chosen = torch.argmax if func is np.argmax else torch.argmin
    index = chosen(data.to(torch.uint8) if data.dtype == torch.bool else data, dim=dim)
    if data.is_floating_point():  # NumPy returns the first NaN's index
        nan = torch.isnan(data)
        index = torch.where(nan.any(dim=dim), torch.argmax(nan.to(torch.uint8), dim=dim), index)
    return TorchBatched(index)


def _weak_converted(func, values):
    if any(isinstance(v, TorchBatched) and v.weak for v in values):
        return per_example.weak_operands(func.__name__, values)
    return tuple(values), False


def _where(func, args, kwargs):
    if len(args) != 3 or kwargs:
        raise NotNative("np.where with one argument")  # the indices of true values
    args, _ = per_example.fitted_ints(func, args, {})
    values, weak_result = _weak_converted(func, args[1:])
    args = (args[0], *values)
    dtype = _numpy_result(func, args, {})
    device = _device(args)
    condition, a, b = per_example.align(args)
    if not isinstance(args[0], TorchBatched):  # a constant condition
        condition = condition.to(device) if isinstance(condition, torch.Tensor) else (
            torch.as_tensor(np.asarray(condition), device=device))
    a, b = (_operand(x, aligned, dtype, device) for x, aligned in zip(args[1:], (a, b)))
    result = TorchBatched(torch.where(
        condition if condition.dtype == torch.bool else condition != 0, a, b
    ))
    return per_example.weakened(result) if weak_result else result


def _operand(x, aligned, dtype: np.dtype, device) -> torch.Tensor:
    """Operand ``x`` (``aligned``: as `align` gave it) as a tensor of ``dtype`` on the
    run's device, where a view's data is already."""
    if isinstance(x, TorchBatched):
        return _view_data(aligned, _torch(dtype))
    return _as_tensor(aligned, dtype, device)


def _clip(func, args, kwargs):
    args, kwargs = per_example.fitted_ints(func, args, kwargs)
    lower = kwargs.pop("a_min", kwargs.pop("min", args[1] if len(args) > 1 else None))
    upper = kwargs.pop("a_max", kwargs.pop("max", args[2] if len(args) > 2 else None))
    if kwargs or len(args) > 3:
        raise NotNative(f"np.clip with {sorted(kwargs)}")
    present = [v for v in (args[0], lower, upper) if v is not None]
    values, weak_result = _weak_converted(func, present)
    values = list(values)
    x = values.pop(0)
    lower = values.pop(0) if lower is not None else None
    upper = values.pop(0) if upper is not None else None
    dtype = _numpy_result(func, (x, lower, upper), {})
    device = _device((x,)) if isinstance(x, TorchBatched) else _device((lower, upper))
    aligned = per_example.align([x, lower, upper])
    result = _as_tensor(aligned[0], dtype, device)
    if lower is not None:  # NumPy's definition: minimum(maximum(x, lower), upper)
        result = torch.maximum(result, _as_tensor(aligned[1], dtype, device))
    if upper is not None:
        result = torch.minimum(result, _as_tensor(aligned[2], dtype, device))
    result = TorchBatched(result)
    return per_example.weakened(result) if weak_result else result


def _joining(func, args, kwargs):
    """stack/concatenate: plain parts are broadcast over the batch first."""
    parts = list(args[0])
    axis = kwargs.pop("axis", args[1] if len(args) > 1 else 0)
    if kwargs or axis is None or any(isinstance(p, TorchBatched) and p.weak for p in parts):
        raise NotNative(f"np.{func.__name__} with these arguments")
    dtype = _numpy_result(func, (parts,), {"axis": axis})
    device = _device(parts)
    size = next(p.data.shape[0] for p in parts if isinstance(p, TorchBatched))
    tensors = [
        p.data.to(_torch(dtype)) if isinstance(p, TorchBatched)
        else _as_tensor(p, dtype, device).expand((size, *np.shape(p)))
        for p in parts
    ]
    ndim = max(per_example.example_ndim(p) for p in parts)
    rank = ndim + 1 if func is np.stack else ndim
    axis = axis % rank + 1 if rank else 1
    joined = torch.stack(tensors, dim=axis) if func is np.stack else torch.cat(tensors, dim=axis)
    return TorchBatched(joined)


def _dot(func, args, kwargs):
    if kwargs or len(args) != 2:
        raise NotNative(f"np.{func.__name__} with these arguments")
    return _matmul(None, *args)


def _norm(func, args, kwargs):
    x = args[0]
    axis = kwargs.pop("axis", None)
    if not isinstance(x, TorchBatched) or len(args) > 1 or kwargs or x.weak:
        raise NotNative("np.linalg.norm with ord= or keepdims=")
    if axis is None and x.ndim > 1 or isinstance(axis, (tuple, list)):
        raise NotNative("matrix norms")
    dtype = _numpy_result(func, (x,), {"axis": axis} if axis is not None else {})
    dims = _shift_axis(axis if axis is not None else -1, x.ndim)
    return TorchBatched(torch.linalg.vector_norm(x.data.to(_torch(dtype)), dim=dims))


def _round(func, args, kwargs):
    x = args[0]
    decimals = kwargs.pop("decimals", args[1] if len(args) > 1 else 0)
    if not isinstance(x, TorchBatched) or kwargs or len(args) > 2 or x.data.is_complex():
        raise NotNative("np.round with these arguments")
    if x.dtype.kind == "b":
        raise NotNative("np.round of booleans")  # NumPy's own error, or its identity
    if x.dtype.kind in "iu":
        if decimals < 0:
            raise NotNative("np.round of integers to tens")
        return x
    return x._same(torch.round(x.data, decimals=int(decimals)))


def _flat_argreduction(func, args, kwargs):
    """argmax/argmin without an axis: the index into the example's flattened array."""
    x = args[0]
    if len(args) > 1 or kwargs.get("axis") is not None:
        return _argreduction(func, args, kwargs)
    if kwargs or not isinstance(x, TorchBatched) or x.weak:
        raise NotNative(f"np.{func.__name__} with {sorted(kwargs)}")
    return _argreduction(func, (x.ravel(),), {"axis": 0})


def _cumulative(func, args, kwargs):
    x = args[0]
    axis = kwargs.pop("axis", args[1] if len(args) > 1 else None)
    if kwargs or len(args) > 2 or not isinstance(x, TorchBatched) or x.weak:
        raise NotNative(f"np.{func.__name__} with {sorted(kwargs)}")
    dtype = _numpy_result(func, (x,), {"axis": axis})
    if axis is None:  # NumPy's running total over the flattened example
        x, axis = x.ravel(), 0
    dim = _shift_axis(axis, x.ndim)[0]
    running = torch.cumsum if func is np.cumsum else torch.cumprod
    return TorchBatched(running(x.data.to(_torch(dtype)), dim=dim))


def _reshape(func, args, kwargs):
    shape = kwargs.pop("newshape", kwargs.pop("shape", args[1] if len(args) > 1 else None))
    if kwargs or len(args) > 2 or not isinstance(args[0], TorchBatched) or shape is None:
        raise NotNative(f"np.reshape with {sorted(kwargs)}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return args[0].reshape(shape)


def _squeeze(func, args, kwargs):
    x = args[0]
    axis = kwargs.pop("axis", args[1] if len(args) > 1 else None)
    if kwargs or not isinstance(x, TorchBatched):
        raise NotNative(f"np.squeeze with {sorted(kwargs)}")
    if axis is None:
        axis = tuple(i for i, d in enumerate(x.shape) if d == 1)
    axes = _shift_axis(axis, x.ndim) if x.ndim else ()
    if any(x.data.shape[a] != 1 for a in axes):
        raise NotNative("np.squeeze of an axis longer than one")  # NumPy's own error
    kept = [d for i, d in enumerate(x.data.shape) if i not in axes]
    return x._same(x.data.reshape(kept))


def _real(func, args, kwargs):
    return args[0].real if func is np.real else args[0].imag


_RULES: dict = {
    **dict.fromkeys(
        (np.sum, np.prod, np.mean, np.max, np.min, np.amax, np.amin, np.any, np.all,
         np.std, np.var),
        _reduction,
    ),
    np.argmax: _flat_argreduction,
    np.argmin: _flat_argreduction,
    np.cumsum: _cumulative,
    np.cumprod: _cumulative,
    np.reshape: _reshape,
    np.squeeze: _squeeze,
    np.where: _where,
    np.clip: _clip,
    np.stack: _joining,
    np.concatenate: _joining,
    np.dot: _dot,
    np.matmul: _dot,
    np.linalg.norm: _norm,
    np.round: _round,
    np.around: _round,
    np.real: _real,
    np.imag: _real,
    np.shape: lambda func, args, kwargs: args[0].shape,
    np.ndim: lambda func, args, kwargs: args[0].ndim,
    np.size: lambda func, args, kwargs: args[0].size,
}


# -- torch functions on per-example values ----------------------------------------------

#: torch functions that act elementwise (broadcasting their operands): on per-example
#: values they run on the batch at once; any other runs per example under torch.func.vmap
_POINTWISE = frozenset(
    """abs absolute acos acosh add arccos arccosh arcsin arcsinh arctan arctan2 arctanh
    asin asinh atan atan2 atanh bitwise_and bitwise_not bitwise_or bitwise_xor ceil clamp
    clip copysign cos cosh deg2rad div divide eq erf erfc erfinv exp exp2 expm1 float_power
    floor floor_divide fmax fmin fmod frac ge greater greater_equal gt hypot isfinite isinf
    isnan le less less_equal lgamma log log10 log1p log2 logaddexp logaddexp2 logical_and
    logical_not logical_or logical_xor logit lt maximum minimum mul multiply ne neg negative
    not_equal pow rad2deg reciprocal remainder round rsqrt sigmoid sign signbit sin sinc
    sinh sqrt square sub subtract tan tanh true_divide trunc where xlogy
    __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __pow__
    __rpow__ __neg__ __abs__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ __and__ __or__
    __xor__ __invert__""".split()  # noqa: SIM905
)


def map_examples(function: Callable, *args) -> Any:
    """``function`` (torch code for ONE example, taking plain tensors) over the examples
    of the per-example values among ``args``, with ``torch.func.vmap``."""
    return _torch_call(function, args, {}, pointwise=False)


def _torch_call(func, args, kwargs, pointwise: bool = True):
    """``func(*args, **kwargs)`` with torch's meaning, per example."""
    flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))
    batched = [i for i, leaf in enumerate(flat) if isinstance(leaf, TorchBatched)]
    kind = type(flat[batched[0]]).strong()
    _as_torch_numbers(flat)
    name = getattr(func, "__name__", "")
    if pointwise and name in _POINTWISE and not {"dim", "axis", "out"} & set(kwargs):
        aligned = per_example.align([flat[i] for i in batched])
        for i, data in zip(batched, aligned):
            flat[i] = data
        args, kwargs = torch.utils._pytree.tree_unflatten(flat, spec)
        return _wrap_tensors(func(*args, **kwargs), kind)

    def one(*values):
        leaves = list(flat)
        for i, value in zip(batched, values):
            leaves[i] = value
        inner_args, inner_kwargs = torch.utils._pytree.tree_unflatten(leaves, spec)
        return func(*inner_args, **inner_kwargs)

    try:
        mapped = torch.func.vmap(one)(*[flat[i].data for i in batched])
    except RuntimeError as e:
        if "vmap" not in str(e):
            raise
        raise RuntimeError(
            f"{_torch_name(func)} on per-example values: TorchBackend runs it for every example at "
            f"once with torch.func.vmap, which cannot run it ({e}). Use torch functions "
            "whose results' shapes do not depend on values (torch.where, masks) instead"
        ) from None
    return _wrap_tensors(mapped, kind)


def _as_torch_numbers(flat: list) -> None:
    """Weak values (a Python number per example) made the tensors torch would make of
    a Python number beside these operands: the strong operands' dtype where its kind
    holds the number (``torch.where(c, float32_x, 2.5)`` stays float32), else torch's
    default for the number's kind."""
    strong = [leaf.data if isinstance(leaf, TorchBatched) else leaf for leaf in flat
              if isinstance(leaf, torch.Tensor)
              or isinstance(leaf, TorchBatched) and not leaf.weak]
    for i, leaf in enumerate(flat):
        if not (isinstance(leaf, TorchBatched) and leaf.weak):
            continue
        number = python_scalar_of(leaf.dtype)
        beside = [torch.result_type(tensor, number) for tensor in strong]
        # torch's own default for a Python number, when no tensor is beside it
        dtype = functools.reduce(torch.promote_types, beside) if beside else torch.tensor(
            number).dtype
        flat[i] = TorchBatched(leaf.data.to(dtype))


def _torch_name(func) -> str:
    module = getattr(func, "__module__", None) or "torch"
    name = getattr(func, "__name__", repr(func))
    return f"torch.{name}" if module.startswith("torch") else name


def _wrap_tensors(value, kind: type):
    if isinstance(value, torch.Tensor):
        return kind(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_wrap_tensors(v, kind) for v in value)
    return value
