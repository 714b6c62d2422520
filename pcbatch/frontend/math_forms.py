"""The ``math`` module's functions of one example's number, computed for every example.

Python's ``math.sqrt(x)`` converts ``x`` to a Python float (float64), returns a Python
float, and raises where NumPy's function gives nan or inf: ``ValueError('math domain
error')`` where the result is no real number (``sqrt(-1)``, ``log(0)``, ``sin(inf)``),
``OverflowError('math range error')`` where a finite argument's result is past float's
range (``exp(1000)``). ``math.floor``/``ceil``/``trunc`` return Python ints.

The frontend sends a call of a function below whose arguments read per-example values to
its form (`runtime.NUMPY_FORMS`). A form computes in float64 for every example, marks the
result a Python number (weak: ``math.sqrt(x) * y`` of a float32 ``y`` stays float32), and
fails the examples Python would fail (`per_example.fail_where`: at once on NumPy and
Torch, after the run on JAX and TensorFlow, whose other examples finish). A function not
here (``math.gamma``, ``math.fsum``) is refused at the user's line (`fence`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["MATH_FORMS", "MATH_PER_EXAMPLE"]


def _is_plain(x) -> bool:
    return isinstance(x, (str, bytes, bool, int, float, complex, np.generic))


def _as_python_float(x):
    """``x`` as the Python float ``math`` converts it to: float64, values unchanged."""
    if _is_plain(x):
        return np.float64(x)
    return x.astype(np.float64)


def _fail_where(flag, kind: str) -> None:
    from pcbatch.backends.per_example import fail_where

    fail_where(flag, kind)


def _form(math_function: Callable, compute: Callable, *, convert: bool = True) -> Callable:
    """The per-example form of ``math_function``: Python's own function where every
    argument is one number (a literal, a constant), else ``compute`` on the arguments
    (converted to float64 where ``convert``), marked weak."""
    name = math_function.__name__

    def form(*args, **kwargs):
        if all(_is_plain(a) for a in (*args, *kwargs.values())):
            return math_function(*args, **kwargs)
        for a in args:
            if np.ndim(a):
                raise TypeError(
                    f"math.{name}() of a per-example array (shape {np.shape(a)}): it takes "
                    f"one number (as in Python); use NumPy's function for arrays"
                )
        from pcbatch.backends import weak

        if convert:
            args = tuple(_as_python_float(a) for a in args)
        with np.errstate(all="ignore"):  # the examples NumPy warns for fail as Python's
            return weak.mark(compute(*args, **kwargs))

    form.__name__ = name
    form.weak_results = True  # type: ignore[attr-defined]
    return form


# -- functions that never raise on a number -------------------------------------------


def _isclose(a, b, *, rel_tol=1e-09, abs_tol=0.0):
    """Python's rule: equal values (infinities too) are close; otherwise both finite and
    ``|a - b| <= max(rel_tol * max(|a|, |b|), abs_tol)``."""
    difference = np.abs(a - b)
    bound = np.maximum(rel_tol * np.maximum(np.abs(a), np.abs(b)), abs_tol)
    return (a == b) | (np.isfinite(a) & np.isfinite(b) & (difference <= bound))


#: CPython multiplies by these constants (``math.degrees``, ``math.radians``)
_DEGREES_PER_RADIAN, _RADIANS_PER_DEGREE = 180.0 / math.pi, math.pi / 180.0

_TOTAL: dict[Callable, Callable] = {
    math.isnan: np.isnan,
    math.isinf: np.isinf,
    math.isfinite: np.isfinite,
    math.isclose: _isclose,
    math.fabs: np.abs,
    math.atan: np.arctan,
    math.tanh: np.tanh,
    math.asinh: np.arcsinh,
    math.atan2: np.arctan2,
    math.copysign: np.copysign,
    math.degrees: lambda x: x * _DEGREES_PER_RADIAN,
    math.radians: lambda x: x * _RADIANS_PER_DEGREE,
}


def _hypot(*coordinates):
    if len(coordinates) != 2:
        raise TypeError(
            f"math.hypot() of {len(coordinates)} per-example numbers: pcbatch computes "
            "the two-argument form only; use np.sqrt(a * a + b * b + ...) or "
            "np.linalg.norm(np.array([a, b, ...]))"
        )
    return np.hypot(*coordinates)


# -- functions that raise where the result is no real number (ValueError) ------------

#: where each function's argument is outside its domain (nan is inside: nan in, nan out)
_DOMAINS: dict[Callable, tuple[Callable, Callable]] = {
    math.sqrt: (np.sqrt, lambda x: x < 0),
    math.log2: (np.log2, lambda x: x <= 0),
    math.log10: (np.log10, lambda x: x <= 0),
    math.log1p: (np.log1p, lambda x: x <= -1),
    math.sin: (np.sin, np.isinf),
    math.cos: (np.cos, np.isinf),
    math.tan: (np.tan, np.isinf),
    math.asin: (np.arcsin, lambda x: np.abs(x) > 1),
    math.acos: (np.arccos, lambda x: np.abs(x) > 1),
    math.acosh: (np.arccosh, lambda x: x < 1),
    math.atanh: (np.arctanh, lambda x: np.abs(x) >= 1),
}


def _checked_domain(function: Callable, outside: Callable) -> Callable:
    def compute(x):
        from pcbatch.backends import weak

        _fail_where(outside(x), weak.MATH_DOMAIN)
        return function(x)

    return compute


def _log(x, base=None):
    """``math.log(x)`` and ``math.log(x, base)``: Python divides the two logarithms, so a
    base of 1 is a ZeroDivisionError."""
    from pcbatch.backends import weak

    _fail_where(x <= 0, weak.MATH_DOMAIN)
    if base is None:
        return np.log(x)
    _fail_where(base <= 0, weak.MATH_DOMAIN)
    _fail_where(base == 1, weak.MATH_ZERO_DIVISION)
    return np.log(x) / np.log(base)


def _fmod(x, y):
    """C's fmod, as Python's: a zero divisor or an infinite dividend is a domain error
    (unless the other is nan)."""
    from pcbatch.backends import weak

    _fail_where(((y == 0) & (x == x)) | (np.isinf(x) & (y == y)), weak.MATH_DOMAIN)
    return np.fmod(x, y)


# -- functions that raise past float's range (OverflowError) -------------------------


def _checked_range(function: Callable) -> Callable:
    def compute(x):
        from pcbatch.backends import weak

        result = function(x)
        _fail_where(np.isfinite(x) & ~np.isfinite(result), weak.MATH_RANGE)
        return result

    return compute


_RANGES: dict[Callable, Callable] = {
    math.exp: np.exp,
    math.expm1: np.expm1,
    math.sinh: np.sinh,
    math.cosh: np.cosh,
}
if hasattr(math, "exp2"):  # Python 3.11
    _RANGES[math.exp2] = np.exp2


def _zero_to_minus_infinity_raises() -> bool:
    """Python 3.10 and 3.11 raise for ``math.pow(0.0, -inf)``; later ones give inf."""
    try:
        math.pow(0.0, -math.inf)
    except ValueError:
        return True
    return False


_POW_ZERO_TO_MINUS_INFINITY_RAISES = _zero_to_minus_infinity_raises()


def _pow(x, y):
    """``math.pow``: 0.0 to a negative power and a finite negative number to a finite
    fractional one are domain errors, a finite power past float's range a range error;
    the rest is C's pow, as NumPy's (``pow(nan, 0) == 1``, ``pow(-inf, 0.5) == inf``)."""
    from pcbatch.backends import weak

    negative = y < 0 if _POW_ZERO_TO_MINUS_INFINITY_RAISES else (y < 0) & np.isfinite(y)
    fractional = np.isfinite(y) & (np.floor(y) != y)
    _fail_where(((x == 0) & negative) | (np.isfinite(x) & (x < 0) & fractional), weak.MATH_DOMAIN)
    result = np.power(x, y)
    _fail_where(np.isfinite(x) & np.isfinite(y) & ~np.isfinite(result), weak.MATH_RANGE)
    return result


# -- functions that return Python ints -------------------------------------------------


def _rounded_to_int(rounding: Callable) -> Callable:
    """``math.floor``/``ceil``: a Python int is itself; any other number goes through
    float64, as Python converts it, and an int of nan (ValueError), of an infinity
    (OverflowError) or past int64's range (an exact Python int the batch cannot hold,
    OverflowError) fails the example."""

    def compute(x):
        from pcbatch.backends import weak

        if weak.is_marked(x) and np.dtype(x.dtype).kind in "biu":
            return x.astype(np.int64)
        x = _as_python_float(x)
        _fail_where(x != x, weak.FLOAT_NAN_TO_INT)
        _fail_where(np.isinf(x), weak.FLOAT_INFINITY_TO_INT)
        _fail_where(np.isfinite(x) & ((x < -(2.0**63)) | (x >= 2.0**63)), weak.FLOAT_PAST_INT64)
        inside = np.isfinite(x) & (x >= -(2.0**63)) & (x < 2.0**63)
        return rounding(np.where(inside, x, np.zeros_like(x))).astype(np.int64)

    return compute


def _trunc(x):
    """``math.trunc``: Python calls the number's ``__trunc__``, which NumPy's scalars
    other than float64 lack (a TypeError, as there)."""
    dtype = np.dtype(x.dtype)
    from pcbatch.backends import weak

    if not weak.is_marked(x) and dtype != np.float64:
        raise TypeError(f"type numpy.{dtype.name} doesn't define __trunc__ method")
    return _rounded_to_int(np.trunc)(x)


_INTS: dict[Callable, Callable] = {
    math.floor: _rounded_to_int(np.floor),
    math.ceil: _rounded_to_int(np.ceil),
    math.trunc: _trunc,
}


def _forms() -> dict[Callable, Callable]:
    forms = {f: _form(f, compute) for f, compute in _TOTAL.items()}
    forms[math.hypot] = _form(math.hypot, _hypot)
    forms.update({f: _form(f, _checked_domain(*checks)) for f, checks in _DOMAINS.items()})
    forms.update({f: _form(f, _checked_range(g)) for f, g in _RANGES.items()})
    forms[math.log] = _form(math.log, _log)
    forms[math.fmod] = _form(math.fmod, _fmod)
    forms[math.pow] = _form(math.pow, _pow)
    forms.update({f: _form(f, compute, convert=False) for f, compute in _INTS.items()})
    return forms


#: each supported ``math`` function's per-example form
MATH_FORMS: dict[Callable, Any] = _forms()
#: their names (`fence` refuses the other ``math`` functions of per-example values)
MATH_PER_EXAMPLE = frozenset(f.__name__ for f in MATH_FORMS)
