"""Per-example semantics for NumPy code: a value that hides its batch dimension.

The frontend compiles a user's expressions into primitives; the user wrote
them for ONE example. `BatchedArray` wraps an array of shape ``[batch, *s]``
and behaves like the per-example array of shape ``s``: broadcasting aligns
per-example shapes (``np.array([1., 2., 3.]) * x`` scales a per-example
scalar ``x`` into a vector), indexing and ``axis=`` arguments address
per-example dimensions, and ``.shape``/``len`` are per-example. It is NumPy's
counterpart of ``jax.vmap``.

Ufuncs and the common array functions have fast batched rules; any other
function that receives a `BatchedArray` runs once per example and the
results are stacked, which is slow but right. Using a batched value as a
Python ``bool``/``int``/``float`` (an ``if`` on it inside a plain helper
function) raises, because each example may decide differently.
"""

from __future__ import annotations

import inspect
import os
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch.backends import bounds, per_example
from pcbatch.backends.per_example import BatchedView
from pcbatch.backends.scalars import BatchedValueError, OtherLibraryCall
from pcbatch.errors import lane_check_failed
from pcbatch.ir.types import is_pattern_node, rebuild

__all__ = ["BatchedArray", "BatchedValueError", "elementwise", "vectorize"]


class BatchedArray(BatchedView):
    """An array of shape ``[batch, *shape]`` that acts like one example of shape ``shape``."""

    __slots__ = ()

    def __init__(self, data: Any):
        self.data = data if type(data) is np.ndarray else np.asarray(data)

    def _same(self, data: np.ndarray) -> BatchedArray:
        return BatchedArray(data)

    @staticmethod
    def _permute(data: np.ndarray, order: list) -> np.ndarray:
        return data.transpose(order)

    @staticmethod
    def _copy(data: np.ndarray) -> np.ndarray:
        return data.copy()

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def real(self) -> BatchedArray:
        return BatchedArray(self.data.real)

    @property
    def imag(self) -> BatchedArray:
        return BatchedArray(self.data.imag)

    def astype(self, dtype, **kwargs) -> BatchedArray:
        return BatchedArray(self.data.astype(dtype, **kwargs))

    def as_weak(self) -> BatchedArray:
        return WeakBatchedArray(self.data)

    def converted(self, dtype: np.dtype, wrap: bool = False) -> BatchedArray:
        if dtype.kind in "iu" and self.data.dtype.kind in "iu" and self.data.size and not wrap:
            per_example.check_int_range(self.data, dtype)
        return BatchedArray(self.data.astype(dtype))

    def __getitem__(self, index: Any) -> BatchedArray:
        if not isinstance(index, tuple):
            index = (index,)
        per_example.refuse_value_slices(index, lambda bound: isinstance(bound, BatchedArray))
        try:
            if any(isinstance(i, BatchedArray) for i in index):
                if all(_is_simple_index(i) for i in index):
                    return BatchedArray(_gather(self.data, index))
                one = index if len(index) > 1 else index[0]
                return _per_example(lambda x: x[one], (self,), {})
            if per_example.advanced_apart(index):  # the example's index axes go first
                return BatchedArray(self.data[(_rows(self.data.shape[0], index), *index)])
            return BatchedArray(self.data[(slice(None), *index)])
        except IndexError:
            # NumPy names the batch's axis (1 for the example's 0): say the example's
            bounds.check_batched(self.shape, index, _batch_values)
            raise

    def __tf_tensor__(self, dtype=None, name=None):
        raise OtherLibraryCall("TensorFlow", "TensorFlowBackend()")

    # -- NumPy protocols -------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs or method == "at":
            _refuse_shared_targets(ufunc, method, inputs, kwargs)
        if any(type(x) is WeakBatchedArray for x in inputs):
            return per_example.weak_ufunc(self, ufunc, method, inputs, kwargs)
        if method == "__call__" and not kwargs and ufunc.signature is None:
            raw = _same_rank_data(inputs, self.data.ndim)
            if raw is not None:  # the common case, kept cheap: no alignment needed
                result = ufunc(*raw)
                if ufunc.nout == 1:
                    return BatchedArray(result)
                return tuple(BatchedArray(r) for r in result)
        if ufunc is np.matmul and method == "__call__" and not kwargs:
            return _matmul(inputs[0], inputs[1])
        if method != "__call__" or "out" in kwargs or ufunc.signature is not None:
            return _per_example(getattr(ufunc, method), inputs, kwargs)
        aligned, size = _align(inputs)
        return _wrap(ufunc(*aligned, **kwargs), size)

    def __array_function__(self, func, types, args, kwargs):
        per_example.refuse_ragged(func, args)
        try:
            rule = _RULES.get(func)
            if rule is not None:
                result = rule(func, args, kwargs)
                if result is not NotImplemented:
                    return result
            with _unchanged_arrays(func, args, kwargs):
                return _per_example(func, args, kwargs)
        except np.linalg.LinAlgError as error:  # a singular matrix: that example's failure
            raise lane_check_failed(error) from None


