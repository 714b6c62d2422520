"""Helpers that the frontend's compiled primitives call, written for one example.

The frontend's primitives are per-example functions (vectorized by the
backend), so Python's ``not``, ``and``, ``or`` and ``x if c else y`` on values
become these NumPy forms, and a branch condition becomes one bool per example.
"""

from __future__ import annotations

import builtins
import copy
import inspect
import operator

import numpy as np

from pcbatch.errors import ConditionShapeError, SharedArrayError
from pcbatch.frontend.math_forms import MATH_FORMS


def truthy(x):
    """Normalizes a value to one bool, for use as an ``if``/``while`` condition.

    A per-example value must have only size-1 dimensions (as ``bool(array)``
    requires in Python); it becomes a 0-d bool. Works on plain values and, in
    a batched run, on each example's value.
    """
    if type(x).__module__.startswith("tensorflow"):
        return _tf_truthy(x)
    shape = np.shape(x)
    _check_condition_shape(shape)
    if shape:
        x = x.reshape(())
    return x.astype(bool) if hasattr(x, "astype") else np.bool_(x)


def _truthy_of_scalars(x):
    """`truthy` on a raw batch of per-example scalars (`batched_array.vectorize`'s rule)."""
    if x.ndim != 1:
        return NotImplemented
    return x if x.dtype == np.bool_ else x.astype(bool)


truthy.batch_rule = _truthy_of_scalars


def _tf_truthy(x):
    """`truthy` of a `tf.Tensor` (eager or symbolic: no NumPy conversion)."""
    import tensorflow as tf

    _check_condition_shape(tuple(d if d is not None else -1 for d in x.shape.as_list()))
    return tf.cast(tf.reshape(x, []), tf.bool)


def _check_condition_shape(shape: tuple) -> None:
    if any(d != 1 for d in shape):
        raise ConditionShapeError(
            f"a condition must be a single value per example, but it has shape {shape}; "
            "reduce it with np.all(...) or np.any(...)"
        )


def _truthy_for_backend(backend):
    """`truthy` over a whole batch on a staged backend (None elsewhere): a reshape and a
    cast, where mapping the one-example form over the batch costs TensorFlow a
    ``tf.vectorized_map`` (graph building) for every condition of the program."""
    if not getattr(backend, "staged", False):
        return None

    def batched(x):
        shape = np.shape(x)
        _check_condition_shape(shape[1:])
        return np.reshape(x, shape[:1]).astype(bool)

    return backend.adapt(batched)


truthy.for_backend = _truthy_for_backend


def batched_primitive(function):
    """Marks a plain helper as already batched, for code written to the seed's contract.

    Called from a batched function, a marked helper becomes a primitive of its own that
    receives every argument as a whole batch (a leading batch dimension: the threads at
    that line) and returns batched results, instead of being written for one example
    like the rest of the function. It must be a module-level or closure name, called
    with positional arguments; on JAX and TensorFlow it sees that backend's arrays
    (NumPy calls in it are mapped as elsewhere). Called outside a batched function it
    is the plain function.
    """
    function.__pcbatch_batched_primitive__ = True
    return function


def is_batched_primitive(value) -> bool:
    return getattr(value, "__pcbatch_batched_primitive__", False) is True


def python_int(x):
    """``x`` as the Python int that ``range`` gives per example (weak, NEP 50).

    On one example: ``operator.index(x)``. Batched: the batch as the default int
    dtype, marked weak (`pcbatch.backends.weak`), so ``uint8_x + i`` stays uint8.
    """
    from pcbatch.backends import weak

    if isinstance(x, (int, np.integer)) or (isinstance(x, np.ndarray) and x.ndim == 0):
        return operator.index(x)
    if np.dtype(x.dtype).kind not in "biu":  # as Python's range: no floats
        raise TypeError(f"range() arguments must be integers, not {np.dtype(x.dtype).name}")
    return weak.mark(x.astype(int))


def range_next(counter, step):
    """The next value of a ``range`` counter: Python int arithmetic, unchecked for int64's
    range (`pcbatch.backends.python_ints`): the counter stays below the range's stop,
    itself an int64, so only a step past the stop's headroom could wrap."""
    from pcbatch.backends import weak

    with weak.checked_elsewhere(weak.PYTHON_INT):
        return python_int(counter) + python_int(step)


