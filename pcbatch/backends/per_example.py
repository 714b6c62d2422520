"""What every per-example value class shares, whatever library holds its data.

A primitive's user code sees ONE example's value. Each backend hands it a view that acts
like that value: `pcbatch.backends.batched_array.BatchedArray` (a NumPy batch),
`pcbatch.backends.torch_values.TorchBatched` (a torch batch) and
`pcbatch.backends.numpy_dispatch.Dispatched` (a JAX or TensorFlow array of one example).

- `PerExampleValue`: the ndarray surface all three share (``.size``, ``.T``, ``len``,
  ``.item()``, ``round``, the methods that are NumPy functions), and NEP 50's weak
  operands (`weak_operands`, `weakened`, `weak_ufunc`), for which each view says how it
  is marked and converted (``as_weak``, ``as_strong``, ``converted``).
- `BatchedView`: a view whose ``data`` holds the whole batch in front (``[batch, *s]``):
  the per-example shape, reshapes and transposes, the refusal to become one Python
  value, and the helpers its batching rules share (`align`, `example_ndim`,
  `einsum_spec`, `is_simple_index`, `check_int_range`, `leaves`). A subclass states its
  library's part: its ``dtype``, ``real``, ``imag``, ``astype``, indexing, `_same`,
  `_permute`, `_copy`, and its NumPy protocols.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch.backends import python_ints
from pcbatch.backends.scalars import (
    BatchedValueError,
    as_python_round,
    as_python_scalar,
    ndarray_method,
)
from pcbatch.ir.types import is_pattern_node

__all__ = [
    "BatchedView",
    "PerExampleValue",
    "align",
    "check_int_range",
    "einsum_spec",
    "example_ndim",
    "fail_where",
    "is_simple_index",
    "leaves",
    "one_shape_argument",
    "refuse_value_slices",
    "weak_operands",
    "weakened",
    "weak_ufunc",
]


#: NumPy functions whose result's length depends on the values: per example it differs
RAGGED_FUNCTIONS = frozenset(
    {np.nonzero, np.argwhere, np.flatnonzero, np.unique, np.extract, np.compress}
)

_RAGGED_ADVICE = (
    "so the examples' results would differ in length, which one batch cannot hold. "
    "Keep the length fixed: np.count_nonzero(mask), np.sum(np.where(mask, v, 0)), "
    "np.where(mask, v, np.nan) with np.nanmax/np.nanmean, np.argmax(mask) for the first "
    "True, np.sort(v); for w[mask] = u[mask] or w[mask] += x, w = np.where(mask, u, w) or "
    "w = np.where(mask, w + x, w)"
)


def refuse_ragged(func, args: tuple) -> None:
    """``np.nonzero(c)``, ``np.where(c)`` with one argument, ``np.unique(v)``, ... of a
    per-example value: a TypeError saying what to write instead."""
    if func in RAGGED_FUNCTIONS or (func is np.where and len(args) == 1):
        name = "np.where(condition)" if func is np.where else f"np.{func.__name__}"
        raise BatchedValueError(
            f"{name} gives as many items as the values select, {_RAGGED_ADVICE}"
        )


def refuse_boolean_mask() -> None:
    """``v[mask]`` with a per-example boolean ``mask`` (on a library that cannot run it
    one example at a time)."""
    raise BatchedValueError(
        f"v[mask] with a per-example boolean mask selects as many items as are True, "
        f"{_RAGGED_ADVICE}"
    )


def refuse_value_slices(index, is_value: Callable[[Any], bool]) -> None:
    """``v[:k]``, ``v[k:k + 2]`` with a bound that holds a value per example (a variable,
    a loop counter, a parameter): the slice's length would depend on each example's
    values, so no type holds it; type inference, which runs the line on dummy values,
    would take the dummies' length. A TypeError saying what to write instead."""
    parts = index if isinstance(index, tuple) else (index,)
    for part in parts:
        if isinstance(part, slice) and any(
            is_value(bound) for bound in (part.start, part.stop, part.step)
        ):
            raise BatchedValueError(
                "v[a:b] with a bound computed per example (a variable, a loop counter, a "
                "parameter) has a length that depends on each example's values, "
                f"{_RAGGED_ADVICE}, np.sum(np.where(np.arange(len(v)) < k, v, 0)) for "
                "v[:k].sum(), v[k + np.arange(3)] for the 3 items from k; a bound that is "
                "the same for every example can be a literal or a module constant"
            )