class SharedArrayWrite(BatchedValueError):
    """A plain helper wrote per-example values into an array that is not per-example
    (``out = np.zeros(2); out += v``, ``np.multiply(v, 2, out=out)``, ``np.copyto(out, v)``):
    a batched run has one such array for every example, so the helper runs one example
    at a time, as Python would run it."""


def _refuse_shared_targets(ufunc, method: str, inputs: tuple, kwargs: dict) -> None:
    """Raises `SharedArrayWrite` when a ufunc would write batched values into a plain
    array (its ``out=``, or the first operand of ``ufunc.at``)."""
    out = kwargs.get("out", ())
    targets = list(out) if isinstance(out, tuple) else [out]
    if method == "at":
        targets.append(inputs[0])
    if any(isinstance(t, np.ndarray) for t in targets):
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        raise SharedArrayWrite(
            f"{name} writes per-example values into an array that every example shares"
        )


class _unchanged_arrays:
    """Around a NumPy function run one example at a time: raises `SharedArrayWrite`
    (after putting the old values back) when it changed a plain array among its
    arguments (``np.copyto(out, v)``, ``np.put(out, i, v)``): each example would have
    written over the last one's values."""

    def __init__(self, func: Callable, args: tuple, kwargs: dict):
        self.func = func
        leaves = per_example.leaves((args, tuple(kwargs.values())), lists=True)
        self.saved = [
            (a, a.copy()) for a in leaves if type(a) is np.ndarray and a.flags.writeable
        ]

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback) -> None:
        changed = [(a, old) for a, old in self.saved if not np.array_equal(a, old, equal_nan=True)]
        for a, old in changed:
            a[...] = old
        if changed and kind is None:
            name = getattr(self.func, "__name__", repr(self.func))
            raise SharedArrayWrite(
                f"np.{name} writes per-example values into an array that every example shares"
            )


class WeakBatchedArray(BatchedArray):
    """A `BatchedArray` whose examples are Python scalars (weak, NEP 50): see
    `pcbatch.backends.weak`. Ufuncs convert it to the dtype of the strong operands it
    meets; between weak operands the result is weak again."""

    __slots__ = ()
    weak = True


# ---------------------------------------------------------------------------
# Batching rules


def elementwise(function: Callable) -> Callable:
    """Marks a helper whose results are elementwise in its (broadcast) arguments.

    On `BatchedArray` arguments it runs once on the raw batch (per-example shapes
    aligned as one example's would broadcast), skipping the per-operation wrapping:
    worth it for long chains of cheap operations such as a random-number cipher.
    Other arguments (one example's arrays, JAX or TensorFlow values) call it as is.
    """

    def run(*args):
        if not any(isinstance(a, BatchedArray) for a in args):
            return function(*args)
        aligned, size = _align(args)
        return _wrap(function(*aligned), size)

    run.__name__ = getattr(function, "__name__", "elementwise")
    run.__doc__ = function.__doc__
    return run