def range_length(start, stop, step):
    """``len(range(start, stop, step))`` per example, as Python ints (`python_int`); an
    example whose step is 0 fails with Python's ValueError (`per_example.fail_where`).
    `desugar` loops over ``reversed(range(...))`` and a range inside ``zip`` or
    ``enumerate`` by this length."""
    from pcbatch.backends import weak
    from pcbatch.backends.per_example import fail_where

    if all(_is_plain(x) for x in (start, stop, step)):
        return len(range(start, stop, step))
    start, stop, step = python_int(start), python_int(stop), python_int(step)
    fail_where(np.equal(step, 0), weak.RANGE_ZERO_STEP)
    with weak.checked_elsewhere(weak.PYTHON_INT):
        toward = np.where(np.greater(step, 0), 1, -1)
        step = np.where(np.equal(step, 0), 1, step)  # a failed example's; keeps `//` quiet
        return weak.mark(np.maximum((stop - start + step - toward) // step, 0))


def slice_mask(target, start, stop, step):
    """Where ``target[start:stop:step]`` lies along its first axis, as a boolean mask:
    ``w[a:b] = x`` with per-example bounds is ``w[slice_mask(w, a, b, None)] = x``
    (`pcbatch.passes.masked_items`). Python's ``slice.indices`` rule per example: a
    negative bound counts from the end, bounds clip to the axis, None is the end the
    step starts from; a zero step is Python's ValueError."""
    from pcbatch.backends import weak
    from pcbatch.backends.per_example import fail_where

    size = np.shape(target)[0]
    step = 1 if step is None else python_int(step)
    fail_where(np.equal(step, 0), weak.SLICE_ZERO_STEP)
    with weak.checked_elsewhere(weak.PYTHON_INT):  # bounds clipped to the axis: no overflow
        forward = np.greater(step, 0)
        first = _slice_bound(start, size, forward, np.where(forward, 0, size - 1))
        last = _slice_bound(stop, size, forward, np.where(forward, size, -1))
        position = np.arange(size)
        inside = np.where(forward, (first <= position) & (position < last),
                          (last < position) & (position <= first))
        stride = np.where(np.equal(step, 0), 1, np.abs(step))
        return inside & np.equal((position - first) % stride, 0)


class AugmentedItem:
    """``target[index] op value`` of one example, for ``target[index] op= value``: the item
    combined, or, where ``index`` is a boolean mask, the whole array combined (the
    assignment writes it where the mask holds), ``value`` one number or one item as NumPy
    requires of ``w[m] += x`` (one per True would differ in length between examples)."""

    def __init__(self, operator_name: str):
        self.operator_name = operator_name
        self.__name__ = f"augmented_{operator_name.lower()}"

    def __call__(self, target, index, value):
        combine = _AUGMENTED[self.operator_name]
        from pcbatch.backends.foreign import numpy_dtype

        if not hasattr(index, "dtype") or np.ndim(index) == 0 or numpy_dtype(index).kind != "b":
            return combine(target[index], value)
        item = tuple(np.shape(target)[np.ndim(index):])
        try:
            fits = np.broadcast_shapes(tuple(np.shape(value)), item) == item
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"w[mask] op= x with x of shape {tuple(np.shape(value))}: x must be one number "
                f"or one item (shape {item}), as one per True differs in length between "
                "examples; write w = np.where(mask, w + x, w)"
            )
        return combine(target, value)

    def __eq__(self, other):
        return type(other) is AugmentedItem and other.operator_name == self.operator_name

    def __hash__(self):
        return hash((AugmentedItem, self.operator_name))


_AUGMENTED = {
    "Add": operator.add, "Sub": operator.sub, "Mult": operator.mul,
    "Div": operator.truediv, "FloorDiv": operator.floordiv, "Mod": operator.mod,
    "Pow": operator.pow, "BitAnd": operator.and_, "BitOr": operator.or_,
    "BitXor": operator.xor, "LShift": operator.lshift, "RShift": operator.rshift,
    "MatMult": operator.matmul,
}


def _slice_bound(bound, size: int, forward, default):
    """One bound of a slice as ``slice.indices`` makes it: from the end if negative, then
    clipped to [0, size] stepping forward, [-1, size - 1] backward."""
    if bound is None:
        return default
    bound = python_int(bound)
    bound = np.where(np.less(bound, 0), bound + size, bound)
    return np.where(forward, np.clip(bound, 0, size), np.clip(bound, -1, size - 1))


python_int.weak_results = True  # always a Python int per example (type inference)
range_next.weak_results = True
range_length.weak_results = True


def select(condition, if_true, if_false):
    """``if_true if condition else if_false`` with both sides already evaluated.

    Between two Python scalars (weak values, NEP 50) the result is weak too, as each
    example's is: ``(1 if c else 2.5) * float32_x`` stays float32.
    """
    from pcbatch.backends import weak

    if isinstance(if_true, tuple) or isinstance(if_false, tuple):
        # a tuple is no array: choose item by item, so each keeps its own dtype
        sizes = [len(side) if isinstance(side, tuple) else None for side in (if_true, if_false)]
        if sizes[0] != sizes[1]:
            what = [f"a tuple of {n} items" if n is not None else "a non-tuple" for n in sizes]
            raise TypeError(
                f"'x if c else y' chooses between {what[0]} and {what[1]}; a batched value "
                "has one structure for every example: give both sides the same structure"
            )
        return tuple(select(condition, a, b) for a, b in zip(if_true, if_false))
    if not (_is_weak(if_true) and _is_weak(if_false)):
        return np.where(truthy(condition), if_true, if_false)
    if isinstance(condition, (bool, np.bool_, np.ndarray, np.generic)):  # one example
        return if_true if truthy(condition) else if_false
    return weak.mark(np.where(truthy(condition), if_true, if_false))


def _is_weak(x) -> bool:
    from pcbatch.backends import weak

    return weak.is_marked(x) or type(x) in (bool, int, float, complex)


def logical_not(x):
    """``not x``: a Python bool per example (weak), whose arithmetic is an int's."""
    from pcbatch.backends import weak

    return weak.mark(np.logical_not(truthy(x)))


def logical_and(left, right):
    """``left and right`` with both sides already evaluated."""
    return select(left, right, left)


def logical_or(left, right):
    return select(left, left, right)


class RangeStepCheck:
    """``range(start, stop, step)``'s check that ``step`` is not zero, as a batched
    primitive returning ``step``. On NumPy (which runs a block for its active threads
    only) it raises Python's ValueError, naming the user's function and line. A staged
    backend cannot raise inside its loop: there the step passes through, and the machine
    stops the threads that `faulting` names and raises `error` after the run
    (`pcbatch.vm.staged.faulted_at`)."""

    def __init__(self, where: str):
        self.where = where
        self.__name__ = "range_step_check"

    def __call__(self, step):
        if np.any(np.equal(step, 0)):
            raise self.error()
        return step

    @staticmethod
    def faulting(step):
        return np.equal(step, 0)

    def error(self) -> ValueError:
        from pcbatch.errors import lane_check_failed

        return lane_check_failed(ValueError(f"range() arg 3 must not be zero (at {self.where})"))

    def for_backend(self, backend):
        if getattr(backend, "staged", False):
            return _pass_through
        return None


class RaiseCheck:
    """``raise E(...)`` (or a failed ``assert``) that only some examples reach: a batched
    primitive of a per-example True, which every example that runs it fails with the
    user's exception. On NumPy and Torch (which run a block for its active threads only)
    it raises at once; a staged backend stops those threads and raises it after the run,
    as for range()'s zero step (`RangeStepCheck`); ``return_status=True`` reports them
    as `LaneStatus.ERROR`."""

    def __init__(self, exception: BaseException, where: str):
        self.exception, self.where = exception, where
        self.__name__ = "raise"
        if hasattr(exception, "add_note"):
            exception.add_note(f"raised at {where} for the examples that reached it")

    def __call__(self, reached):
        from pcbatch.backends import weak

        if np.any(reached) and not weak.running_on_dummies():
            raise self.error()
        return reached

    @staticmethod
    def faulting(reached):
        return np.not_equal(reached, False)

    def error(self) -> BaseException:
        """A fresh copy of the user's exception each time (raising one object again
        would grow its traceback, and notes added to it would stay for the next call)."""
        from pcbatch.errors import lane_check_failed

        fresh = copy.copy(self.exception)
        fresh.__traceback__ = None
        if hasattr(self.exception, "__notes__"):
            fresh.__notes__ = list(self.exception.__notes__)
        return lane_check_failed(fresh)

    for_backend = RangeStepCheck.for_backend


def _pass_through(value):
    return value


def _empty_message(builtin: str) -> str:
    """This Python's own words for ``max()``/``min()`` of no items (they changed in 3.12)."""
    try:
        getattr(builtins, builtin)(())
    except ValueError as error:
        return str(error)
    raise AssertionError(f"{builtin}(()) did not raise")


class EmptyReductionCheck:
    """``max``/``min`` of a comprehension's items (`pcbatch.frontend.comprehensions`):
    the check that there was an item, as a batched primitive returning ``seen``. Python
    raises ValueError for an example with none; raised at once on NumPy, after the run
    on staged backends (as range()'s zero step, `RangeStepCheck`)."""

    def __init__(self, builtin: str, where: str):
        self.builtin, self.where = builtin, where
        self.__name__ = f"{builtin}_nonempty_check"

    def __call__(self, seen):
        if not np.all(seen):
            raise self.error()
        return seen

    @staticmethod
    def faulting(seen):
        return np.logical_not(seen)

    def error(self) -> ValueError:
        from pcbatch.errors import lane_check_failed

        return lane_check_failed(ValueError(
            f"{_empty_message(self.builtin)} (at {self.where}), as Python says for each "
            f"example with no item: give {self.builtin}(..., default=...) a value for them"
        ))

    for_backend = RangeStepCheck.for_backend


#: ``int(1e20)`` (the wording of `IntConversionGuard`'s message)
_PAST_INT64 = "past int64's range [-2**63, 2**63)"


class IntConversionGuard:
    """``int(x)`` and ``round(x)``'s check that ``x`` is finite, as a batched primitive
    returning ``x``: Python raises for nan (ValueError) and infinities (OverflowError),
    where NumPy's cast gives the smallest int64. On NumPy (active threads only) it raises
    Python's error, naming the user's line; a staged backend passes ``x`` through and
    stops the threads `faulting` names, raising `error` after the run, as for range()'s
    zero step (`RangeStepCheck`)."""

    def __init__(self, builtin: str, where: str):
        self.builtin, self.where = builtin, where
        self.__name__ = f"{builtin}_guard"

    def __call__(self, x):
        if _is_float(x) and np.any(self.faulting(x)):
            from pcbatch.errors import lane_check_failed

            if np.any(np.isnan(x)):
                raise lane_check_failed(ValueError(self._message("NaN")))
            if not np.all(np.isfinite(x)):
                raise lane_check_failed(OverflowError(self._message("infinity")))
            raise lane_check_failed(OverflowError(self._message(_PAST_INT64)))
        return x

    @staticmethod
    def faulting(x):
        """Where ``x`` is nan, infinite, or past int64's range: Python's int of such a
        float is exact (``int(1e20)``), which an int64 batch cannot hold (the cast gave
        the smallest or largest int64, silently)."""
        if not _is_float(x):
            return np.not_equal(x, x)  # an int or bool is always finite: all False
        inside = np.logical_and(np.greater_equal(x, -(2.0**63)), np.less(x, 2.0**63))
        return np.logical_not(inside)  # nan compares False: not inside

    def error(self) -> Exception:
        from pcbatch.errors import NonFiniteToIntError, lane_check_failed

        return lane_check_failed(
            NonFiniteToIntError(self._message(f"NaN or infinity, or {_PAST_INT64},"))
        )

    def _message(self, what: str) -> str:
        return (
            f"cannot convert float {what} to integer (at {self.where}, by {self.builtin}()); "
            "as Python does for each example (past int64's range, Python's exact int does "
            "not fit the batch's int64): test np.isfinite(x) and the range first"
        )


    def for_backend(self, backend):
        if getattr(backend, "staged", False):
            return _pass_through
        return None


def _batch_aligned(a, b) -> tuple:
    """``a`` and ``b`` (batches, or one value for the batch) padded with trailing axes of
    size 1 to one rank, so that they broadcast example by example."""
    rank_a, rank_b = np.ndim(a), np.ndim(b)
    if rank_a == 0 or rank_b == 0 or rank_a == rank_b:
        return a, b
    if rank_a < rank_b:
        return np.reshape(a, np.shape(a) + (1,) * (rank_b - rank_a)), b
    return a, np.reshape(b, np.shape(b) + (1,) * (rank_a - rank_b))


class IntPowerGuard:
    """``base ** exponent`` (and ``pow(base, exponent)``)'s check, as a batched primitive
    returning ``exponent``: integers to negative integer powers raise ValueError in
    NumPy, as per example in Python; JAX's power gave a wrong number and TensorFlow's a
    graph error. Raised at once on NumPy, after the run on staged backends (as
    `IntConversionGuard`)."""

    #: returns its input 1, the exponent: a literal's stays a weak Python int, so
    #: ``f ** 2`` of a float32 ``f`` is float32 (type inference)
    passes_through = 1

    def __init__(self, where: str):
        self.where = where
        self.__name__ = "int_power_guard"

    def __call__(self, base, exponent):
        if _is_integer(base) and _is_integer(exponent) and np.any(np.less(exponent, 0)):
            raise self.error()
        return exponent

    @staticmethod
    def faulting(base, exponent):
        """One flag per example (the batch's leading axis): whether its integer power has
        a negative exponent. All False for a float power, in the same per-example shape
        (``v ** w`` of float vectors gave flags of the vectors' shape, which failed on JAX
        and TensorFlow)."""
        # over the base's shape too: a literal exponent is one value for the batch. Both
        # lead with the batch: a lower rank's items stand for its example's whole row
        # (a vector ``n ** 2``: (batch, 3) and (batch,) would not broadcast)
        base, exponent = _batch_aligned(base, exponent)
        if _is_integer(base) and _is_integer(exponent):
            negative = np.logical_or(np.less(exponent, 0), np.not_equal(base, base))
        else:
            negative = np.logical_and(np.less(exponent, exponent), np.equal(base, base))
        rank = len(np.shape(negative))
        return np.any(negative, axis=tuple(range(1, rank))) if rank > 1 else negative

    def error(self) -> ValueError:
        from pcbatch.errors import lane_check_failed

        return lane_check_failed(ValueError(
            f"Integers to negative integer powers are not allowed (at {self.where}), as "
            "NumPy says for each example (of two Python ints Python gives a float, which "
            "a batch of integers cannot hold): make the base a float (2.0 ** n, "
            "n.astype(float))"
        ))

    def for_backend(self, backend):
        """Staged: the exponent passes through, a negative one of an integer power as 0,
        so the power after it computes (TensorFlow's kernel raises inside the run, JAX's
        gives a number) for the examples that fail here anyway."""
        if not getattr(backend, "staged", False):
            return None

        def harmless(base, exponent):
            if not (_is_integer(base) and _is_integer(exponent)):
                return exponent
            return np.where(np.less(exponent, 0), np.zeros_like(exponent), exponent)

        return backend.adapt(harmless)


def checked_power(base, exponent):
    """``base ** exponent`` whose exponent `IntPowerGuard` has checked: the power inside
    does not note the check again (`weak.note_fault`, for plain helpers' powers)."""
    from pcbatch.backends import weak

    with weak.checked_elsewhere(weak.NEGATIVE_POWER):
        return base ** exponent


def _is_integer(x) -> bool:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return isinstance(x, int)
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).kind in "iub"


