"""Bijections from unconstrained vectors to constrained parameters, for NUTS.

Each `Transform` maps ONE leaf of ONE chain's state: ``forward(y)`` takes the
unconstrained value ``y`` (shape `Transform.unconstrained_shape` of the leaf's
shape) to the constrained one ``x``; ``inverse(x)`` undoes it;
``log_det_jacobian(y)`` is ``log |det dx/dy|`` over the leaf's free coordinates
(for a simplex its first ``K - 1`` entries, for a Cholesky factor its strictly
lower triangle). The sampler moves ``y`` and targets ``log p(forward(y)) +
log_det_jacobian(y)``, whose draws of ``forward(y)`` follow ``p``.

``pullback(y, grad_x)`` is that target's gradient in ``y``, given ``grad_x``, the
gradient of ``log p`` at ``x = forward(y)``: the chain rule (``J^T grad_x``) plus
the log-determinant's gradient. It is how a NumPy user's own ``value_and_grad``
keeps working under a transform; on JAX and TensorFlow automatic differentiation
goes through ``forward`` instead, and ``pullback`` is not used.

The built-in transforms are written once for one example against the array
namespace of their argument (NumPy, also for pcbatch's per-example
``BatchedArray``; ``jax.numpy``; TensorFlow's NumPy), with matrix products
where a cumulative sum would be needed (a cumulative sum has no fast per-example
rule on NumPy).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch.mcmc import gradients

#: a NumPy constant in an array's library and dtype
_constant = gradients.constant_like

__all__ = [
    "Transform",
    "cholesky_corr",
    "custom",
    "interval",
    "ordered",
    "positive",
    "simplex",
    "softplus",
]

_LOG_2 = math.log(2.0)


def _xp(value) -> Any:
    """The NumPy-like namespace of ``value``'s array library."""
    library = gradients.array_library(value)
    if library == "jax":
        import jax.numpy as jnp

        return jnp
    if library == "tensorflow":
        import tensorflow.experimental.numpy as tnp

        return tnp
    return np


def _gather(values, index: np.ndarray) -> Any:
    """``values[index]`` (an integer array) along ``values``' only axis."""
    if gradients.array_library(values) == "tensorflow":
        import tensorflow as tf

        return tf.gather(values, index)
    return values[index]


def _softplus(xp, y):
    return xp.logaddexp(y * 0.0, y)


def _sigmoid(xp, y):
    return xp.exp(-_softplus(xp, -y))


def _cumulative(size: int, strict: bool) -> np.ndarray:
    """``u`` with ``(v @ u)[i] = sum of v[k] for k <= i`` (``k < i`` when ``strict``)."""
    return np.triu(np.ones((size, size)), 1 if strict else 0)


@dataclasses.dataclass(frozen=True)
class Transform:
    """A bijection for one leaf (see the module's docstring for the four methods)."""

    def forward(self, y):
        raise NotImplementedError

    def inverse(self, x):
        raise NotImplementedError

    def log_det_jacobian(self, y):
        raise NotImplementedError

    def pullback(self, y, grad_x):
        raise NotImplementedError

    def unconstrained_shape(self, shape: tuple) -> tuple:
        """The unconstrained leaf's shape, for a constrained leaf of ``shape``."""
        return tuple(shape)


@dataclasses.dataclass(frozen=True)
class _Exp(Transform):
    """``x = exp(y)``: a positive number."""

    def forward(self, y):
        return _xp(y).exp(y)

    def inverse(self, x):
        return _xp(x).log(x)

    def log_det_jacobian(self, y):
        return _xp(y).sum(y)

    def pullback(self, y, grad_x):
        return grad_x * _xp(y).exp(y) + 1.0


@dataclasses.dataclass(frozen=True)
class _Softplus(Transform):
    """``x = log(1 + exp(y))``: a positive number, near ``y`` for large ``y``."""

    def forward(self, y):
        return _softplus(_xp(y), y)

    def inverse(self, x):
        xp = _xp(x)
        return x + xp.log(-xp.expm1(-x))

    def log_det_jacobian(self, y):
        xp = _xp(y)
        return -xp.sum(_softplus(xp, -y))  # log sigmoid(y)

    def pullback(self, y, grad_x):
        slope = _sigmoid(_xp(y), y)
        return grad_x * slope + (1.0 - slope)


