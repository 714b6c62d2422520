"""Constrained parameters (issue 26, item 3): each transform against its analytic
Jacobian, and sampling a constrained model on every backend.

The Jacobians are checked numerically: ``log |det J|`` against the log-determinant of
the central finite-difference Jacobian of ``forward`` (over the constrained leaf's free
coordinates), and ``pullback`` against the finite-difference gradient of
``<g, forward(y)> + log_det_jacobian(y)``. Moment checks allow 5 standard errors, as
tests/mcmc/test_nuts.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from pcbatch.mcmc import constrained, diagnostics, nuts
from pcbatch.mcmc import transforms as T
from tests import backends, tiers
from tests.mcmc import constrained_target as model

Z = 5.0

CASES = {
    "positive": (T.positive(), (3,)),
    "softplus": (T.softplus(), (3,)),
    "interval": (T.interval(-1.0, 2.5), (3,)),
    "ordered": (T.ordered(), (4,)),
    "simplex": (T.simplex(), (4,)),
    "cholesky_corr": (T.cholesky_corr(), (4, 4)),
}


def _free(name: str, x: np.ndarray) -> np.ndarray:
    """The constrained leaf's free coordinates (what its Jacobian is taken over)."""
    if name == "simplex":
        return x[:-1]
    if name == "cholesky_corr":
        return x[np.tril_indices(x.shape[0], -1)]
    return x.reshape(-1)


def _jacobian(function, y: np.ndarray, h: float = 1e-6) -> np.ndarray:
    columns = []
    for k in range(y.size):
        step = np.zeros_like(y)
        step[k] = h
        columns.append((function(y + step) - function(y - step)) / (2 * h))
    return np.stack(columns, axis=-1)


def _point(name: str, seed: int = 0) -> np.ndarray:
    transform, shape = CASES[name]
    return np.random.RandomState(seed).normal(size=transform.unconstrained_shape(shape))