def _is_float(x) -> bool:
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return isinstance(x, float)
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).kind == "f"


def sync() -> None:
    """Asks the scheduler to gather threads here before running what follows.

    Written as a statement, ``pcbatch.sync()``, inside a batched function: the
    compiler starts a new block at that point, and the VM holds back running it
    while threads elsewhere can still reach it (see ``pcbatch/vm/policy.py``).
    Results are the same with or without it. Called as a plain function (in
    plain Python or ``dry_run``) it does nothing.
    """
    return None


# -- Python's scalar builtins on one example's value ---------------------------------
# The frontend calls these for ``float(x)``, ``int(x)``, ``bool(x)``, ``min(a, b)`` and
# ``max(a, b)`` in a batched function's own code: Python's builtins need one Python
# value, which a batched value is not (its per-example view cannot convert itself).
# The result is the Python scalar's NumPy dtype (float64, int64, bool), marked weak
# (`pcbatch.backends.weak`): beside a float32 array, ``float(x) * y`` stays float32.


def _is_plain(x) -> bool:
    """A Python or NumPy scalar, a string: a value the builtin itself can take."""
    return isinstance(x, (str, bytes, bool, int, float, complex, np.generic))


def _one_number(x, builtin: str):
    if np.ndim(x):
        raise TypeError(
            f"{builtin}() of a per-example array (shape {np.shape(x)}): only a single "
            f"number converts (as in NumPy); use x.astype(...) for arrays"
        )
    return x


