"""Targets for the sampler's statistical tests, each with its known answer.

Every target has a log density written once against an array namespace ``xp``
(NumPy, ``jax.numpy`` or TensorFlow's NumPy), an analytic gradient for the NumPy
backend, and the exact (or independently computed) posterior moments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    dim: int
    log_prob: Callable  # (x, xp) -> scalar, for ONE state
    value_and_grad: Callable  # x -> (log density, gradient), NumPy, for ONE state
    statistic: Callable  # draws [..., dim] -> the checked quantity [..., k]
    mean: np.ndarray  # the statistic's exact mean
    sd: np.ndarray  # and standard deviation


def _gaussian(name: str, mean: np.ndarray, cov: np.ndarray) -> Target:
    precision = np.linalg.inv(cov)

    def log_prob(x, xp):
        centered = x - mean
        return -0.5 * xp.sum(centered * xp.matmul(precision, centered))

    def value_and_grad(x):
        centered = x - mean
        pull = precision @ centered
        return -0.5 * np.sum(centered * pull), -pull

    sd = np.sqrt(np.diag(cov))
    return Target(name, len(mean), log_prob, value_and_grad, lambda x: x, mean, sd)


def normal_1d() -> Target:
    return _gaussian("normal_1d", np.array([1.0]), np.array([[4.0]]))


def correlated_gaussian(dim: int = 10, rho: float = 0.6) -> Target:
    scales = np.linspace(0.5, 2.0, dim)
    lags = np.abs(np.subtract.outer(np.arange(dim), np.arange(dim)))
    cov = rho**lags * np.outer(scales, scales)
    return _gaussian(f"gaussian_{dim}d", np.linspace(-2.0, 2.0, dim), cov)


def logit_beta(a: float = 2.0, b: float = 5.0) -> Target:
    """x = logit(theta), theta ~ Beta(a, b): the density of x includes the Jacobian."""

    def log_prob(x, xp):
        return -a * xp.sum(xp.logaddexp(0.0, -x)) - b * xp.sum(xp.logaddexp(0.0, x))

    def value_and_grad(x):
        theta = 1.0 / (1.0 + np.exp(-x))
        return log_prob(x, np), a - (a + b) * theta

    mean = a / (a + b)
    sd = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
    sigmoid = lambda x: 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))
    return Target(
        "logit_beta", 1, log_prob, value_and_grad, sigmoid, np.array([mean]), np.array([sd])
    )


def logistic_regression(num_data: int = 100, num_features: int = 3) -> Target:
    """N(0, 1) prior on the coefficients; the answer from importance sampling (below)."""
    rng = np.random.RandomState(7)
    features = rng.normal(size=(num_data, num_features))
    truth = rng.normal(size=num_features)
    labels = (rng.uniform(size=num_data) < 1.0 / (1.0 + np.exp(-features @ truth))) * 1.0

    def log_prob(beta, xp):
        z = xp.matmul(features, beta)
        return xp.sum(labels * z - xp.logaddexp(0.0, z)) - 0.5 * xp.sum(beta * beta)

    def value_and_grad(beta):
        z = features @ beta
        residual = labels - 1.0 / (1.0 + np.exp(-z))
        return log_prob(beta, np), features.T @ residual - beta

    mean, sd = _importance_moments(log_prob, features, labels, num_features)
    return Target(
        "logistic_regression", num_features, log_prob, value_and_grad, lambda x: x, mean, sd
    )


def _importance_moments(log_prob, features, labels, dim, draws=400_000):
    """Posterior mean and sd by self-normalized importance sampling from a wide Student-t
    around the mode (Laplace approximation): an answer independent of any MCMC."""
    beta = np.zeros(dim)
    for _ in range(50):  # Newton's method to the mode
        p = 1.0 / (1.0 + np.exp(-features @ beta))
        gradient = features.T @ (labels - p) - beta
        hessian = -(features.T * (p * (1 - p))) @ features - np.eye(dim)
        beta = beta - np.linalg.solve(hessian, gradient)
    cov = 2.0 * np.linalg.inv(-hessian)
    rng = np.random.RandomState(11)
    nu = 5.0
    chol = np.linalg.cholesky(cov)
    z = rng.normal(size=(draws, dim))
    w = rng.chisquare(nu, size=(draws, 1)) / nu
    x = beta + (z / np.sqrt(w)) @ chol.T
    maha = np.sum(np.linalg.solve(chol, (x - beta).T) ** 2, axis=0)
    log_q = -0.5 * (nu + dim) * np.log1p(maha / nu)
    z_all = x @ features.T
    log_p = np.sum(labels * z_all - np.logaddexp(0.0, z_all), axis=1) - 0.5 * np.sum(x * x, 1)
    weights = np.exp(log_p - log_q - np.max(log_p - log_q))
    weights /= weights.sum()
    mean = weights @ x
    sd = np.sqrt(weights @ (x - mean) ** 2)
    return mean, sd


ALL = (normal_1d, correlated_gaussian, logit_beta, logistic_regression)