def _same_rank_data(values, rank: int) -> list | None:
    """The raw arrays when every batched input has ``rank`` and the rest are Python scalars."""
    raw = []
    for v in values:
        if type(v) is BatchedArray:
            if v.data.ndim != rank:
                return None
            raw.append(v.data)
        elif isinstance(v, (int, float, bool, np.generic)):
            raw.append(v)
        else:
            return None
    return raw


def _batch_of(values) -> int | None:
    for v in values:
        if isinstance(v, BatchedArray):
            return v.data.shape[0]
    return None


def _align(values) -> tuple:
    """`align`, and the batch size (None when nothing is batched)."""
    return per_example.align(values), _batch_of(values)


def _wrap(result, size):
    if isinstance(result, tuple):
        return tuple(_wrap(r, size) for r in result)
    result = np.asarray(result)
    if size is not None and result.ndim and result.shape[0] == size:
        return BatchedArray(result)
    return result


def _batch_values(part):
    return part.data if isinstance(part, BatchedArray) else None


def _is_simple_index(part) -> bool:
    """An int, a full ``:``, or a per-example integer scalar or array."""
    if isinstance(part, BatchedArray):
        return np.issubdtype(part.dtype, np.integer)
    if isinstance(part, slice):
        return part == slice(None)
    return isinstance(part, (int, np.integer))


def _rows(size: int, index: tuple) -> np.ndarray:
    """The batch's row numbers as an advanced index beside ``index``'s own, shaped to
    broadcast in front of them."""
    rank = len(np.broadcast_shapes(*(np.shape(p) for p in index if not isinstance(p, slice)
                                     and p is not None and p is not Ellipsis)))
    return np.arange(size).reshape((size,) + (1,) * rank)


def _gather(data: np.ndarray, index: tuple) -> np.ndarray:
    """``data[b][index_b]`` for every batch row ``b``, as one fancy index (a gather).

    ``index`` holds ints, full slices and per-example integer arrays (`_is_simple_index`).
    Per example, NumPy broadcasts the advanced parts (ints and arrays) to one shape K and
    puts K where they stand if they are adjacent, else first. Here the batch rows are
    one more advanced part, in front: each part gets the rows' axis and K's rank, and
    where the example's K stands after leading slices, its axes move back there."""
    advanced = [k for k, part in enumerate(index) if not isinstance(part, slice)]
    shapes = [part.shape if isinstance(part, BatchedArray) else () for part in index]
    rank = len(np.broadcast_shapes(*(shapes[k] for k in advanced)))
    size = max(data.shape[0], *(p.data.shape[0] for p in index if isinstance(p, BatchedArray)))
    data = np.broadcast_to(data, (size, *data.shape[1:]))  # a shared value: one row

    def batched(part):
        if not isinstance(part, BatchedArray):
            return part
        values = np.broadcast_to(part.data, (size, *part.shape))
        return values.reshape((size,) + (1,) * (rank - part.ndim) + part.shape)

    rows = np.arange(size).reshape((size,) + (1,) * rank)
    result = data[(rows, *(batched(part) for part in index))]
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
    if adjacent and advanced[0] > 0 and rank > 0:  # the example's K stands after slices
        first = 1 + advanced[0]
        result = np.moveaxis(result, range(1, 1 + rank), range(first, first + rank))
    return result


def _per_example(func: Callable, args, kwargs) -> Any:
    """The slow, always-right rule: call ``func`` once per example and stack."""
    size = _batch_of(list(per_example.leaves(args)) + list(per_example.leaves(kwargs.values())))
    if size is None:
        return func(*args, **kwargs)
    results = [
        func(*_take(args, i), **dict(zip(kwargs, _take(tuple(kwargs.values()), i))))
        for i in range(size)
    ]
    _refuse_reused_buffers(func, results)
    return _stack_results(results)