@pytest.mark.parametrize("name", CASES)
def test_log_det_jacobian_is_the_log_determinant_of_the_jacobian(name):
    transform, _ = CASES[name]
    for seed in range(3):
        y = _point(name, seed)
        jacobian = _jacobian(lambda v: _free(name, transform.forward(v)), y)
        sign, expected = np.linalg.slogdet(jacobian)
        assert sign != 0
        np.testing.assert_allclose(transform.log_det_jacobian(y), expected, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_pullback_is_the_gradient_of_the_transformed_log_density(name):
    transform, shape = CASES[name]
    y = _point(name)
    g = np.random.RandomState(1).normal(size=shape)
    if name == "cholesky_corr":
        g = np.tril(g)  # L's upper triangle is always 0: no gradient flows from it

    def objective(v):
        return np.sum(g * transform.forward(v)) + transform.log_det_jacobian(v)

    expected = _jacobian(lambda v: np.array([objective(v)]), y)[0]
    np.testing.assert_allclose(transform.pullback(y, g), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", CASES)
def test_inverse_undoes_forward_and_forward_lands_in_the_constraint(name):
    transform, shape = CASES[name]
    y = _point(name) * 2.0
    x = transform.forward(y)
    assert x.shape == shape
    np.testing.assert_allclose(transform.inverse(x), y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(transform.forward(transform.inverse(x)), x, rtol=1e-12, atol=1e-12)
    if name in ("positive", "softplus"):
        assert np.all(x > 0)
    if name == "interval":
        assert np.all((x > -1.0) & (x < 2.5))
    if name == "ordered":
        assert np.all(np.diff(x) > 0)
    if name == "simplex":
        assert np.all(x > 0) and np.isclose(x.sum(), 1.0)
    if name == "cholesky_corr":
        np.testing.assert_array_equal(np.triu(x, 1), 0.0)
        assert np.all(np.diag(x) > 0)
        np.testing.assert_allclose(np.sum(x * x, axis=1), 1.0)  # unit diagonal of L L^T


@pytest.mark.parametrize("backend_name", [b for b in backends.BACKEND_NAMES if b != "numpy"])
def test_transforms_compute_the_same_on_every_backend(backend_name):
    backends.backend(backend_name)  # JAX: float64
    if backend_name == "jax":
        import jax.numpy as jnp

        native = jnp.asarray
    else:
        import tensorflow as tf

        native = tf.constant
    for name, (transform, shape) in CASES.items():
        y = _point(name)
        g = np.random.RandomState(1).normal(size=shape)
        for method, args in (
            ("forward", (y,)),
            ("log_det_jacobian", (y,)),
            ("pullback", (y, g)),
            ("inverse", (transform.forward(y),)),
        ):
            expected = getattr(transform, method)(*args)
            actual = getattr(transform, method)(*(native(a) for a in args))
            np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-10, err_msg=name)


# -- sampling a constrained model -----------------------------------------------------


def _assert_moments(draws, mean, sd, what):
    ess = diagnostics.effective_sample_size(draws)
    assert np.all(ess > 50), f"{what}: ESS {ess}"
    error = np.abs(draws.mean(axis=(0, 1)) - mean)
    np.testing.assert_array_less(error, Z * sd / np.sqrt(ess), err_msg=what)
    spread = np.abs(draws.std(axis=(0, 1)) - sd)
    np.testing.assert_array_less(spread, 2 * Z * sd / np.sqrt(2 * ess), err_msg=what)


#: the moments test's draws and warmup: 100 after 150 in the fast tier (100 of warmup
#: left a divergence), 200 after 200 in the slow tier
MOMENT_DRAWS, MOMENT_WARMUP = tiers.pick((100, 150), (200, 200))


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_a_half_normal_scale_and_a_dirichlet_simplex_have_their_moments(backend_name):
    result = model.run(backend_name, num_samples=MOMENT_DRAWS, num_warmup=MOMENT_WARMUP)
    sigma, w = np.asarray(result.samples["sigma"]), np.asarray(result.samples["w"])
    shape = (MOMENT_DRAWS, model.CHAINS)
    assert sigma.shape == shape and w.shape == (*shape, 3)
    assert np.all(sigma > 0) and np.allclose(w.sum(axis=-1), 1.0) and np.all(w > 0)
    _assert_moments(sigma, model.SIGMA_MEAN, model.SIGMA_SD, "sigma")
    _assert_moments(w, model.W_MEAN, model.W_SD, "w")
    # The sampler's space is unconstrained: 1 + 2 coordinates.
    assert result.inverse_mass.shape == (model.CHAINS, 3)
    assert not result.diverging.any()


def test_a_single_array_state_may_be_constrained_and_change_its_size():
    def value_and_grad(w):  # Dirichlet(2, 3, 5), as the structured model's w
        return np.sum((model.ALPHA - 1.0) * np.log(w)), (model.ALPHA - 1.0) / w

    start = np.random.RandomState(0).dirichlet(model.ALPHA, size=model.CHAINS)
    draws, warmup = tiers.pick((80, 80), (150, 100))
    result = nuts.sample(None, start, value_and_grad=value_and_grad, transforms=T.simplex(),
                         num_samples=draws, num_warmup=warmup, seed=1, progress_bar=False)
    assert result.samples.shape == (draws, model.CHAINS, 3)
    assert result.inverse_mass.shape == (model.CHAINS, 2)
    _assert_moments(result.samples, model.W_MEAN, model.W_SD, "w")


def _exp_forward(y):
    return np.exp(y)


def test_a_custom_transform_samples_like_the_built_in_one():
    custom = T.custom(_exp_forward, np.log, np.sum, pullback=lambda y, g: g * np.exp(y) + 1.0)
    options = dict(num_samples=20, num_warmup=20, seed=2, max_tree_depth=5)
    built_in = model.run("numpy", **options)
    mine = model.run("numpy", transforms={**model.TRANSFORMS, "sigma": custom}, **options)
    np.testing.assert_allclose(mine.samples["sigma"], built_in.samples["sigma"], rtol=1e-12)


def test_transforms_may_be_a_structure_like_the_state():
    options = dict(num_samples=5, num_warmup=0, seed=2, max_tree_depth=3)
    by_name = model.run("numpy", **options)
    as_structure = model.run("numpy", transforms=dict(model.TRANSFORMS), **options)
    nested = {"a": {"sigma": 1.0 + np.zeros(2)}}
    leaves = constrained.build({"a": {"sigma": T.positive()}}, nested)
    assert leaves.transforms == (T.positive(),)
    assert constrained.build({"a.sigma": T.positive()}, nested) == leaves
    np.testing.assert_array_equal(by_name.samples["w"], as_structure.samples["w"])


@pytest.mark.parametrize(
    ("transforms", "state", "error", "words"),
    [
        ({"scale": T.positive()}, None, ValueError, "'scale', which is no leaf"),
        ({"sigma": "positive"}, None, TypeError, "not a transform"),
        (T.positive(), None, TypeError, "give a dict of leaf names"),
        ({"sigma": T.positive(), "w": T.ordered()}, {"w": -1.0}, ValueError, "outside"),
        ({"sigma": T.simplex()}, None, ValueError, "simplex is a vector of at least 2"),
        ({"sigma": T.positive()}, {"sigma": -1.0}, ValueError, r"\['sigma'\] is outside"),
    ],
)  # fmt: skip
def test_bad_transforms_are_clear_errors(transforms, state, error, words):
    start = model.initial()
    if state is not None:
        start["w"] = np.sort(start["w"], axis=1)
        for name, value in state.items():
            start[name] = start[name] * 0.0 + value
    with pytest.raises(error, match=words):
        nuts.sample(None, start, value_and_grad=model.value_and_grad, transforms=transforms,
                    num_samples=2, num_warmup=0, seed=0, progress_bar=False)  # fmt: skip


def test_a_custom_transform_on_numpy_needs_its_pullback():
    custom = T.custom(_exp_forward, np.log, np.sum)
    with pytest.raises(TypeError, match="needs pullback="):
        model.run("numpy", transforms={**model.TRANSFORMS, "sigma": custom}, num_samples=2,
                  num_warmup=0)  # fmt: skip


def _three_constraints(params):
    """Beta(2, 5) on (0, 1); three N(0, 1) in increasing order (their order statistics);
    an LKJ(1) correlation matrix of size 3 by its Cholesky factor (density L[1, 1])."""
    r, o, lower = params["r"], params["o"], params["L"]
    logp = np.log(r) + 4.0 * np.log1p(-r) - 0.5 * np.sum(o * o) + np.log(lower[1, 1])
    grad_lower = np.zeros((3, 3)) + np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    grad = {"r": 1.0 / r - 4.0 / (1.0 - r), "o": -o, "L": grad_lower / lower[1, 1]}
    return logp, grad


@tiers.slow  # about 40 s of CPU on NumPy
def test_interval_ordered_and_cholesky_leaves_sample_their_known_moments():
    chains = 4
    start = {"r": np.full(chains, 0.5), "o": np.tile([-1.0, 0.0, 1.0], (chains, 1)),
             "L": np.tile(np.eye(3), (chains, 1, 1))}  # fmt: skip
    transforms = {"r": T.interval(0.0, 1.0), "o": T.ordered(), "L": T.cholesky_corr()}
    result = nuts.sample(None, start, value_and_grad=_three_constraints, transforms=transforms,
                         num_samples=300, num_warmup=300, seed=7, progress_bar=False)  # fmt: skip
    r, o, lower = result.samples["r"], result.samples["o"], result.samples["L"]
    _assert_moments(r, 2.0 / 7.0, np.sqrt(10.0 / (49.0 * 8.0)), "beta")
    # Order statistics of three standard normals: means -+3 / (2 sqrt(pi)), 0.
    top = 3.0 / (2.0 * np.sqrt(np.pi))
    _assert_moments(o, np.array([-top, 0.0, top]), np.sqrt([0.5595, 0.4487, 0.5595]), "ordered")
    correlation = np.einsum("...ik,...jk->...ij", lower, lower)
    np.testing.assert_allclose(np.diagonal(correlation, axis1=-2, axis2=-1), 1.0)
    # LKJ(1) in 3 dimensions: each correlation is 2 Beta(3/2, 3/2) - 1, sd 1/2.
    off = correlation[..., [1, 2, 2], [0, 0, 1]]
    _assert_moments(off, np.zeros(3), np.full(3, 0.5), "LKJ")
    assert not result.diverging.any()
