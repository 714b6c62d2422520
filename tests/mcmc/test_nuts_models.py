"""Structured states and data (issue 26, items 1 and 2), on every backend.

One model serves the statistical tests: a dict state ``{"mu": [], "theta": [2]}`` with
data ``{"y": [10], "loc": [2], "scale": [2]}``, ``y`` marked per chain
(``data_chain_axis="y"``), so that the moment test (every chain the same ``y``), the
per-chain test (each chain its own ``y``) and the no-retrace test all run in ONE
compiled program per backend. Its posterior is known: ``mu`` is the conjugate normal
mean (prior N(0, 10^2), ``y_i ~ N(mu, 1)``), ``theta`` is N(loc, scale).

Moment checks allow 5 standard errors (sd / sqrt(ESS)), as tests/mcmc/test_nuts.py.
"""

from __future__ import annotations

import collections
import functools
import sys
import types

import numpy as np
import pytest

from pcbatch import api
from pcbatch.mcmc import diagnostics, nuts, structure
from tests import backends, tiers

Z = 5.0
CHAINS = 4
NUM_Y = 10
PRIOR_SD = 10.0


def _backend(name: str):
    """The backend object the tests run on (None: NumPy, picked from the arrays)."""
    if name == "numpy":
        return None
    backends.backend(name)  # JAX: float64, as the other NUTS tests
    return api._shared_backend(name)  # TensorFlow: XLA, which runs NUTS fast


def _log_prob(params, data, xp_sum):
    mu, theta = params["mu"], params["theta"]
    prior = -0.5 * (mu / PRIOR_SD) ** 2
    likelihood = -0.5 * xp_sum((data["y"] - mu) ** 2)
    standard = (theta - data["loc"]) / data["scale"]
    return prior + likelihood - 0.5 * xp_sum(standard**2)


def _value_and_grad(params, data):
    """For NumPy: the log density and its gradient, in the state's structure."""
    mu, theta = params["mu"], params["theta"]
    grad = {
        "mu": -mu / PRIOR_SD**2 + np.sum(data["y"] - mu),
        "theta": -(theta - data["loc"]) / data["scale"] ** 2,
    }
    return _log_prob(params, data, np.sum), grad


@functools.cache
def _target(name: str):
    """One function object per backend, so that every test finds the compiled program."""
    if name == "jax":
        import jax.numpy as jnp

        return lambda params, data: _log_prob(params, data, jnp.sum)
    import tensorflow as tf

    return lambda params, data: _log_prob(params, data, tf.reduce_sum)


LOC, SCALE = np.array([-1.0, 2.0]), np.array([0.5, 2.0])


def _data(y_per_chain: np.ndarray) -> dict:
    return {"y": y_per_chain, "loc": LOC, "scale": SCALE}


def _shared_y() -> np.ndarray:
    y = np.random.RandomState(5).normal(1.5, 1.0, size=NUM_Y)
    return np.broadcast_to(y, (CHAINS, NUM_Y))


def _initial() -> dict:
    rng = np.random.RandomState(2)
    return {"mu": rng.normal(size=CHAINS), "theta": rng.normal(size=(CHAINS, 2))}


def _run(name: str, y: np.ndarray, **options):
    settings = dict(num_samples=200, num_warmup=150, seed=3, max_tree_depth=6)
    settings.update(options, progress_bar=False, data=_data(y), data_chain_axis="y")
    if name == "numpy":
        return nuts.sample(None, _initial(), value_and_grad=_value_and_grad, **settings)
    return nuts.sample(_target(name), _initial(), backend=_backend(name), **settings)


#: the moments test's draws and warmup: the fast tier's 100 and 100 keep every ESS above
#: 300 and every z-score at most 2.1 over seeds 3 to 6 (NumPy), at half the cost of 200 and 150
DRAWS, WARMUP = tiers.pick((100, 100), (200, 150))


@functools.cache
def _cached_run(name: str):
    return _run(name, _shared_y(), num_samples=DRAWS, num_warmup=WARMUP)


def _posterior_of_mu(y: np.ndarray) -> tuple:
    precision = len(y) + PRIOR_SD**-2
    return np.sum(y) / precision, precision**-0.5