#: the mixin's in-place method of each operator
_IN_PLACE = {
    operator.add: "__iadd__", operator.sub: "__isub__", operator.mul: "__imul__",
    operator.truediv: "__itruediv__", operator.floordiv: "__ifloordiv__",
    operator.mod: "__imod__", operator.pow: "__ipow__", operator.and_: "__iand__",
    operator.or_: "__ior__", operator.xor: "__ixor__", operator.lshift: "__ilshift__",
    operator.rshift: "__irshift__",
}


def _in_place_operator(binary: Callable) -> Callable:
    """``x op= y`` for a per-example view: `PerExampleValue._updated` with ``binary``."""

    def method(self, other):
        return self._updated(binary, other)

    method.__name__ = _IN_PLACE[binary]
    return method


def one_shape_argument(parts: tuple) -> tuple:
    """``x.reshape(2, 3)`` and ``x.reshape((2, 3))`` (likewise ``transpose``): the parts."""
    return tuple(parts[0]) if len(parts) == 1 and isinstance(parts[0], (tuple, list)) else parts


class PerExampleValue(np.lib.mixins.NDArrayOperatorsMixin):
    """ONE example's value: the ndarray surface every backend's view shares. A subclass
    gives ``shape``, ``dtype``, ``__getitem__``, ``reshape`` and ``transpose``, and the
    weak marks' ``as_weak``, ``as_strong`` and ``converted``."""

    __slots__ = ()
    weak = False  # True on the weak subclasses (`pcbatch.backends.weak`)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def T(self):  # noqa: N802 - NumPy's name
        return self.transpose()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a per-example scalar)")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def flatten(self):
        return self.ravel()

    def ravel(self):
        return self.reshape(-1)

    def item(self, *index):
        """``x.item()``, ``x.item(k)`` (the k-th item of the flattened array),
        ``x.item(i, j)``: a Python scalar, as ndarray's."""
        if len(index) == 1 and isinstance(index[0], tuple):
            index = index[0]
        if len(index) == 1:
            return as_python_scalar(self.reshape(-1)[index[0]])
        return as_python_scalar(self[index] if index else self)

    def tolist(self):
        """The example's items as Python scalars (weak), nested as its shape."""
        if not self.shape:
            return self.item()
        return [self[i].tolist() for i in range(self.shape[0])]

    def __round__(self, ndigits=None):
        return as_python_round(self, ndigits)

    def __getattr__(self, name: str):
        return ndarray_method(self, name)

    # -- comparisons with None ------------------------------------------------------
    # No example's value is None: NumPy answers False for a scalar (a Python bool) and
    # elementwise for an array, where JAX's and TensorFlow's ``==`` refuse None.
    def __eq__(self, other):
        if other is None:
            return self._compared_with_none(False)
        return np.lib.mixins.NDArrayOperatorsMixin.__eq__(self, other)

    def __ne__(self, other):
        if other is None:
            return self._compared_with_none(True)
        return np.lib.mixins.NDArrayOperatorsMixin.__ne__(self, other)

    __hash__ = None  # as an ndarray's: unhashable

    def _compared_with_none(self, answer: bool):
        return answer if not self.shape else np.full(self.shape, answer)

    # -- in-place operators ---------------------------------------------------------
    # Per example, a scalar (``v[i]``, ``x * 2``, an argument) is a NumPy scalar, which
    # ``+=`` rebinds (NumPy's scalars do not change): ``out = 0.0; out += v[i] * k`` in a
    # plain helper. An array changes in place, which its aliases would see: NumPy's
    # in-place ufunc, which each view takes or refuses.
    def _updated(self, operator, other):
        if self.shape == ():
            return operator(self, other)
        return getattr(np.lib.mixins.NDArrayOperatorsMixin, _IN_PLACE[operator])(self, other)

    __iadd__ = _in_place_operator(operator.add)
    __isub__ = _in_place_operator(operator.sub)
    __imul__ = _in_place_operator(operator.mul)
    __itruediv__ = _in_place_operator(operator.truediv)
    __ifloordiv__ = _in_place_operator(operator.floordiv)
    __imod__ = _in_place_operator(operator.mod)
    __ipow__ = _in_place_operator(operator.pow)
    __iand__ = _in_place_operator(operator.and_)
    __ior__ = _in_place_operator(operator.or_)
    __ixor__ = _in_place_operator(operator.xor)
    __ilshift__ = _in_place_operator(operator.lshift)
    __irshift__ = _in_place_operator(operator.rshift)

    # -- weak values (NEP 50: `pcbatch.backends.weak`) --------------------------
    def as_weak(self) -> PerExampleValue:
        """This value marked weak: each example is a Python scalar."""
        raise NotImplementedError

    def as_strong(self) -> PerExampleValue:
        """This value without the weak mark."""
        raise NotImplementedError

    def converted(self, dtype: np.dtype, wrap: bool = False) -> PerExampleValue:
        """This weak value as NumPy converts each example's Python scalar to ``dtype``
        beside an array of that dtype (a strong value); an int out of its range is
        NumPy 2's OverflowError, or with ``wrap`` wraps (np.where's unsafe cast)."""
        raise NotImplementedError