def to_float(x):
    """``float(x)``."""
    return float(x) if _is_plain(x) else _python(_one_number(x, "float").astype(np.float64))


def to_int(x):
    """``int(x)``: truncates toward zero, as ``astype`` does."""
    return int(x) if _is_plain(x) else _python(_one_number(x, "int").astype(np.int64))


def to_bool(x):
    """``bool(x)``: Python's rule for arrays, as an ``if`` applies it (`truthy`)."""
    return bool(x) if _is_plain(x) else _python(truthy(x))


def _python(x):
    from pcbatch.backends import weak

    return weak.mark(x)


def _extreme(builtin, replaces: str):
    """``min``/``max`` of per-example numbers: the first extreme one, as Python picks it
    (``min(a, b)`` is ``b if b < a else a``, so NaN handling follows Python's too)."""
    name = builtin.__name__

    def extreme(*args):
        items = list(args[0]) if len(args) == 1 else list(args)
        if all(_is_plain(x) for x in items):
            return builtin(items)
        if not items:
            raise ValueError(f"{name}() arg is an empty sequence")
        best = items[0]
        for item in items[1:]:
            for x in (best, item):
                if np.ndim(x):
                    raise TypeError(
                        f"{name}() of per-example arrays (shape {np.shape(x)}): Python "
                        f"compares them as one bool, which an array cannot be; use "
                        f"np.{replaces}(a, b) for elementwise, np.{name}(v) for a reduction"
                    )
            better = item < best if name == "min" else item > best
            best = np.where(better, item, best)
        return best

    extreme.__name__ = name
    return extreme