def _assert_mean_within(draws, mean, sd, what):
    ess = diagnostics.effective_sample_size(draws)
    assert np.all(ess > 50), f"{what}: ESS {ess}"
    error = np.abs(draws.mean(axis=(0, 1)) - mean)
    np.testing.assert_array_less(error, Z * sd / np.sqrt(ess), err_msg=what)
    return ess


@pytest.mark.parametrize("backend", tiers.one_compiled(backends.BACKEND_NAMES))
def test_a_dict_state_with_data_has_the_analytic_moments(backend):
    result = _cached_run(backend)
    assert set(result.samples) == {"mu", "theta"}
    mu, theta = np.asarray(result.samples["mu"]), np.asarray(result.samples["theta"])
    assert mu.shape == (DRAWS, CHAINS) and theta.shape == (DRAWS, CHAINS, 2)
    assert mu.dtype == theta.dtype == np.float64
    mu_mean, mu_sd = _posterior_of_mu(_shared_y()[0])
    ess = _assert_mean_within(mu, mu_mean, mu_sd, "mu")
    assert abs(mu.std() - mu_sd) < 2 * Z * mu_sd / np.sqrt(2 * ess)
    ess = _assert_mean_within(theta, LOC, SCALE, "theta")
    sd = theta.std(axis=(0, 1))
    np.testing.assert_array_less(np.abs(sd - SCALE), 2 * Z * SCALE / np.sqrt(2 * ess))
    assert np.all(result.rhat()["theta"] < 1.05) and result.rhat()["mu"] < 1.05
    assert result.names == ["mu", "theta"]
    assert not result.diverging.any()


@pytest.mark.parametrize("backend", tiers.one_compiled(backends.BACKEND_NAMES))
def test_each_chain_samples_the_posterior_of_its_own_data(backend):
    y = _shared_y() + 3.0 * np.arange(CHAINS)[:, None]  # chain c's data: shifted by 3c
    result = _run(backend, y, num_samples=DRAWS, num_warmup=WARMUP)
    mu = np.asarray(result.samples["mu"])
    for chain in range(CHAINS):
        mean, sd = _posterior_of_mu(y[chain])
        _assert_mean_within(mu[:, chain : chain + 1], mean, sd, f"mu of chain {chain}")
    # theta's data is shared: every chain has the same posterior for it.
    _assert_mean_within(np.asarray(result.samples["theta"]), LOC, SCALE, "theta")


def _compilations(name: str) -> tuple:
    """What grows when the sampler compiles: its programs, and the backend's traces."""
    traces = 0 if name == "numpy" else _backend(name).traces
    return nuts._compiled.cache_info().currsize, traces


@pytest.mark.parametrize("backend", tiers.numpy_fast(backends.BACKEND_NAMES))
def test_new_data_and_new_lengths_run_without_compiling_again(backend):
    first = _run(backend, _shared_y(), num_samples=30, num_warmup=20)
    before = _compilations(backend)
    other_y = _shared_y() - 4.0
    for samples, warmup in tiers.pick(((10, 10), (5, 0), (30, 20)), ((50, 40), (10, 0), (30, 20))):
        again = _run(backend, other_y, num_samples=samples, num_warmup=warmup)
        assert np.asarray(again.samples["mu"]).shape == (samples, CHAINS)
    assert _compilations(backend) == before
    # The new data reached the log density: mu's draws moved with y, by about 4.
    shift = np.mean(first.samples["mu"]) - np.mean(again.samples["mu"])
    assert 3.0 < shift < 5.0


def _shifted_value_and_grad(params, data):
    return -0.5 * np.sum((params["x"] - data) ** 2), {"x": data - params["x"]}


def test_a_run_split_over_calls_gives_the_draws_of_one_call():
    # The program keeps at most `draws_per_call` draws per call; a longer run is several
    # calls, each continuing the chains (and their adaptation) where the last stopped.
    # (A small model: NumPy's sums of many terms round differently when the chains
    # running together differ, and the calls end at different times in the two runs.)
    options = dict(
        num_samples=20, num_warmup=30, step_size=0.1, seed=4, max_tree_depth=5,
        backend=None, value_and_grad=_shifted_value_and_grad, data=np.array([1.0, -2.0]),
        data_chain_axis=False, target_accept_prob=0.8, first_chain=0, first_draw=0,
        schedule="returns_first", progress_bar=False,
    )  # fmt: skip
    start = {"x": np.random.RandomState(1).normal(size=(3, 2))}
    whole = nuts._sample(None, start, **options)
    split = nuts._sample(None, start, draws_per_call=8, **options)
    np.testing.assert_array_equal(split.samples["x"], whole.samples["x"])
    for field in ("num_leapfrogs", "tree_depth", "step_size", "accept_prob", "diverging"):
        np.testing.assert_array_equal(getattr(split, field), getattr(whole, field))
    np.testing.assert_array_equal(split.inverse_mass, whole.inverse_mass)


