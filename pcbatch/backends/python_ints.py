"""Python's ints and bools between themselves (weak values, `pcbatch.backends.weak`).

Python's bools are ints in arithmetic: per example, ``flag + other`` of two Python
bools (literals, ``not x``, ``i < 2`` of a ``range`` counter) is the int 2 and ``~flag``
is -2, where NumPy's bools give True and False; every backend gave NumPy's, silently.
`python_bools` makes such operands ints first; ``&``, ``|``, ``^`` of bools alone stay
bools, as in Python.

Python's ints do not overflow; pcbatch holds them in int64.

Per example, ``f = 1`` then ``f = f * i`` is a Python int: ``factorial(25)`` is exact in
Python, and wrapped in int64 it would be a wrong number (every backend gave
7034535277573963776; ``2 ** 70`` by doubling gave 0). Arithmetic between weak ints
(`weak_ufunc`) checks its exact result fits: where it does not, that example fails with
OverflowError at the line, raised at once on NumPy and Torch, after the run on the
compiled machines (`weak.note_fault`). An int64 array (``np.int64(1)``, a NumPy
argument) wraps as NumPy's does, unchecked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the ufuncs whose result between Python ints may pass int64's range
CHECKED = frozenset({"add", "subtract", "multiply", "negative", "absolute", "left_shift",
                     "power"})


def outside(name: str, inputs: tuple, result: Any):
    """True per element where ``result`` of ufunc ``name`` of ``inputs`` wrapped around
    (two's complement arithmetic, checked without wider integers)."""
    dtype = _dtype(result)
    smallest = dtype.type(np.iinfo(dtype).min)
    # a literal operand (``f * 2``) as the result's dtype: its comparisons give NumPy bools
    inputs = tuple(dtype.type(x) if type(x) is int else x for x in inputs)
    if name in ("negative", "absolute"):
        return inputs[0] == smallest
    a, b = inputs
    if name == "add":
        return ((a ^ result) & (b ^ result)) < 0
    if name == "subtract":
        return ((a ^ b) & (a ^ result)) < 0
    if name == "left_shift":
        # the bits shifted out are all copies of the sign: shifting back restores ``a``
        shift = np.where(b > 63, 63, b)
        return (a != 0) & ((b > 63) | ((result >> shift) != a))
    if name == "power":
        # a power that fits is its float estimate to a relative 1e-5 (float32's rounding
        # over 64 squarings included); one that wrapped is off by a multiple of 2**64,
        # at least half the true value
        estimate = np.power(a.astype(np.float64), b.astype(np.float64))
        return np.abs(estimate - result.astype(np.float64)) > 1e-5 * np.abs(estimate)
    # multiply: dividing the wrapped product by one factor does not give the other
    unit = (a == 0) | (a == -1)
    quotient = result // np.where(unit, 1, a)
    return ~unit & (quotient != b) | (a == -1) & (b == smallest)


#: what Python's bools alone compute as bools (an int beside them makes them ints)
_BOOLEAN = frozenset({
    "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor",
    "logical_not", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
})


def python_bools(name: str, inputs: tuple) -> tuple:
    """``inputs`` (weak operands only) with their bools as Python computes them: ints,
    unless ufunc ``name`` is a bool operation of bools alone."""
    bools = [_is_bool(x) for x in inputs]
    if not any(bools) or (name in _BOOLEAN and all(bools)):
        return inputs
    return tuple(_as_int(x) if b else x for x, b in zip(inputs, bools))


def _is_bool(x: Any) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return True
    return hasattr(x, "dtype") and not isinstance(x, (int, float)) and _dtype(x).kind == "b"


def _as_int(x: Any) -> Any:
    return int(x) if isinstance(x, (bool, np.bool_)) else x.astype(np.int64)


#: a literal no larger than this, added or subtracted, is not checked: ``steps += 1`` would
#: take 2**31 steps or more to pass int64's range from any int an unchecked op can make,
#: and the check would cost every loop counter a probe
SMALL_LITERAL = 2**32


def is_checked(name: str, inputs: tuple, result: Any) -> bool:
    if name not in CHECKED or np.dtype(_dtype(result)).kind != "i":
        return False
    small = [type(x) is int and abs(x) <= SMALL_LITERAL for x in inputs]
    return not (name in ("add", "subtract") and any(small))


def overflow_error(where: str | None) -> OverflowError:
    from pcbatch.errors import lane_check_failed

    at = f" (at {where})" if where else ""
    return lane_check_failed(OverflowError(
        f"a Python int past int64's range{at}: Python's ints grow without bound, the "
        "batch holds them in int64 (int32 on JAX without x64), so this example's exact "
        "result cannot be held. "
        "Compute in floats (f = 1.0), or say that int64 wraps (f = np.int64(1))"
    ))


def _dtype(x: Any) -> np.dtype:
    dtype = x.dtype
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
