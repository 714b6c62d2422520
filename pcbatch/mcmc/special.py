"""The standard normal quantile function in NumPy, to double precision.

The rank-normalized diagnostics (`diagnostics.ess`, `diagnostics.rhat`) map ranks to
normal scores. NumPy has no inverse normal CDF and pcbatch does not depend on SciPy, so
it is computed here: Acklam's rational approximation (relative error below 1.2e-9),
refined by one Halley step on the normal CDF. The CDF comes from the complementary
error function, summed as the all-positive series of ``erf`` for small arguments and
as Laplace's continued fraction for large ones (relative error below 2e-13 throughout).
"""

from __future__ import annotations

import numpy as np

# Acklam's coefficients: the central region's numerator and denominator, then the tails'.
_CENTRAL_NUM = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
                1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)  # fmt: skip
_CENTRAL_DEN = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
                6.680131188771972e01, -1.328068155288572e01, 1.0)  # fmt: skip
_TAIL_NUM = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
             -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)  # fmt: skip
_TAIL_DEN = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
             3.754408661907416e00, 1.0)  # fmt: skip
_CENTRAL = 0.02425  # the central region is [_CENTRAL, 1 - _CENTRAL]

# erfc: the series below this argument, the continued fraction above it
_SERIES_BELOW = 2.0
_SERIES_TERMS = 40
_FRACTION_DEPTH = 50


def _polynomial(coefficients, x):
    """Horner's rule, highest power first."""
    result = np.zeros_like(x)
    for c in coefficients:
        result = result * x + c
    return result


def erfc(y):
    """The complementary error function of ``y >= 0`` (an array of float64)."""
    y = np.asarray(y, np.float64)
    result = np.empty_like(y)
    below = y < _SERIES_BELOW
    # erf(y) = 2/sqrt(pi) exp(-y^2) sum_n y (2 y^2)^n / (1 3 5 ... (2n + 1)): no cancellation
    small = y[below]
    term, total = small.copy(), small.copy()
    for n in range(1, _SERIES_TERMS):
        term = term * (2.0 * small * small) / (2 * n + 1)
        total = total + term
    result[below] = 1.0 - 2.0 / np.sqrt(np.pi) * np.exp(-small * small) * total
    # erfc(y) = exp(-y^2)/sqrt(pi) / (y + (1/2)/(y + 1/(y + (3/2)/(y + ...)))), from the bottom
    large = y[~below]
    fraction = large.copy()
    for k in range(_FRACTION_DEPTH, 0, -1):
        fraction = large + (k / 2.0) / fraction
    result[~below] = np.exp(-large * large) / np.sqrt(np.pi) / fraction
    return result


def normal_quantile(p):
    """The standard normal quantile of each ``p`` in (0, 1) (float64)."""
    p = np.asarray(p, np.float64)
    lower = np.minimum(p, 1.0 - p)  # exact for p >= 1/2
    # Acklam's approximation of the lower half's quantile (<= 0).
    t = np.sqrt(-2.0 * np.log(lower))
    tail = _polynomial(_TAIL_NUM, t) / _polynomial(_TAIL_DEN, t)
    r = (lower - 0.5) ** 2
    central = (lower - 0.5) * _polynomial(_CENTRAL_NUM, r) / _polynomial(_CENTRAL_DEN, r)
    z = np.where(lower < _CENTRAL, tail, central)
    # One Halley step on Phi(z) = lower, with Phi(z) = erfc(-z / sqrt 2) / 2 for z <= 0.
    error = 0.5 * erfc(-z / np.sqrt(2.0)) - lower
    u = error * np.sqrt(2.0 * np.pi) * np.exp(0.5 * z * z)
    z = z - u / (1.0 + 0.5 * z * u)
    return np.where(p > 0.5, -z, z)