py_min = _extreme(min, "minimum")
py_max = _extreme(max, "maximum")


def _any_or_all(builtin):
    """``any(v)``/``all(v)`` of a per-example value: Python tests each item's truth (an
    array's items along its first axis) and gives a Python bool. An item of more than one
    number has no truth value, as in Python (``truthy`` says what to write)."""
    name = builtin.__name__
    reduce = np.any if builtin is any else np.all

    def any_or_all(items):
        if inspect.isgenerator(items):  # of a comprehension the frontend left in its line
            items = tuple(items)
            if all(map(_is_plain, items)):
                return builtin(items)
        if _is_plain(items) and not isinstance(items, (str, bytes)):
            return builtin(items)  # Python's TypeError: not iterable
        if isinstance(items, (tuple, list)):
            truths = [truthy(item) for item in items]
            if not truths:
                return builtin(())
            found = truths[0]
            for truth in truths[1:]:
                found = np.logical_or(found, truth) if builtin is any else np.logical_and(
                    found, truth)
            return _python(found)
        shape = tuple(int(d) for d in np.shape(items))
        if not shape:
            raise TypeError(f"{name}() of a per-example number: a number is not iterable")
        if shape[0] == 0:
            return builtin(())
        _check_condition_shape(shape[1:])  # each item must be one number, as bool() needs
        return _python(reduce(np.not_equal(np.reshape(items, (shape[0],)), 0)))

    any_or_all.__name__ = name
    return any_or_all


