"""One constrained model for the transform and adaptation tests, on every backend.

``{"sigma": [], "w": [3]}``: ``sigma ~ HalfNormal(2)`` (``transforms.positive()``) and
``w ~ Dirichlet(2, 3, 5)`` (``transforms.simplex()``), so its moments are known. One
target object per backend, so every test finds the sampler compiled by the first.
"""

from __future__ import annotations

import functools

import numpy as np

from pcbatch import api
from pcbatch.mcmc import nuts
from tests import backends

CHAINS = 4
SCALE = 2.0
ALPHA = np.array([2.0, 3.0, 5.0])
TRANSFORMS = {"sigma": nuts.transforms.positive(), "w": nuts.transforms.simplex()}

SIGMA_MEAN = SCALE * np.sqrt(2.0 / np.pi)
SIGMA_SD = SCALE * np.sqrt(1.0 - 2.0 / np.pi)
W_MEAN = ALPHA / ALPHA.sum()
W_SD = np.sqrt(ALPHA * (ALPHA.sum() - ALPHA) / (ALPHA.sum() ** 2 * (ALPHA.sum() + 1.0)))


def log_prob(params, log, total):
    sigma, w = params["sigma"], params["w"]
    return -0.5 * (sigma / SCALE) ** 2 + total((ALPHA - 1.0) * log(w))


def value_and_grad(params):
    """NumPy: the density of the CONSTRAINED parameters and its gradient in them."""
    sigma, w = params["sigma"], params["w"]
    grad = {"sigma": -sigma / SCALE**2, "w": (ALPHA - 1.0) / w}
    return log_prob(params, np.log, np.sum), grad


@functools.cache
def target(name: str):
    if name == "jax":
        import jax.numpy as jnp

        return lambda params: log_prob(params, jnp.log, jnp.sum)
    import tensorflow as tf

    return lambda params: log_prob(params, tf.math.log, tf.reduce_sum)


def backend(name: str):
    """The backend object the tests run on (None: NumPy, picked from the arrays)."""
    if name == "numpy":
        return None
    backends.backend(name)  # JAX: float64, as the other NUTS tests
    return api._shared_backend(name)  # TensorFlow: XLA, which runs NUTS fast


def initial() -> dict:
    rng = np.random.RandomState(4)
    w = rng.dirichlet(ALPHA, size=CHAINS)
    return {"sigma": rng.uniform(0.5, 2.0, size=CHAINS), "w": w}


def run(name: str, state=None, **options):
    """``nuts.sample`` of the model (``state``: None for `initial`, or an AdaptedState)."""
    settings = dict(num_samples=200, num_warmup=200, seed=3, max_tree_depth=6,
                    progress_bar=False)  # fmt: skip
    settings.update(options)
    if state is None:
        state = initial()
        settings.setdefault("transforms", TRANSFORMS)
    if name == "numpy":
        return nuts.sample(None, state, value_and_grad=value_and_grad, **settings)
    return nuts.sample(target(name), state, backend=backend(name), **settings)


def warmup(name: str, **options):
    settings = dict(num_warmup=200, seed=3, max_tree_depth=6, progress_bar=False,
                    transforms=TRANSFORMS)  # fmt: skip
    settings.update(options)
    if name == "numpy":
        return nuts.warmup(None, initial(), value_and_grad=value_and_grad, **settings)
    return nuts.warmup(target(name), initial(), backend=backend(name), **settings)