class BatchedView(PerExampleValue):
    """``data`` of shape ``[batch, *shape]``, acting like one example of shape ``shape``."""

    __slots__ = ("data",)

    def __init__(self, data: Any):
        self.data = data

    # -- what each library states --------------------------------------------------
    def _same(self, data: Any) -> BatchedView:
        """``data`` (a batch) as a view of this library (a strong one)."""
        raise NotImplementedError

    def as_strong(self) -> BatchedView:
        return self._same(self.data)

    @staticmethod
    def _permute(data: Any, order: list) -> Any:
        raise NotImplementedError

    @staticmethod
    def _copy(data: Any) -> Any:
        raise NotImplementedError

    # -- per-example views ---------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return tuple(self.data.shape[1:])

    @property
    def ndim(self) -> int:
        return self.data.ndim - 1

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(batch={self.data.shape[0]}, shape={self.shape}, "
                f"dtype={self.data.dtype})")

    # -- conversions that need one value ------------------------------------------
    def _needs_one_value(self, what: str):
        raise BatchedValueError(
            f"a batched value (per-example shape {self.shape}) was used as a Python {what}; "
            "each example may differ. Inside a plain helper function use np.where instead "
            "of if, or decorate the helper with ctx.batch so its control flow is batched."
        )

    def __bool__(self):
        self._needs_one_value("bool (an if or while condition)")

    def __int__(self):
        self._needs_one_value("int")

    def __float__(self):
        self._needs_one_value("float")

    def __index__(self):
        self._needs_one_value("index")

    def __array__(self, dtype=None, copy=None):
        self._needs_one_value("array (np.asarray)")

    # -- methods that mirror NumPy functions ---------------------------------------
    def reshape(self, *shape):
        return self._same(self.data.reshape((self.data.shape[0], *one_shape_argument(shape))))

    def transpose(self, *axes):
        axes = one_shape_argument(axes)
        order = list(range(self.ndim))[::-1] if not axes else [a % self.ndim for a in axes]
        return self._same(self._permute(self.data, [0, *(a + 1 for a in order)]))

    def copy(self):
        return self._same(self._copy(self.data))


def leaves(values, lists: bool = False):
    """The values in ``values`` and in the patterns (and, with ``lists``, lists) among them."""
    for v in values:
        if is_pattern_node(v) or lists and isinstance(v, list):
            yield from leaves(v, lists)
        else:
            yield v


def is_simple_index(part) -> bool:
    """An int, a full ``:``, or a per-example integer scalar."""
    if isinstance(part, BatchedView):
        return part.shape == () and part.dtype.kind in "iu"
    if isinstance(part, slice):
        return part == slice(None)
    return isinstance(part, (int, np.integer))


def advanced_apart(parts: tuple) -> bool:
    """Whether a constant index's advanced parts (integer arrays or lists, and the ints
    beside them) are separated by a slice, ``...`` or ``None``: then NumPy puts their
    broadcast axes first (``t[0, :, [1, 0]]`` has the list's axis first), in front of a
    batch's axis too, so a batch must index its rows as one more advanced part."""
    arrays = [k for k, p in enumerate(parts) if is_integer_array(p)]
    if not arrays:
        return False
    at = [k for k, p in enumerate(parts) if k in arrays or _is_int(p)]
    return at != list(range(at[0], at[-1] + 1))


def is_integer_array(part) -> bool:
    """An index part of NumPy's advanced indexing: an integer array (of any library) or a
    list of integers, of one dimension or more."""
    if isinstance(part, list):
        part = np.asarray(part)
    shape, dtype = getattr(part, "shape", None), getattr(part, "dtype", None)
    if shape is None or dtype is None or len(shape) == 0:
        return False
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).kind in "iu"


