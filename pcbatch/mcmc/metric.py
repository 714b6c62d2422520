"""The mass matrix (the metric) of ONE chain: diagonal or dense.

A diagonal inverse mass has the state's shape: each coordinate's variance scale. A
dense one is ``[2, size, size]`` over the flat state: ``C``, the inverse mass matrix
(the covariance the warmup estimates), and ``L^-1``, the inverse of its Cholesky
factor (``C = L L^T``), kept so that a momentum draw is one matrix product. Momentum
``p ~ N(0, M)`` with ``M = C^-1``: ``p = L^-T z`` for ``z ~ N(0, I)``; the velocity
is ``dq/dt = C p``; the kinetic energy ``p . C p / 2``. Which kind a value is follows
from its rank against the momentum's (a dense metric is two ranks above a flat state),
so the sampler's code is the same for both.

Cholesky factor and triangular inverse are written here with matrix products and
static loops (``size`` steps, only where the warmup updates the metric): no
``np.linalg``, which TensorFlow's NumPy lacks.
"""

from __future__ import annotations

import numpy as np


def is_dense(inv_mass, p) -> bool:
    return inv_mass.ndim == p.ndim + 2


def velocity(p, inv_mass):
    """``dq/dt = C p``."""
    if not is_dense(inv_mass, p):
        return inv_mass * p
    return np.matmul(inv_mass[0], p)


def kinetic_energy(p, inv_mass):
    return 0.5 * np.sum(p * velocity(p, inv_mass))


def momentum(z, inv_mass):
    """``p ~ N(0, C^-1)`` from standard normals ``z`` (the state's shape)."""
    if not is_dense(inv_mass, z):
        return z / np.sqrt(inv_mass)
    return np.matmul(z, inv_mass[1])  # (L^-1)^T z


def dense(covariance):
    """The dense metric ``[C, L^-1]`` of a symmetric positive definite ``C``."""
    return np.stack([covariance, lower_inverse(cholesky(covariance))])


def cholesky(a):
    """The lower Cholesky factor of one symmetric positive definite ``[size, size]``."""
    size = a.shape[-1]
    eye = np.eye(size, dtype=a.dtype)
    lower = a * 0.0
    for j in range(size):
        # Column j: a's column less what columns < j (all that is filled yet) explain.
        column = a[:, j] - np.matmul(lower, lower[j])
        below = np.asarray(np.arange(size) >= j, a.dtype)
        lower = lower + (column * below / np.sqrt(column[j]))[:, None] * eye[j][None, :]
    return lower


def lower_inverse(lower):
    """The inverse of one lower triangular ``[size, size]`` (forward substitution)."""
    size = lower.shape[-1]
    eye = np.eye(size, dtype=lower.dtype)
    inverse = lower * 0.0
    for i in range(size):
        # Rows >= i of the inverse are still 0: the product holds rows < i only.
        row = (eye[i] - np.matmul(lower[i], inverse)) / lower[i, i]
        inverse = inverse + eye[i][:, None] * row[None, :]
    return inverse