py_any = _any_or_all(any)
py_all = _any_or_all(all)

def unshared(value, message: str, source=None):
    """``value``, bound by ``z = y`` (or a view such as ``y[1:]``) where one of the names
    is changed in place: Python would share an array between them, which a batch cannot
    (each variable holds its own value); a scalar is never changed in place, so it passes.
    With ``source`` (``z = np.asarray(y, dtype)``): shared only where the dtype stays."""
    same_dtype = source is None or np.dtype(value.dtype) == np.dtype(source.dtype)
    if np.ndim(value) and same_dtype:
        raise SharedArrayError(message)
    return value


def _numpy_copy(builtin):
    """``np.array(v)``/``np.asarray(v)`` of one example's value: on JAX and TensorFlow a
    per-example value is no NumPy array (NumPy would make an object array of its
    elements), so it copies or converts itself, and a list holding such values is
    stacked; anything else goes to NumPy."""

    def convert(value, dtype=None, **kwargs):
        if set(kwargs) - {"copy"} or not _holds_batched(value):
            return builtin(value, dtype, **kwargs)
        if isinstance(value, (list, tuple)):
            # NumPy reads the Python numbers of a list as strong (int64, float64)
            items = [_strong(convert(v)) for v in value]
            dtype = np.result_type(*(v.dtype for v in items)) if dtype is None else dtype
            return np.stack([v.astype(dtype) for v in items])
        # a copy (a JAX or TensorFlow array cannot be changed in place anyway), strong:
        # one example's Python scalar becomes its NumPy default dtype, as NumPy makes it
        value = _strong(value)
        return value.astype(value.dtype if dtype is None else dtype)

    convert.__name__ = builtin.__name__
    return convert