def _is_int(part) -> bool:
    return isinstance(part, (int, np.integer)) and not isinstance(part, bool)


def example_ndim(v) -> int:
    """The rank of ``v`` in one example: a view's per-example rank, a constant's own."""
    if isinstance(v, BatchedView):
        return v.ndim
    if type(v) in (int, float, bool, complex):  # the common constants, before the ABC check
        return 0
    if isinstance(v, (numbers.Number, np.generic)):
        return 0
    return np.ndim(v)


def align(values) -> list:
    """Batched values reshaped so per-example dims broadcast like one example's would."""
    rank = max((example_ndim(v) for v in values), default=0)
    out = []
    for v in values:
        if not isinstance(v, BatchedView):
            out.append(v)
            continue
        pad = rank - v.ndim
        # Of the same rank, the data broadcasts as it is (the common case, kept cheap).
        out.append(v.data.reshape((v.data.shape[0],) + (1,) * pad + v.shape) if pad else v.data)
    return out


def einsum_spec(a, b) -> str | None:
    """The einsum of per-example ``a @ b`` over the batch (``z``), for vectors and
    matrices; None for other ranks (stacks of matrices)."""
    na, nb = example_ndim(a), example_ndim(b)
    if na not in (1, 2) or nb not in (1, 2):
        return None
    left = "ij"[2 - na :] if na == 2 else "j"
    right = "jk"[:nb] if nb == 2 else "j"
    out = (left[0] if na == 2 else "") + (right[1] if nb == 2 else "")
    za = "z" if isinstance(a, BatchedView) else ""
    zb = "z" if isinstance(b, BatchedView) else ""
    return f"{za}{left},{zb}{right}->z{out}"


def check_int_range(data: Any, dtype: np.dtype) -> None:
    """NumPy 2 converts a Python int beside an array of ``dtype`` only when it fits: an
    example's integer in ``data`` (a NumPy array or a tensor) out of ``dtype``'s range is
    the OverflowError NumPy raises (the machine runs only the active examples, so every
    value here is one that Python would convert)."""
    info = np.iinfo(dtype)
    outside = (data < info.min) | (data > info.max)
    if bool(outside.any()):
        value = int(data[outside].reshape(-1)[0])
        from pcbatch.errors import lane_check_failed

        raise lane_check_failed(
            OverflowError(f"Python integer {value} out of bounds for {dtype.name}")
        )


def fitted_ints(func, args: tuple, kwargs: dict) -> tuple:
    """``np.where``'s and ``np.clip``'s Python int operands as NumPy 2 reads them beside
    integer arrays whose dtype cannot hold them: np.where casts them unsafely
    (``np.where(c, int8_x, 300)`` is 44 where ``c`` is false), np.clip ignores a bound
    past the dtype's range on its own side (``np.clip(int8_x, -300, 300)`` is ``x``;
    ``np.clip(int8_x, 300, 400)`` stays NumPy's OverflowError); NumPy 2.5's np.where
    raises as its arithmetic does (`NUMPY_WHERE_WRAPS`). The other libraries
    would raise for every such int. A weak value (a Python int per example) is a
    bound of np.clip saturated so; np.where's converts wrapping (`weak_operands`).
    Returns ``(args, kwargs)``."""
    given, kwargs = kwargs, dict(kwargs)
    values = list(args[1:] if func is np.where else args)
    bounds = {"a_min": 1, "min": 1, "a_max": 2, "max": 2}
    for key, position in bounds.items():
        if func is np.clip and key in kwargs:
            values += [None] * (position + 1 - len(values))
            values[position] = kwargs.pop(key)
    ints = [_is_python_int(v) or _is_weak_int(v) for v in values]
    if not any(ints) or any(isinstance(v, float) for v in values):
        return args, given  # nothing to fit: as called
    dtypes = [_dtype(v) for v, i in zip(values, ints) if v is not None and not i]
    if None in dtypes or not dtypes or np.result_type(*dtypes).kind not in "iu":
        return args, given  # nothing to fit: as called
    info = np.iinfo(np.result_type(*dtypes))
    fitted = []
    for position, v in enumerate(values):
        if _is_python_int(v) and not info.min <= v <= info.max:
            if func is np.where and NUMPY_WHERE_WRAPS:
                v = np.asarray(v).astype(np.result_type(*dtypes))  # wraps, as NumPy
            elif func is np.where or not _NUMPY_CLIP_SATURATES:
                # NumPy 2.5's np.where raises, whatever the condition; NumPy 2.0's np.clip
                # for any such bound
                raise OverflowError(f"Python integer {v} out of bounds for {info.dtype}")
            elif position == 1 and v < info.min or position == 2 and v > info.max:
                v = info.min if position == 1 else info.max
        elif _is_weak_int(v) and func is np.clip and position in (1, 2):
            # still a Python int (np.maximum of one gives a NumPy int)
            v = weakened(np.maximum(v, info.min) if position == 1 else np.minimum(v, info.max))
        fitted.append(v)
    return ((args[0], *fitted) if func is np.where else tuple(fitted)), kwargs