def _refuse_reused_buffers(func: Callable, results: list) -> None:
    """Raises when two examples got the same array object back: a function that returns
    a buffer it keeps and overwrites (``np.multiply(x, 2, out=buf); return buf``) gives
    Python one object whose value the next call changes, which a batch cannot mirror."""
    firsts = list(per_example.leaves([results[0]]))
    for later in results[1:]:
        for a, b in zip(firsts, per_example.leaves([later])):
            if a is b and isinstance(a, np.ndarray):
                function = inspect.unwrap(func)
                code = getattr(function, "__code__", None)
                where = f"{code.co_filename}:{code.co_firstlineno}" if code else "?"
                name = getattr(function, "__name__", repr(function))
                what = f"the line at {where}" if name == "<lambda>" else f"{name} ({where})"
                raise ValueError(
                    f"{what} gave the same array object for two examples: a plain helper "
                    "returns an array that it keeps and overwrites on its next call, so in "
                    "plain Python an earlier result would change too, which a batched run "
                    "cannot reproduce. Return a new array from the helper (return buf.copy(), "
                    "or compute the result without out=)"
                )


def _take(values: tuple, i: int) -> tuple:
    def one(v):
        if type(v) is WeakBatchedArray:
            return v.data[i].item()  # one example of a weak value: a Python scalar
        if isinstance(v, BatchedArray):
            return v.data[i]
        if is_pattern_node(v):
            return rebuild(v, [one(x) for x in v])
        return v

    return tuple(one(v) for v in values)


def _stack_results(results: list) -> Any:
    first = results[0]
    if is_pattern_node(first):
        return rebuild(first, [_stack_results([r[k] for r in results]) for k in range(len(first))])
    arrays = [np.asarray(r) for r in results]
    shapes = list(dict.fromkeys(a.shape for a in arrays))
    if len(shapes) > 1:
        listed = ", ".join(map(str, shapes[:4])) + (", ..." if len(shapes) > 4 else "")
        raise ValueError(
            f"this line's value has a different shape for different examples ({listed}; "
            "v[v > 0] or np.nonzero(v) keep as many "
            "items as each example has), which a batch cannot hold: keep every example's "
            "shape the same (np.where(v > 0, v, 0), a mask beside the values), or reduce in "
            "the same line (v[v > 0].sum(), np.count_nonzero(v > 0))"
        )
    return BatchedArray(np.stack(arrays))


def _shift_axis(axis, ndim: int):
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, (tuple, list)):
        return tuple(a % ndim + 1 if ndim else a for a in axis)
    return axis % ndim + 1 if ndim else axis


def _matmul(a, b):
    """Per-example ``a @ b`` for vectors and matrices, as one einsum over the batch."""
    spec = per_example.einsum_spec(a, b)
    if spec is None:
        return _per_example(np.matmul, (a, b), {})
    raw = [x.data if isinstance(x, BatchedArray) else x for x in (a, b)]
    return BatchedArray(np.einsum(spec, *raw))


def _dot(func, args, kwargs):
    if kwargs or len(args) != 2:
        return NotImplemented
    return _matmul(*args)


def _reduction(func, args, kwargs):
    x = args[0]
    if not isinstance(x, BatchedArray) or len(args) > 2:
        return NotImplemented
    if len(args) == 2:
        kwargs = {**kwargs, "axis": args[1]}
    axis = _shift_axis(kwargs.pop("axis", None), x.ndim)
    return _wrap(func(x.data, axis=axis, **kwargs), x.data.shape[0])


def _argreduction(func, args, kwargs):
    x = args[0]
    axis = kwargs.pop("axis", args[1] if len(args) > 1 else None)
    if not isinstance(x, BatchedArray) or axis is None:
        return NotImplemented
    return _wrap(func(x.data, axis=_shift_axis(axis, x.ndim), **kwargs), x.data.shape[0])


