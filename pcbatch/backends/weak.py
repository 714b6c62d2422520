"""Weak (Python-scalar) values inside a batched primitive, by NumPy 2's rules (NEP 50).

Per example, a value typed weak (`pcbatch.ir.types.WeakTensorType`: a literal, a
``range`` counter, Python arithmetic on those) is a Python ``int``/``float``/``bool``/
``complex``; batched, it is an array of its kind's default dtype (int64, float64, ...),
which NumPy would treat as strong (``uint8_x + int64_i`` is int64). So a primitive
that reads a weak variable gets it *marked* (`mark`: a `WeakBatchedArray` on NumPy, a
`WeakDispatched` on JAX and TensorFlow), and every ufunc on marked operands applies
NEP 50 first (`convert_operands`): where a weak operand meets strong ones it is
converted to the dtype NumPy would convert the Python scalar to (``uint8_x + i``
computes in uint8 and wraps as NumPy does; ``float32_x * i`` in float32). Between weak
operands only, nothing is converted and the result is weak again, as Python's own
arithmetic on ints and floats is.

Example: ``acc + x`` with ``acc`` weak int and ``x`` float32 computes
``acc.astype(float32) + x``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch.ir.types import is_pattern_node, is_python_scalar, map_pattern, python_scalar_of

#: Comparisons: an int operand is never converted for them, so ``uint8_x < 300`` is
#: exact (NumPy 2 compares out-of-range Python ints exactly too).
_COMPARISONS = frozenset(
    {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"}
)


def is_marked(x: Any) -> bool:
    return getattr(x, "weak", False) is True


def mark(x: Any) -> Any:
    """``x`` (one example's value, or a batched one) marked weak."""
    from pcbatch.backends.per_example import PerExampleValue

    if is_python_scalar(x) or is_marked(x):
        return x
    if isinstance(x, (np.ndarray, np.generic)) and np.ndim(x) == 0:
        return x.item()  # one example: a Python scalar, exactly as the user's code sees it
    if isinstance(x, PerExampleValue):  # a view of any backend
        return x.as_weak()
    return x


#: wrappers by the function they wrap, then by flags: type inference and the program
#: it returns share one, so a backend that traces per function traces once
_WRAPPERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def with_weak_inputs(
    function: Callable, weak_flags: list, overflow_at: str | None = None,
    checks: tuple = (),
):
    """A per-example ``function`` whose inputs flagged in ``weak_flags`` (one pattern of
    bools per argument) arrive marked weak. With ``overflow_at`` (where the user wrote
    it), a compiled machine also checks that every weak int it converts fits the array's
    dtype (`overflow_probe`): NumPy 2 raises OverflowError where one does not.
    ``checks``: the `Fault` kinds type inference saw the function note, as pairs (kind,
    where the user wrote it), checked the same way."""
    try:
        by_flags = _WRAPPERS.setdefault(function, {})
    except TypeError:  # not weakly referable: no sharing
        by_flags = {}
    key = (repr(weak_flags), overflow_at, checks)
    if key not in by_flags:
        by_flags[key] = _marking(function, weak_flags, overflow_at, checks)
    return by_flags[key]


def _marking(
    function: Callable, weak_flags: list, overflow_at: str | None, checks: tuple
) -> Callable:
    def marked(*args):
        return function(*(_mark_pattern(a, f) for a, f in zip(args, weak_flags)))

    marked.__name__ = getattr(function, "__name__", "primitive")
    marked.weak_flags = weak_flags
    marked.__wrapped__ = function
    if overflow_at is not None or any(kind != OVERFLOW for kind, _ in checks):
        marked.faulting_per_example = overflow_probe(marked)
        marked.error = lambda: _check_error(overflow_at, checks)
    return marked


# -- run-time checks on compiled machines -----------------------------------------------
# The NumPy machine runs a block for its active examples only and raises at once
# (`per_example.check_int_range`, NumPy's own errors). A compiled loop cannot raise: it
# runs the primitive once more as a probe, which records, per example, whether it did
# what NumPy raises for (`note_fault`): a weak int converted out of the target dtype's
# range, an integer to a negative integer power (inside a plain helper: the batched
# function's own ``**`` has `runtime.IntPowerGuard`). The machine stops those examples
# and raises after the run (`pcbatch.vm.staged.faulted_at`). XLA shares the probe's
# arithmetic with the primitive's own.

#: the kinds of `note_fault`
OVERFLOW, NEGATIVE_POWER, ZERO_DIVISION = "overflow", "negative power", "zero division"
#: Python's float power (`per_example.weak_ufunc`): 0.0 to a negative power, a result
#: past float's range, a negative number to a fractional power (a complex number)
ZERO_POWER, POWER_OVERFLOW, COMPLEX_POWER = "zero power", "power overflow", "complex power"
#: the ``math`` module's errors (`pcbatch.frontend.math_forms`): a result that is no real
#: number, one past float's range, ``log(x, 1)``; ``floor``/``ceil``/``trunc`` of nan, of an
#: infinity, of a float past int64's range
MATH_DOMAIN, MATH_RANGE, MATH_ZERO_DIVISION = "math domain", "math range", "math log base 1"
RANGE_ZERO_STEP, SLICE_ZERO_STEP = "range step zero", "slice step zero"
FLOAT_NAN_TO_INT, FLOAT_INFINITY_TO_INT, FLOAT_PAST_INT64 = (
    "nan to int", "infinity to int", "float past int64"
)

_PROBE = threading.local()


class Faults(list):
    """What a probe collected: ``(flag, xp)`` pairs (per element, True where it fails),
    and ``kinds``: each kind noted, with where the user wrote it (or None)."""

    def __init__(self):
        super().__init__()
        self.kinds: dict = {}


@contextlib.contextmanager
def _probe_holding(name: str, value):
    """Inside: the probe's thread-local ``name`` is ``value`` (restored after)."""
    previous = getattr(_PROBE, name, _UNSET)
    setattr(_PROBE, name, value)
    try:
        yield value
    finally:
        if previous is _UNSET:
            delattr(_PROBE, name)
        else:
            setattr(_PROBE, name, previous)


_UNSET = object()


def collecting_overflow():
    """Inside: `note_conversion` and `note_fault` append to the `Faults` this yields."""
    return _probe_holding("flags", Faults())


def checked_elsewhere(kind: str):
    """Inside: `note_fault` notes nothing of ``kind`` (an op the frontend checks with a
    primitive of its own, `runtime.IntPowerGuard`, or that cannot fail: a probe would
    only repeat it)."""
    return _probe_holding("unchecked", getattr(_PROBE, "unchecked", frozenset()) | {kind})


def on_dummies():
    """Inside: type inference runs a primitive on dummy values (`infer_types`), which are
    no example's: an eager check whose failure every value would meet (``float(x) / 0.0``)
    lets the primitive compute, so that its result type is learned and the check runs on
    the examples."""
    return _probe_holding("dummies", True)


def running_on_dummies() -> bool:
    return bool(getattr(_PROBE, "dummies", False))


def checked_here(kind: str, eager: bool) -> bool:
    """Whether a check of ``kind`` is wanted here: not left to a check elsewhere
    (`checked_elsewhere`), and on a compiled machine only where a probe collects (a flag
    `note_fault` would drop need not be computed)."""
    if kind in getattr(_PROBE, "unchecked", frozenset()):
        return False
    return eager or getattr(_PROBE, "flags", None) is not None


def note_fault(flag: Any, xp, kind: str) -> None:
    """Inside a probe: records ``flag`` (True where NumPy would raise), of ``kind``."""
    flags = getattr(_PROBE, "flags", None)
    if flags is None or kind in getattr(_PROBE, "unchecked", frozenset()):
        return
    flags.append((flag, xp))
    if kind not in flags.kinds:
        flags.kinds[kind] = None if kind == OVERFLOW else user_line(3)


def note_conversion(value: Any, dtype: Any, xp) -> None:
    """Inside a probe: records whether the weak int ``value`` is outside ``dtype``'s range."""
    if getattr(_PROBE, "flags", None) is None:
        return
    target = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    source = np.dtype(getattr(value.dtype, "as_numpy_dtype", value.dtype))
    if target.kind not in "iu" or source.kind not in "iu":
        return
    wanted, held = np.iinfo(target), np.iinfo(source)
    # Only bounds the value's own dtype can pass (a comparison with an int it cannot
    # hold fails to convert on JAX and TensorFlow).
    if wanted.min > held.min:
        note_fault(xp.less(value, xp.asarray(wanted.min, dtype=source)), xp, OVERFLOW)
    if wanted.max < held.max:
        note_fault(xp.greater(value, xp.asarray(wanted.max, dtype=source)), xp, OVERFLOW)


def overflow_probe(marked: Callable) -> Callable:
    """A per-example function: True where ``marked`` does what NumPy raises for."""

    def probe(*args):
        with collecting_overflow() as flags:
            marked(*args)
        if not flags:
            return np.asarray(False)
        any_flag, xp = None, flags[0][1]
        for flag, _ in flags:  # each over the example's elements
            flag = xp.any(flag)
            any_flag = flag if any_flag is None else xp.logical_or(any_flag, flag)
        return any_flag

    probe.__name__ = f"{marked.__name__}_overflow_probe"
    return probe


def user_line(depth: int = 2) -> str | None:
    """``file:line in function`` of the innermost caller outside pcbatch, the array
    libraries and the standard library's wrappers: the user's line that is running (a
    plain helper's)."""
    import os
    import sys

    libraries = tuple(
        os.path.dirname(module.__file__) + os.sep
        for module in map(sys.modules.get, _LIBRARIES)
        if getattr(module, "__file__", None)
    )
    frame = sys._getframe(depth)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(libraries) and not name.endswith(_WRAPPING_MODULES):
            function = frame.f_code.co_name
            # a line of the batched function itself runs as a compiled lambda
            suffix = "" if function == "<lambda>" else f" in {function}"
            return f"{name}:{frame.f_lineno}{suffix}"
        frame = frame.f_back
    return None


_LIBRARIES = ("pcbatch", "numpy", "jax", "jaxlib", "tensorflow", "keras")
_WRAPPING_MODULES = ("contextlib.py", "functools.py")


def _overflow_error(where: str) -> OverflowError:
    from pcbatch.errors import lane_check_failed

    return lane_check_failed(OverflowError(
        f"Python integer out of bounds for the dtype of the array it meets (at {where}); "
        "NumPy 2 raises here too: keep the number in the array's range, or convert the "
        "array first (x.astype(np.int64))"
    ))


def _checked(kind: type, message: str) -> Callable:
    """A factory of the run-time check's error: ``kind(message)``, with ``{at}`` in
    ``message`` made `` (at file:line)`` where the failing line is known."""

    def error(where: str | None) -> Exception:
        from pcbatch.errors import lane_check_failed

        return lane_check_failed(kind(message.format(at=f" (at {where})" if where else "")))

    return error


#: Python numbers: a literal, a range() counter, float(x) or int(x), arithmetic on those
_PYTHON_NUMBERS = (
    "Python numbers (a literal, a range() counter, float(x) or int(x), arithmetic on "
    "those), as this example's are"
)
_negative_power_error = _checked(ValueError, (
    "Integers to negative integer powers are not allowed{at}, as NumPy says for each "
    "example: make the base a float (2.0 ** n, n.astype(float))"
))
zero_division_error = _checked(ZeroDivisionError, (
    "division by zero{at}: Python raises ZeroDivisionError when both operands are "
    f"{_PYTHON_NUMBERS}; NumPy would give inf or 0. Test the divisor first "
    "(a / k if k != 0 else ...)"
))
_zero_power_error = _checked(ZeroDivisionError, (
    "0.0 cannot be raised to a negative power{at}: Python raises ZeroDivisionError when "
    f"both operands are {_PYTHON_NUMBERS}; NumPy would give inf. Test the base first "
    "(b ** e if b != 0 else ...)"
))
_power_overflow_error = _checked(OverflowError, (
    "(34, 'Numerical result out of range'){at}: Python raises OverflowError for a power of "
    "Python floats past float's range, as this example's is; NumPy would give inf. Bound "
    "the exponent first, or compute on an array (np.float64(b) ** e gives inf)"
))
_complex_power_error = _checked(ValueError, (
    "a negative Python float to a fractional power{at} is a complex number in Python, "
    "which a batched value cannot hold (NumPy would give nan): test the base first, or "
    "compute on an array (np.float64(b) ** e gives nan)"
))
_math_domain_error = _checked(ValueError, (
    "math domain error{at}: the math function's result is no real number for this "
    "example's argument, as Python raises (NumPy would give nan). Test the argument "
    "first (math.sqrt(x) if x >= 0 else ...), or use NumPy's function (np.sqrt(x))"
))
_math_range_error = _checked(OverflowError, (
    "math range error{at}: the math function's result is past float's range for this "
    "example's argument, as Python raises (NumPy would give inf). Bound the argument "
    "first, or use NumPy's function (np.exp(x))"
))
_math_zero_division_error = _checked(ZeroDivisionError, (
    "float division by zero{at}: math.log(x, base) divides by log(base), 0 for a base of "
    "1, as Python raises. Test the base first"
))

_range_zero_step_error = _checked(ValueError, (
    "range() arg 3 must not be zero{at}, as Python raises for this example"
))
_slice_zero_step_error = _checked(ValueError, (
    "slice step cannot be zero{at}, as Python raises for this example"
))


def _int_of_float_error(error: type, what: str):
    return _checked(error, (
        f"cannot convert float {what} to integer{{at}}, as Python raises for this example "
        "(math.floor, math.ceil, math.trunc): test np.isfinite(x) first"
    ))


_index_error = _checked(IndexError, (
    "index out of bounds{at}, as NumPy raises for each example: check the index first "
    "(v[k] if 0 <= k < len(v) else ...)"
))
singular_matrix_error = _checked(np.linalg.LinAlgError, (
    "Singular matrix, or for cholesky one not positive definite{at}: NumPy raises "
    "LinAlgError for such an example. Check the matrix first (its condition, "
    "np.linalg.eigvalsh), or regularize it (m + eps * np.eye(n))"
))


#: `pcbatch.backends.bounds.INDEX`, spelled here to keep this module's imports light
INDEX = "index out of bounds"
SINGULAR = "singular matrix"
PYTHON_INT = "Python int past int64"
_ERRORS = {
    NEGATIVE_POWER: _negative_power_error, ZERO_DIVISION: zero_division_error,
    ZERO_POWER: _zero_power_error, POWER_OVERFLOW: _power_overflow_error,
    COMPLEX_POWER: _complex_power_error,
    MATH_DOMAIN: _math_domain_error, MATH_RANGE: _math_range_error,
    MATH_ZERO_DIVISION: _math_zero_division_error, RANGE_ZERO_STEP: _range_zero_step_error,
    SLICE_ZERO_STEP: _slice_zero_step_error,
    FLOAT_NAN_TO_INT: _int_of_float_error(ValueError, "NaN"),
    FLOAT_INFINITY_TO_INT: _int_of_float_error(OverflowError, "infinity"),
    FLOAT_PAST_INT64: _int_of_float_error(
        OverflowError, "past int64's range [-2**63, 2**63) (Python's exact int does not fit "
        "the batch's int64)"
    ),
    INDEX: _index_error, SINGULAR: singular_matrix_error,
    PYTHON_INT: lambda where: _python_ints().overflow_error(where),
}


def error_of(kind: str, where: str | None) -> Exception:
    """The error a run-time check of ``kind`` raises (eager machines: at once)."""
    return _ERRORS[kind](where)


def _python_ints():
    from pcbatch.backends import python_ints

    return python_ints


def _check_error(overflow_at: str | None, checks: tuple) -> Exception:
    """The error of a probed primitive; one that may fail in several ways (the probe does
    not say which failed) names them all, with the first's type."""
    errors = [_overflow_error(overflow_at)] if overflow_at is not None else []
    # an int past int64 comes last: where its arithmetic meets another check (``a // k``
    # of Python ints), the other's exception is the likelier one
    checks = sorted(checks, key=lambda check: check[0] == PYTHON_INT)
    errors += [_ERRORS[kind](where) for kind, where in checks if kind in _ERRORS]
    if len(errors) == 1:
        return errors[0]
    return one_of(errors, "one of these (some example failed the check)")


def one_of(errors: list, heading: str) -> Exception:
    """One error naming each of ``errors`` (checks a run cannot tell apart), of a type
    that is each of theirs: ``except ZeroDivisionError`` catches it as it would catch
    Python's own error."""
    from pcbatch.errors import lane_check_failed

    text = "; or ".join(str(e) for e in errors)
    kind = _either(tuple(dict.fromkeys(type(e) for e in errors)))
    return lane_check_failed(kind(f"{heading}: {text}"))


@functools.cache
def _either(types: tuple) -> type:
    """An exception type that is each of ``types`` (the most specific of them)."""
    specific = tuple(t for t in types if not any(u is not t and issubclass(u, t) for u in types))
    if len(specific) == 1:
        return specific[0]
    return type("Or".join(t.__name__ for t in specific), specific, {"__module__": __name__})


def _mark_pattern(value: Any, flags: Any) -> Any:
    if is_pattern_node(flags):
        if not is_pattern_node(value) or len(value) != len(flags):
            return value
        return map_pattern(lambda v, f: mark(v) if f else v, value, flags)
    return mark(value) if flags else value


def _strong_dtype(x: Any):
    """The dtype of a strong operand; None for a weak one or a non-array."""
    if is_marked(x) or is_python_scalar(x):
        return None
    dtype = getattr(x, "dtype", None)
    return None if dtype is None else np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


def convert_operands(name: str, inputs: tuple, convert: Callable) -> tuple:
    """NEP 50 on marked operands: (operands, whether the result is weak).

    ``convert(x, dtype)`` converts a marked operand to a strong array of ``dtype``.
    """
    if not any(is_marked(x) for x in inputs):
        return inputs, False
    strong = [d for d in (_strong_dtype(x) for x in inputs) if d is not None]
    if not strong:
        return inputs, True
    out = []
    for x in inputs:
        if is_marked(x):
            target = np.result_type(*strong, python_scalar_of(x.dtype))
            comparing_ints = name in _COMPARISONS and target.kind in "iub"
            x = x if comparing_ints else convert(x, target)
        out.append(x)
    return tuple(out), False