# -- the structure of states and draws (NumPy: no compile to wait for) ---------------

Pair = collections.namedtuple("Pair", ["scale", "loc"])


def _gaussian_value_and_grad(params):
    """An isotropic Gaussian on any structure: the gradient has the same structure."""
    leaves, node = structure.flatten(params)
    logp = sum(-0.5 * np.sum(leaf * leaf) for leaf in leaves)
    return logp, node.unflatten([-leaf for leaf in leaves])


SHORT = dict(num_samples=5, num_warmup=0, seed=0, max_tree_depth=4, progress_bar=False)


def _short(state, **options):
    return nuts.sample(None, state, value_and_grad=_gaussian_value_and_grad, **SHORT, **options)


def test_draws_come_back_in_the_states_structure_named_by_key_path():
    state = {
        "b": (np.zeros(3), Pair(np.ones((3, 2)), np.zeros((3, 2, 2)))),
        "a": {"inner": np.zeros((3, 4))},
    }
    result = _short(state)
    samples = result.samples
    assert set(samples) == {"a", "b"} and set(samples["a"]) == {"inner"}
    assert isinstance(samples["b"], tuple) and isinstance(samples["b"][1], Pair)
    assert samples["a"]["inner"].shape == (5, 3, 4)
    assert samples["b"][0].shape == (5, 3)
    assert samples["b"][1].scale.shape == (5, 3, 2)
    assert samples["b"][1].loc.shape == (5, 3, 2, 2)
    # Dict keys sorted, as jax.tree_util sorts them; names are key paths.
    assert result.names == ["a.inner", "b.0", "b.1.scale", "b.1.loc"]
    assert result.inverse_mass.shape == (3, 4 + 1 + 2 + 4)
    ess = result.ess()
    assert ess["b"][1].loc.shape == (2, 2) and np.shape(ess["b"][0]) == ()


def test_a_structure_moves_as_the_same_numbers_in_one_array():
    # Flattening is exact: {"a": [c, 2], "b": [c]} is the array [a, b] (keys sorted).
    rng = np.random.RandomState(0)
    a, b = rng.normal(size=(3, 2)), rng.normal(size=3)
    structured = _short({"b": b, "a": a})
    flat = _short(np.concatenate([a, b[:, None]], axis=1))
    np.testing.assert_array_equal(structured.samples["a"], flat.samples[:, :, :2])
    np.testing.assert_array_equal(structured.samples["b"], flat.samples[:, :, 2])
    np.testing.assert_array_equal(structured.num_leapfrogs, flat.num_leapfrogs)
    single = _short((a,))  # a tuple of one leaf: the array itself
    np.testing.assert_array_equal(single.samples[0], _short(a).samples)


def test_leaves_share_one_float_dtype():
    mixed = {
        "f32": np.zeros((2, 2), np.float32),
        "f64": np.zeros((2,)),
        "int": np.zeros((2, 1), int),
    }
    samples = _short(mixed).samples
    assert {leaf.dtype for leaf in samples.values()} == {np.dtype(np.float64)}
    assert _short((np.zeros((2, 2), np.float32),)).samples[0].dtype == np.float32


def test_the_kernel_steps_a_structured_state_with_data():
    def value_and_grad(params, data):
        return -0.5 * np.sum((params["x"] - data) ** 2), {"x": data - params["x"]}

    kernel = nuts.NoUTurnSampler(
        step_size=0.5, max_tree_depth=4, seed=1, value_and_grad=value_and_grad,
        data=np.arange(4.0).reshape(2, 2), data_chain_axis=True,
    )  # fmt: skip
    state = {"x": np.zeros((2, 2))}
    results = kernel.bootstrap_results(state)
    for _ in range(3):
        state, results = kernel.one_step(state, results)
    assert state["x"].shape == (2, 2) and results.draw == 3