def _numpy_clip_saturates() -> bool:
    """Whether the installed NumPy's np.clip takes a Python int bound past an integer
    dtype's range (NumPy 2.0 raises OverflowError, later ones ignore such a bound)."""
    try:
        np.clip(np.zeros(1, np.int8), -300, 300)
    except OverflowError:
        return False
    return True


_NUMPY_CLIP_SATURATES = _numpy_clip_saturates()


def _numpy_where_wraps() -> bool:
    """Whether the installed NumPy's np.where casts a Python int past an integer array's
    range unsafely (``np.where(c, int8_x, 300)`` is 44 up to NumPy 2.4; NumPy 2.5 raises
    OverflowError, as its arithmetic does)."""
    try:
        np.where(True, np.zeros(1, np.int8), 300)
    except OverflowError:
        return False
    return True


NUMPY_WHERE_WRAPS = _numpy_where_wraps()


def _is_python_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, (bool, np.generic))


def _is_weak_int(v) -> bool:
    return _is_weak(v) and v.dtype.kind in "iu"


def _dtype(v):
    dtype = getattr(v, "dtype", None)
    return None if dtype is None else np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


def weak_operands(name: str, inputs) -> tuple:
    """NEP 50 on a ufunc's (or np.where's, np.clip's) operands: each weak view converted
    as NumPy converts a Python scalar beside them (`PerExampleValue.converted`) or, where
    it meets only weak operands, stripped of its mark. Returns them and whether the
    result is weak."""
    from pcbatch.backends import weak

    wrap = name == "where" and NUMPY_WHERE_WRAPS
    inputs, weak_result = weak.convert_operands(
        name, tuple(inputs), lambda x, dtype: x.converted(np.dtype(dtype), wrap)
    )
    return tuple(x.as_strong() if _is_weak(x) else x for x in inputs), weak_result


def _is_weak(x) -> bool:
    return isinstance(x, PerExampleValue) and x.weak


def weakened(result):
    """A result of weak operands only, marked weak again (a view, or a tuple of them)."""
    if isinstance(result, tuple):
        return tuple(weakened(r) for r in result)
    return result.as_weak() if isinstance(result, PerExampleValue) else result


#: the ufuncs Python's operators and ``abs``, ``pow``, ``divmod`` run as: between
#: Python numbers they compute as Python does. Another ufunc called on Python numbers
#: (``np.sin(t)`` of a Python float ``t``) gives a NumPy scalar, as NumPy's does:
#: float64 beside a float32 array (every backend kept it weak: float32)
OPERATOR_UFUNCS = frozenset({
    np.add, np.subtract, np.multiply, np.matmul, np.true_divide, np.floor_divide,
    np.remainder, np.divmod, np.power, np.left_shift, np.right_shift, np.bitwise_and,
    np.bitwise_or, np.bitwise_xor, np.less, np.less_equal, np.equal, np.not_equal,
    np.greater, np.greater_equal, np.negative, np.positive, np.absolute, np.invert,
})


def weak_ufunc(view, ufunc, method, inputs, kwargs):
    """``view.__array_ufunc__`` on operands some of which are weak: NEP 50 first, then
    the ufunc; a result of an operator between weak operands is weak."""
    inputs, weak_result = weak_operands(ufunc.__name__, inputs)
    weak_result = weak_result and ufunc in OPERATOR_UFUNCS
    if weak_result:
        inputs = python_ints.python_bools(ufunc.__name__, inputs)
    if weak_result and ufunc.__name__ in _DIVISIONS and len(inputs) == 2:
        inputs = _python_division(*inputs)
    float_power = weak_result and ufunc is np.power and _is_float_power(inputs)
    if float_power:
        _check_python_power(*inputs)
    result = view.__array_ufunc__(ufunc, method, *inputs, **kwargs)
    if float_power:
        _check_power_overflow(*inputs, result)
    if weak_result and method == "__call__":
        _check_python_int(ufunc.__name__, inputs, result)
    return weakened(result) if weak_result else result