@dataclasses.dataclass(frozen=True)
class _Interval(Transform):
    """``x = lower + (upper - lower) * sigmoid(y)``: a number in (lower, upper)."""

    lower: float
    upper: float

    @property
    def width(self) -> float:
        return self.upper - self.lower

    def forward(self, y):
        return self.lower + self.width * _sigmoid(_xp(y), y)

    def inverse(self, x):
        xp = _xp(x)
        t = (x - self.lower) / self.width
        return xp.log(t) - xp.log1p(-t)

    def log_det_jacobian(self, y):
        xp = _xp(y)
        per_entry = math.log(self.width) - _softplus(xp, -y) - _softplus(xp, y)
        return xp.sum(per_entry)

    def pullback(self, y, grad_x):
        t = _sigmoid(_xp(y), y)
        return grad_x * (self.width * t * (1.0 - t)) + (1.0 - 2.0 * t)


@dataclasses.dataclass(frozen=True)
class _Ordered(Transform):
    """An increasing vector: ``x[0] = y[0]``, ``x[k] = x[k - 1] + exp(y[k])``."""

    def _increments(self, y):
        xp = _xp(y)
        return xp.concatenate([y[:1], xp.exp(y[1:])])

    def forward(self, y):
        return xp_matmul(self._increments(y), _constant(_cumulative(y.shape[-1], False), y))

    def inverse(self, x):
        xp = _xp(x)
        return xp.concatenate([x[:1], xp.log(x[1:] - x[:-1])])

    def log_det_jacobian(self, y):
        return _xp(y).sum(y[1:])

    def pullback(self, y, grad_x):
        xp = _xp(y)
        # x[i] sums increments 0..i, so increment k's gradient sums grad_x[k:].
        upper = _constant(_cumulative(y.shape[-1], False).T, y)
        tail_sums = xp_matmul(grad_x, upper)
        return xp.concatenate([tail_sums[:1], tail_sums[1:] * xp.exp(y[1:]) + 1.0])


@dataclasses.dataclass(frozen=True)
class _Simplex(Transform):
    """``K`` positive numbers summing to 1 from ``K - 1`` free ones: ``x = softmax([y,
    0])`` (additive log-ratio; ``y = 0`` is the uniform point). Its ``log |det J|`` over
    ``x[:-1]`` is ``sum(log x)``."""

    def unconstrained_shape(self, shape: tuple) -> tuple:
        if len(shape) != 1 or shape[0] < 2:
            raise ValueError(f"a simplex is a vector of at least 2 entries, got shape {shape}")
        return (shape[0] - 1,)

    def _log_x(self, y):
        xp = _xp(y)
        z = xp.concatenate([y, y[:1] * 0.0])
        top = xp.max(z)
        return z - (top + xp.log(xp.sum(xp.exp(z - top))))

    def forward(self, y):
        return _xp(y).exp(self._log_x(y))

    def inverse(self, x):
        xp = _xp(x)
        return xp.log(x[:-1]) - xp.log(x[-1:])

    def log_det_jacobian(self, y):
        return _xp(y).sum(self._log_x(y))

    def pullback(self, y, grad_x):
        xp = _xp(y)
        x = self.forward(y)
        free = x[:-1]
        mean_grad = xp.sum(x * grad_x)
        return free * (grad_x[:-1] - mean_grad) + (1.0 - x.shape[-1] * free)