def test_to_arviz_has_one_variable_per_leaf(monkeypatch):
    calls = []
    stub = types.ModuleType("arviz")
    stub.from_dict = lambda **groups: calls.append(groups) or groups
    monkeypatch.setitem(sys.modules, "arviz", stub)
    result = _short({"mu": np.zeros(3), "nested": {"theta": np.zeros((3, 2))}})
    posterior = result.to_arviz()["posterior"]
    assert list(posterior) == ["mu", "nested.theta"]
    assert posterior["nested.theta"].shape == (3, 5, 2)  # chains first, as ArviZ wants
    np.testing.assert_array_equal(posterior["mu"][1], result.samples["mu"][:, 1])
    assert list(_short(np.zeros((3, 2))).to_arviz()["posterior"]) == ["x"]


# -- clear errors ---------------------------------------------------------------


def test_a_structured_state_on_numpy_without_value_and_grad_says_what_to_pass():
    with pytest.raises(TypeError, match=r"value_and_grad=.*structure you passed.*data"):
        nuts.sample(lambda p, d: 0.0, {"mu": np.zeros(2)}, data=np.zeros(3), **SHORT)


@pytest.mark.parametrize(
    ("state", "words"),
    [
        ({"mu": np.zeros(3), "s": 1.0}, r"initial_state\['s'\] needs a leading chain"),
        ({"mu": np.zeros(3), "s": np.zeros(2)}, "same leading chain axis.*'mu': 3, 's': 2"),
        ({"mu": np.zeros(3, np.float16)}, r"initial_state\['mu'\] has dtype float16"),
        ({}, "holds no arrays"),
    ],
)
def test_a_bad_structured_state_is_a_clear_error(state, words):
    with pytest.raises((TypeError, ValueError), match=words):
        _short(state)


def test_a_gradient_of_another_structure_is_a_clear_error():
    # Found while pcbatch infers the function's result type: a TypeInferenceError that
    # says what is wrong.
    wrong = lambda params: (0.0, {"other": params["mu"]})
    with pytest.raises(TypeError, match="gradient must have the state's structure.*mu"):
        nuts.sample(None, {"mu": np.zeros(2)}, value_and_grad=wrong, **SHORT)


@pytest.mark.parametrize(
    ("data", "chain_axis", "error", "words"),
    [
        ({"y": np.zeros((3, 2))}, True, ValueError, r"data\['y'\] has shape \(3, 2\).*2"),
        ({"y": np.zeros(2)}, "z", ValueError, "names 'z', which is no leaf.*'y'"),
        ({"y": np.zeros(2)}, 1, TypeError, "data_chain_axis takes"),
        (None, True, ValueError, "no data"),
        ({"y": np.array(["a"])}, False, TypeError, "numbers or booleans"),
    ],
)
def test_bad_data_is_a_clear_error(data, chain_axis, error, words):
    vg = lambda x, data: (-0.5 * np.sum(x * x), -x)
    with pytest.raises(error, match=words):
        nuts.sample(
            None, np.zeros((2, 1)), value_and_grad=vg, data=data, data_chain_axis=chain_axis,
            **SHORT,
        )  # fmt: skip


# -- JAX: any pytree ------------------------------------------------------------


@tiers.slow  # a NUTS compilation of its own; the fast tier checks structures on NumPy
def test_a_dataclass_registered_with_jax_is_a_state():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    import dataclasses

    @jax.tree_util.register_dataclass
    @dataclasses.dataclass
    class Params:
        loc: jax.Array
        log_scale: jax.Array

    def log_prob(params, data):
        return -0.5 * jnp.sum((params.loc - data) ** 2) - 0.5 * params.log_scale**2

    backends.backend("jax")
    start = Params(jnp.zeros((3, 2)), jnp.zeros(3))
    result = nuts.sample(
        log_prob, start, data=jnp.array([1.0, -1.0]), num_samples=40, num_warmup=30, seed=0,
        max_tree_depth=5, progress_bar=False,
    )  # fmt: skip
    assert isinstance(result.samples, Params)
    assert result.samples.loc.shape == (40, 3, 2) and result.samples.log_scale.shape == (40, 3)
    assert result.names == ["loc", "log_scale"]
    assert abs(float(jnp.mean(result.samples.loc[:, :, 0])) - 1.0) < 0.6