def _holds_batched(value) -> bool:
    """Whether ``value`` is, or a list or tuple holds, a per-example value of a batch."""
    if isinstance(value, (list, tuple)):
        return any(_holds_batched(v) for v in value)
    return not (_is_plain(value) or isinstance(value, np.ndarray))


_PYTHON_KIND_DTYPES = {"b": np.bool_, "i": np.int64, "u": np.int64, "f": np.float64,
                       "c": np.complex128}


def _strong(value):
    """A per-example value as NumPy holds it in an array: a Python number (plain, or a
    weak batched value) takes its kind's default dtype."""
    from pcbatch.backends import weak

    if _is_plain(value) and not isinstance(value, np.generic):
        return np.asarray(value)
    if weak.is_marked(value):
        return value.astype(_PYTHON_KIND_DTYPES[np.dtype(value.dtype).kind])
    return value


to_array = _numpy_copy(np.array)
to_asarray = _numpy_copy(np.asarray)


def _numpy_scalar_type(scalar_type: type):
    """``np.float32(x)`` (a NumPy scalar type called on one value) of a per-example
    value: NumPy converts the example's number, or array, as ``astype`` does; a JAX or
    TensorFlow value is no number NumPy can convert (the call failed there)."""

    def convert(*args):
        if len(args) != 1 or not _holds_batched(args[0]):
            return scalar_type(*args)
        if isinstance(args[0], (list, tuple)):
            return to_array(args[0], scalar_type)
        return _strong(args[0]).astype(scalar_type)

    convert.__name__ = scalar_type.__name__
    return convert


#: the NumPy scalar types whose calls on per-example values `_numpy_scalar_type` converts
_SCALAR_TYPES = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                 np.uint32, np.uint64, np.float16, np.float32, np.float64, np.complex64,
                 np.complex128)


def full(shape, fill_value, dtype=None, order="C"):
    """``np.full(shape, x)`` with a per-example ``x``: NumPy writes ``x`` into an empty
    array by ``copyto``, which no other library's value can take (JAX and TensorFlow
    failed). A broadcast of ``x`` instead, with NumPy's dtype (``x``'s, or ``dtype``)."""
    value = to_asarray(fill_value, dtype)
    if _is_plain(value) or isinstance(value, np.ndarray):
        return np.full(shape, value, dtype=dtype, order=order)  # the same for every example
    return np.broadcast_to(value, shape).copy()


def lift(value, *index_parts):
    """``value`` about to be indexed by ``index_parts`` (the names the index reads): a
    constant NumPy array indexed per example (``COEF[i]`` in a loop, ``TABLE[k]``)
    becomes a value of the parts' library, which NumPy's own indexing cannot take (JAX
    and TensorFlow failed). Anything else is returned as it is."""
    if type(value) is not np.ndarray:
        return value
    from pcbatch.backends.numpy_dispatch import Dispatched, wrap

    for part in index_parts:
        if isinstance(part, Dispatched):
            return wrap(part.xp.asarray(value), part.xp)
    return value


def item(sequence, k):
    """``sequence[k]`` for a ``for`` loop's counter ``k`` (always in range: `desugar`): an
    array's item, or a tuple's chosen item by item (`select`), so that each keeps its
    type; JAX and TensorFlow cannot index a tuple by a per-example number."""
    if not isinstance(sequence, tuple):
        shape = tuple(int(d) for d in np.shape(sequence))
        if shape and shape[0] == 0:  # the loop runs no trip: only the item's type counts
            dtype = sequence.dtype
            return np.zeros(shape[1:], dtype=np.dtype(getattr(dtype, "as_numpy_dtype", dtype)))
        return lift(sequence, k)[k]
    chosen = sequence[-1]
    for i in reversed(range(len(sequence) - 1)):
        chosen = select(k == i, sequence[i], chosen)
    return chosen