def _check_python_int(name: str, inputs: tuple, result) -> None:
    """Python ints past int64's range (`python_ints`): on NumPy and Torch (a view holding
    the active examples) raised at once; a compiled machine's probe notes them."""
    from pcbatch.backends import weak

    eager = hasattr(result, "data")
    if not python_ints.is_checked(name, inputs, result):
        return
    if not weak.checked_here(weak.PYTHON_INT, eager):
        return
    outside = python_ints.outside(name, inputs, result)
    if eager:
        if bool(outside.data.any()):
            raise python_ints.overflow_error(weak.user_line())
        weak.note_fault(outside.data, None, weak.PYTHON_INT)  # type inference: it may wrap
        return
    weak.note_fault(outside.value, outside.xp, weak.PYTHON_INT)


def _is_float_power(inputs: tuple) -> bool:
    kinds = {getattr(_dtype_of_operand(x), "kind", None) for x in inputs}
    return len(inputs) == 2 and "f" in kinds


def _dtype_of_operand(x):
    if isinstance(x, PerExampleValue):
        return np.dtype(x.dtype)
    return np.asarray(x).dtype


def _check_python_power(base, exponent) -> None:
    """Python floats' ``**`` where NumPy's differs: 0.0 to a negative power raises
    ZeroDivisionError, a negative number to a fractional power is complex."""
    from pcbatch.backends import weak

    if not _literal(exponent) or exponent < 0:
        fail_where((base == 0) & (exponent < 0), weak.ZERO_POWER)
    if not _literal(exponent) or (math.isfinite(exponent) and exponent != math.floor(exponent)):
        fractional = np.isfinite(exponent) & (np.floor(exponent) != exponent)
        fail_where((base < 0) & fractional, weak.COMPLEX_POWER)


def _check_power_overflow(base, exponent, result) -> None:
    """Python raises OverflowError for a power of finite floats past float's range."""
    from pcbatch.backends import weak

    finite = np.isfinite(base) & np.isfinite(exponent)
    fail_where(finite & ~np.isfinite(result), weak.POWER_OVERFLOW)


def _literal(x) -> bool:
    return not isinstance(x, PerExampleValue)


def fail_where(flag, kind: str) -> None:
    """Python raises for the examples where ``flag``: on the eager machines (a view of the
    active examples' values) at once, unless type inference runs on dummies; a compiled
    machine's probe notes them (`weak.note_fault`), and they fail after the run."""
    from pcbatch.backends import weak

    if not isinstance(flag, PerExampleValue):
        flag = bool(np.all(flag))
        if flag and not weak.running_on_dummies():
            raise weak.error_of(kind, weak.user_line())
        return
    data = getattr(flag, "data", None)
    if data is not None:
        if bool(data.any()) and not weak.running_on_dummies():
            raise weak.error_of(kind, weak.user_line())
        weak.note_fault(data, None, kind)
        return
    weak.note_fault(flag.value, flag.xp, kind)


#: ufuncs that Python's ``/``, ``//``, ``%``, ``divmod`` run as
_DIVISIONS = frozenset({"divide", "true_divide", "floor_divide", "remainder", "divmod"})


def _python_division(dividend, divisor) -> tuple:
    """Python numbers divided (weak operands only): Python raises ZeroDivisionError for a
    zero divisor where NumPy gives inf or 0 (`fail_where`). On a compiled machine the
    failing examples divide by 1 meanwhile."""
    from pcbatch.backends import weak

    if _literal(divisor):
        if divisor != 0 or _literal(dividend):
            return dividend, divisor  # two literals: Python's own division raises for 0
        # ``float(x) / 0.0``: every example divides by zero (NaN too)
        fail_where((dividend == dividend) | (dividend != dividend), weak.ZERO_DIVISION)
        return dividend, divisor + 1
    zero = divisor == 0
    fail_where(zero, weak.ZERO_DIVISION)
    if hasattr(zero, "data"):  # eager: it raised unless type inference runs on dummies
        return dividend, divisor
    return dividend, np.where(zero, np.ones_like(divisor), divisor)