@dataclasses.dataclass(frozen=True)
class _CholeskyCorr(Transform):
    """The Cholesky factor ``L`` (``K x K``, lower triangular, positive diagonal, rows of
    unit length) of a correlation matrix, from ``K (K - 1) / 2`` free numbers.

    ``z = tanh(y)`` are canonical partial correlations, placed row by row in the strict
    lower triangle: ``L[i, j] = z[i, j] * sqrt(prod_{k < j} (1 - z[i, k]**2))`` and
    ``L[i, i] = sqrt(prod_{k < i} (1 - z[i, k]**2))`` (the rest of each row's unit
    length). ``log |det J|`` over the strict lower triangle of ``L``: ``sum log(1 - z**2)
    + 1/2 sum_{j < i} sum_{k < j} log(1 - z[i, k]**2)``.
    """

    def unconstrained_shape(self, shape: tuple) -> tuple:
        if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 2:
            raise ValueError(
                f"a Cholesky factor of a correlation matrix is K x K with K >= 2, got shape "
                f"{shape}"
            )
        return (shape[0] * (shape[0] - 1) // 2,)

    @staticmethod
    def _size(y) -> int:
        return int(round((1 + math.sqrt(1 + 8 * int(y.shape[-1]))) / 2))

    @staticmethod
    def _slots(size: int) -> tuple:
        """(each matrix entry's index into ``[0, *y]``: 0 off the strict lower triangle;
        the flat positions of the strict lower triangle, row by row)."""
        rows, cols = np.tril_indices(size, -1)
        into = np.zeros((size, size), np.int32)
        into[rows, cols] = np.arange(1, len(rows) + 1)
        return into, (rows * size + cols).astype(np.int32)

    def _parts(self, y):
        """(z, log(1 - z**2), both as strict-lower matrices; the exclusive row sums of
        the latter, C)."""
        xp = _xp(y)
        size = self._size(y)
        into, _ = self._slots(size)
        # log(1 - tanh(y)**2) = -2 log cosh(y), without overflow
        magnitude = xp.abs(y)
        log_one_minus_z2 = 2.0 * (_LOG_2 - magnitude - xp.log1p(xp.exp(-2.0 * magnitude)))
        padded = lambda v: _gather(xp.concatenate([y[:1] * 0.0, v]), into)
        z = padded(xp.tanh(y))
        w = padded(log_one_minus_z2)
        c = xp_matmul(w, _constant(_cumulative(size, True), y))
        return z, w, c

    def forward(self, y):
        size = self._size(y)
        z, _, c = self._parts(y)
        return (z + _constant(np.eye(size), y)) * _xp(y).exp(0.5 * c)

    def inverse(self, x):
        xp = _xp(x)
        size = int(x.shape[-1])
        _, lower = self._slots(size)
        before = xp_matmul(x * x, _constant(_cumulative(size, True), x))
        # (above the diagonal the rest is about 0: those entries are not kept)
        ratio = x / xp.sqrt(xp.maximum(1.0 - before, 1e-30))
        flat = _gather(xp.reshape(ratio, (-1,)), lower)
        return 0.5 * (xp.log1p(flat) - xp.log1p(-flat))

    def log_det_jacobian(self, y):
        xp = _xp(y)
        size = self._size(y)
        _, w, c = self._parts(y)
        strict = _constant(np.tril(np.ones((size, size)), -1), y)
        return xp.sum(w) + 0.5 * xp.sum(c * strict)

    def pullback(self, y, grad_x):
        xp = _xp(y)
        size = self._size(y)
        _, lower = self._slots(size)
        z, w, c = self._parts(y)
        strict = _constant(np.tril(np.ones((size, size)), -1), y)
        grad_x = grad_x * _constant(np.tril(np.ones((size, size))), y)  # L's upper half: 0
        scale = xp.exp(0.5 * c)
        x = (z + _constant(np.eye(size), y)) * scale
        grad_z = grad_x * scale
        grad_c = 0.5 * grad_x * x + 0.5 * strict
        # c[i, j] sums w[i, k] for k < j: w[i, k]'s gradient sums grad_c[i, j] for j > k.
        grad_w = xp_matmul(grad_c, _constant(_cumulative(size, True).T, y)) + strict
        # dz/dy = 1 - z**2 = exp(w), dw/dy = -2 z
        grad_y = grad_z * xp.exp(w) - 2.0 * grad_w * z
        return _gather(xp.reshape(grad_y, (-1,)), lower)


@dataclasses.dataclass(frozen=True, eq=False)
class _Custom(Transform):
    """The user's own bijection (see `custom`)."""

    forward_fn: Callable
    inverse_fn: Callable
    log_det_fn: Callable
    pullback_fn: Callable | None
    shape_fn: Callable | None

    def forward(self, y):
        return self.forward_fn(y)

    def inverse(self, x):
        return self.inverse_fn(x)

    def log_det_jacobian(self, y):
        return self.log_det_fn(y)

    def pullback(self, y, grad_x):
        if self.pullback_fn is None:
            raise TypeError(
                "nuts.transforms.custom: on NumPy (value_and_grad=) a custom transform needs "
                "pullback=: a function (y, grad_x) -> the gradient in y of log p(forward(y)) "
                "+ log_det_jacobian(y), given grad_x, the gradient of log p at forward(y)"
            )
        return self.pullback_fn(y, grad_x)

    def unconstrained_shape(self, shape: tuple) -> tuple:
        return tuple(shape) if self.shape_fn is None else tuple(self.shape_fn(tuple(shape)))

    def __hash__(self) -> int:  # functions compare by identity: so does the transform
        return hash((self.forward_fn, self.inverse_fn, self.log_det_fn, self.pullback_fn))

    def __eq__(self, other) -> bool:
        return isinstance(other, _Custom) and hash(self) == hash(other) and (
            self.forward_fn is other.forward_fn
            and self.inverse_fn is other.inverse_fn
            and self.log_det_fn is other.log_det_fn
            and self.pullback_fn is other.pullback_fn
            and self.shape_fn is other.shape_fn
        )


def xp_matmul(a, b):
    """``a @ b`` in ``a``'s library (a vector or matrix times a matrix)."""
    return _xp(a).matmul(a, b)


def positive() -> Transform:
    """A positive leaf: ``x = exp(y)`` (``log |det J| = sum(y)``)."""
    return _Exp()


def softplus() -> Transform:
    """A positive leaf: ``x = log(1 + exp(y))``; gentler than `positive` for large ``x``."""
    return _Softplus()


def interval(lower: float, upper: float) -> Transform:
    """A leaf in ``(lower, upper)``: ``x = lower + (upper - lower) * sigmoid(y)``."""
    lower, upper = float(lower), float(upper)
    if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
        raise ValueError(
            f"nuts.transforms.interval needs finite lower < upper, got ({lower}, {upper}); "
            "for (0, inf) use positive()"
        )
    return _Interval(lower, upper)


def ordered() -> Transform:
    """An increasing vector leaf: ``x[0] = y[0]``, ``x[k] = x[k - 1] + exp(y[k])``."""
    return _Ordered()


def simplex() -> Transform:
    """A vector leaf of ``K`` positive entries summing to 1, from ``K - 1`` free numbers."""
    return _Simplex()


def cholesky_corr() -> Transform:
    """A ``K x K`` leaf: the Cholesky factor of a correlation matrix, from ``K (K - 1) /
    2`` free numbers (tanh of canonical partial correlations, as Stan)."""
    return _CholeskyCorr()


def custom(
    forward: Callable,
    inverse: Callable,
    log_det_jacobian: Callable,
    *,
    pullback: Callable | None = None,
    unconstrained_shape: Callable | None = None,
) -> Transform:
    """Your own bijection for one leaf of one chain.

    Args:
      forward: unconstrained ``y`` -> constrained ``x``; written with the backend's
        operations (NumPy, ``jax.numpy``, TensorFlow), for ONE chain's leaf.
      inverse: ``x`` -> ``y``.
      log_det_jacobian: ``y`` -> ``log |det dx/dy|`` (a scalar), over ``x``'s free
        coordinates.
      pullback: ``(y, grad_x)`` -> the gradient in ``y`` of ``log p(forward(y)) +
        log_det_jacobian(y)``, given ``grad_x`` (the gradient of ``log p`` at
        ``forward(y)``). Needed on NumPy only (with ``value_and_grad=``); JAX and
        TensorFlow differentiate through ``forward``.
      unconstrained_shape: the constrained leaf's shape (one chain's) -> ``y``'s shape;
        None: the same shape.
    """
    for name, function in (
        ("forward", forward),
        ("inverse", inverse),
        ("log_det_jacobian", log_det_jacobian),
    ):
        if not callable(function):
            raise TypeError(f"nuts.transforms.custom: {name} must be a function, got {function!r}")
    return _Custom(forward, inverse, log_det_jacobian, pullback, unconstrained_shape)