def _elementwise(func, args, kwargs):
    if any(isinstance(v, BatchedArray) for v in kwargs.values()):
        return NotImplemented
    if func in (np.where, np.clip):
        args, kwargs = per_example.fitted_ints(func, args, kwargs)
    if any(type(v) is WeakBatchedArray for v in args):
        # np.where's condition says nothing about the values' dtype
        values = args[1:] if func is np.where else args
        values, weak_result = per_example.weak_operands(func.__name__, values)
        # a weak condition (a comparison of Python ints) loses its mark too, or this
        # would recurse for ever (``max(c, i * 2)`` of range counters did)
        condition = args[0].as_strong() if type(args[0]) is WeakBatchedArray else args[0]
        args = (condition, *values) if func is np.where else values
        result = _elementwise(func, args, kwargs)
        return per_example.weakened(result) if weak_result else result
    batched = next((v for v in args if isinstance(v, BatchedArray)), None)
    raw = None if batched is None else _same_rank_data(args, batched.data.ndim)
    if raw is not None:
        return BatchedArray(func(*raw, **kwargs))
    aligned, size = _align(args)
    return _wrap(func(*aligned, **kwargs), size)


def _joining(func, args, kwargs):
    """stack/concatenate: plain parts are broadcast over the batch first."""
    parts = list(args[0])
    axis = kwargs.pop("axis", args[1] if len(args) > 1 else 0)
    size = _batch_of(parts)
    ndim = max(per_example.example_ndim(p) for p in parts)
    arrays = [
        p.data if isinstance(p, BatchedArray) else np.broadcast_to(p, (size, *np.shape(p)))
        for p in parts
    ]
    rank = ndim + 1 if func is np.stack else ndim
    axis = axis % rank + 1 if rank else 1
    return _wrap(func(arrays, axis=axis, **kwargs), size)


def _norm(func, args, kwargs):
    x = args[0]
    if not isinstance(x, BatchedArray) or len(args) > 2:
        return NotImplemented
    if len(args) == 2:  # np.linalg.norm(v, np.inf): ``ord`` given by position
        kwargs = {**kwargs, "ord": args[1]}
    axis = kwargs.pop("axis", None)
    if axis is None and x.ndim > 1:
        return NotImplemented  # matrix norms: per example
    return _wrap(
        func(x.data, axis=_shift_axis(axis if axis is not None else -1, x.ndim), **kwargs),
        x.data.shape[0],
    )


_RULES = {
    **{
        f: _reduction
        for f in (
            np.sum,
            np.prod,
            np.mean,
            np.max,
            np.min,
            np.amax,
            np.amin,
            np.any,
            np.all,
            np.std,
            np.var,
        )
    },
    **{f: _argreduction for f in (np.argmax, np.argmin)},
    **{
        f: _elementwise
        for f in (np.where, np.clip, np.isclose, np.broadcast_to, np.round, np.around, np.real)
    },
    np.imag: _elementwise,
    np.stack: _joining,
    np.concatenate: _joining,
    np.linalg.norm: _norm,
    np.dot: _dot,
    np.matmul: _dot,
    np.shape: lambda func, args, kwargs: args[0].shape,
    np.ndim: lambda func, args, kwargs: args[0].ndim,
    np.size: lambda func, args, kwargs: args[0].size if len(args) == 1 else NotImplemented,
}
_RULES.pop(np.broadcast_to)  # its shape argument is per-example: leave it to the slow rule


def vectorize(function: Callable) -> Callable:
    """``function`` written for one example, applied to batched arrays ``[batch, *s]``.

    A function with a ``batch_rule`` (the frontend gives expressions of operators only
    themselves; `pcbatch.frontend.runtime.truthy` has its own) gets its arguments
    unwrapped when all are arrays, aligned to one rank as one example's would broadcast
    (a lower rank padded with 1s after the batch axis): the rule returns what the
    per-example run would (or NotImplemented, to run per example after all), without
    the cost of `BatchedArray`'s wrappers on every operation. (For an expression of
    broadcasting operators, aligning the inputs once is aligning at every operation.)
    """

    from pcbatch.backends import numpy_dispatch

    numpy_dispatch.register_with_jax()  # jnp functions on per-example values: per example

    rule = getattr(function, "batch_rule", None)

    def batched(*args):
        if rule is not None and args:
            raw = _aligned(args)
            if raw is not None:
                result = rule(*raw)
                if result is not NotImplemented:
                    return result
        wrapped = [_wrap_input(a) for a in args]
        try:
            result = function(*wrapped)
        except (BatchedValueError, ValueError) as e:
            # (NumPy's item assignment turns a BatchedValueError into a ValueError)
            if not isinstance(e, BatchedValueError):
                if not isinstance(e.__cause__, BatchedValueError):
                    raise
                e = SharedArrayWrite(
                    "item assignment writes per-example values into an array that every "
                    "example shares"
                )
            # Python control flow on a value (an `if` in a plain helper): still
            # right, one example at a time.
            _warn_slow(function, e)
            result = _per_example(function, tuple(wrapped), {})
        return _unwrap_output(result)

    batched.__name__ = getattr(function, "__name__", "primitive")
    batched.__wrapped__ = function
    return batched