#: NumPy (and math) functions whose calls the frontend sends to the per-example forms
NUMPY_FORMS = {np.array: "__pcb_array", np.asarray: "__pcb_asarray", np.full: "__pcb_full",
               **{f: f"__pcb_math_{f.__name__}" for f in MATH_FORMS},
               **{t: f"__pcb_scalar_{t.__name__}" for t in _SCALAR_TYPES}}

#: builtins whose calls the frontend sends to the per-example forms above
BUILTIN_FORMS = {float: "__pcb_float", int: "__pcb_int", bool: "__pcb_bool",
                 min: "__pcb_min", max: "__pcb_max", any: "__pcb_any", all: "__pcb_all"}


def contains(x, items):
    """``x in items``. A tuple, list, set or dict: Python compares ``x`` with each item
    (``item is x or item == x``), so each example gets one bool; an array ``x`` is
    Python's error there (the truth of an array), as `truthy` says. An array: NumPy's
    ``(items == x).any()``. Anything else (a string): Python's own ``in``."""
    from pcbatch.backends import weak

    if isinstance(items, (set, frozenset, dict)):
        items = tuple(items)
    if not isinstance(items, (tuple, list)):
        if not (hasattr(items, "shape") and hasattr(items, "dtype")):
            return x in items
        if not np.shape(items):
            raise TypeError(f"argument of type {_kind_of(items)!r} is not iterable")
        return weak.mark(np.any(np.equal(items, x)))
    found = False
    for item in items:
        found = np.logical_or(found, truthy(np.equal(x, item)))
    return weak.mark(found)  # Python's bool


def _kind_of(value) -> str:
    """The type name Python's message would give a per-example number."""
    dtype = getattr(value, "dtype", None)
    dtype = np.dtype(getattr(dtype, "as_numpy_dtype", dtype)) if dtype is not None else None
    return f"numpy.{dtype.name}" if dtype is not None else type(value).__name__


def does_not_contain(x, items):
    from pcbatch.backends import weak

    return weak.mark(np.logical_not(contains(x, items)))


def equals_none(x, answer: bool = False):
    """``x == None``: no batched value is None, so False for a number (Python's bool, as
    NumPy's scalars give) and, for an array, NumPy's elementwise answer: all False. The
    libraries' own ``==`` refuses None (JAX, TensorFlow). ``answer=True``: ``x != None``."""
    shape = tuple(int(d) for d in np.shape(x))
    return answer if not shape else np.full(shape, answer)


def differs_from_none(x):
    """``x != None``."""
    return equals_none(x, answer=True)


NAMESPACE = {
    "__pcb_eq_none": equals_none,
    "__pcb_ne_none": differs_from_none,
    "__pcb_full": full,
    "__pcb_lift": lift,
    "__pcb_item": item,
    # `desugar` calls these by their hidden names: a user's global ``min`` (``from numpy
    # import *`` binds NumPy's) must not replace Python's in code the user never wrote
    "__pcb_len": len,
    "__pcb_index": python_int,
    "__pcb_range_len": range_length,
    "__pcb_slice_mask": slice_mask,
    "__pcb_in": contains,
    "__pcb_not_in": does_not_contain,
    "__pcb_float": to_float,
    "__pcb_int": to_int,
    "__pcb_bool": to_bool,
    "__pcb_min": py_min,
    "__pcb_max": py_max,
    "__pcb_any": py_any,
    "__pcb_all": py_all,
    "__pcb_array": to_array,
    "__pcb_asarray": to_asarray,
    "__pcb_unshared": unshared,
    **{f"__pcb_math_{f.__name__}": form for f, form in MATH_FORMS.items()},
    **{f"__pcb_scalar_{t.__name__}": _numpy_scalar_type(t) for t in _SCALAR_TYPES},
    "__pcb_truthy": truthy,
    "__pcb_shape_truth": truthy,  # an if test on shapes only (`to_ir.Translator.condition`)
    "__pcb_select": select,
    "__pcb_not": logical_not,
    "__pcb_and": logical_and,
    "__pcb_or": logical_or,
    "__pcb_checked_power": checked_power,
}