def _aligned(args) -> tuple | list | None:
    """``args`` (batches) aligned to one rank, or None if one is not a NumPy array."""
    if len(args) == 1:
        return args if type(args[0]) is np.ndarray else None
    rank, same = args[0].ndim if type(args[0]) is np.ndarray else -1, True
    for a in args:
        if type(a) is not np.ndarray:
            return None
        if a.ndim != rank:
            same, rank = False, max(rank, a.ndim)
    if same:
        return args
    return [a.reshape(a.shape[:1] + (1,) * (rank - a.ndim) + a.shape[1:]) for a in args]


class PerExampleFallbackWarning(UserWarning):
    """A primitive ran one example at a time because it uses Python control flow on values."""


#: the primitives warned about, by id: id -> a weak reference to the primitive's code
#: (the id alone could be reused by a later primitive once the first is freed, and that
#: one's warning would be lost)
_warned: dict[int, Any] = {}


def _first_warning(about: Any) -> bool:
    """True the first time for ``about`` (a code object or function) while it lives."""
    seen = _warned.get(id(about))
    if seen is not None and seen() is about:
        return False
    try:
        _warned[id(about)] = weakref.ref(about)
    except TypeError:  # no weak references (a ufunc, say): it lives as long as NumPy
        _warned[id(about)] = lambda: about
    return True


def _warn_slow(function: Callable, error: Exception) -> None:
    function = inspect.unwrap(function)  # the user's own function, not a pcbatch wrapper
    code = getattr(function, "__code__", None)
    if not _first_warning(code if code is not None else function):
        return
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else repr(function)
    if isinstance(error, OtherLibraryCall):
        advice = ""
    elif isinstance(error, SharedArrayWrite):
        advice = (": make the array from the example's values instead of writing into it "
                  "(out = v * 2, out = np.zeros_like(v), out = np.zeros(2) + v)")
    else:
        advice = ": use np.where in plain helpers, or batch the helper with ctx.batch"

    line = _users_line(error)
    if line is None:
        warnings.warn(
            f"the primitive at {where} runs one example at a time ({error}). Results are "
            f"right, but slow{advice}.",
            PerExampleFallbackWarning,
            stacklevel=3,
        )
        return
    filename, lineno, name = line
    warnings.warn_explicit(
        f"the line at {filename}:{lineno} (in {name}) runs one example at a time ({error}). "
        f"Results are right, but slow{advice}.",
        PerExampleFallbackWarning,
        filename,
        lineno,
    )


#: the directories whose frames are not the user's: pcbatch's and NumPy's
_NOT_USERS = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.abspath(np.__file__)) + os.sep,
)


def _users_line(error: Exception) -> tuple | None:
    """(file, line, function) of the deepest frame of ``error``'s traceback outside
    pcbatch and NumPy: the user's line that made the primitive fall back (inside a
    plain helper, or a log density that NUTS's program calls), not pcbatch's."""
    found = None
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(_NOT_USERS) and not code.co_filename.startswith("<"):
            found = (code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def _wrap_input(value):
    if is_pattern_node(value):
        return rebuild(value, [_wrap_input(v) for v in value])
    return BatchedArray(value)


def _unwrap_output(value):
    if is_pattern_node(value):
        return rebuild(value, [_unwrap_output(v) for v in value])
    if isinstance(value, BatchedArray):
        return value.data
    # A per-example constant: a batch of one, which the VM broadcasts.
    return np.asarray(value)[None]
