"""Adaptation you control (issue 26, item 4): `nuts.warmup`, resuming from an
`AdaptedState`, ``inverse_mass=``, ``adapt_mass=``, ``thin=`` and ``jitter=``.

The model is tests/mcmc/constrained_target.py's (a constrained dict state), so on JAX
and TensorFlow these tests run in the program the transform tests compiled. A resumed
run must draw exactly what one longer run draws: the chains' whole state (position,
gradient, step size, inverse mass, the adaptation's averages) and the draw counter
travel in the `AdaptedState`.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from pcbatch.mcmc import adapted, diagnostics, nuts
from tests import backends, tiers
from tests.mcmc import constrained_target as model

WARMUP, N = 60, 15  # 60 draws of warmup: one mass-matrix window
Z = 5.0


@functools.cache
def _whole(backend_name: str) -> nuts.NutsResult:
    return model.run(backend_name, num_warmup=WARMUP, num_samples=2 * N)


def _assert_same_draws(actual, expected) -> None:
    for name in ("sigma", "w"):
        np.testing.assert_array_equal(np.asarray(actual[name]), np.asarray(expected[name]))


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_a_run_continued_from_its_state_draws_what_one_longer_run_draws(backend_name):
    whole = _whole(backend_name)
    first = model.run(backend_name, num_warmup=WARMUP, num_samples=N)
    second = model.run(backend_name, first.state, num_warmup=0, num_samples=N)
    _assert_same_draws(first.samples, {k: v[:N] for k, v in whole.samples.items()})
    _assert_same_draws(second.samples, {k: v[N:] for k, v in whole.samples.items()})
    np.testing.assert_array_equal(second.step_size, whole.step_size[N:])
    # The adapted inverse mass travels with the state (it is not reset to ones).
    assert not np.allclose(first.state.inverse_mass, 1.0)
    np.testing.assert_array_equal(second.inverse_mass, whole.inverse_mass)
    assert first.state.next_draw == WARMUP + N and second.state.next_draw == WARMUP + 2 * N


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_warmup_then_sample_is_one_sample_with_warmup(backend_name):
    whole = _whole(backend_name)
    state = model.warmup(backend_name, num_warmup=WARMUP)
    assert isinstance(state, nuts.AdaptedState) and state.next_draw == WARMUP
    assert state.step_size.shape == (model.CHAINS,)
    assert state.inverse_mass.shape == (model.CHAINS, 3)  # unconstrained: 1 + 2
    position = state.position  # constrained, in the state's structure
    assert np.all(np.asarray(position["sigma"]) > 0)
    np.testing.assert_allclose(np.asarray(position["w"]).sum(axis=1), 1.0)
    after = model.run(backend_name, state, num_warmup=0, num_samples=2 * N)
    _assert_same_draws(after.samples, whole.samples)
    np.testing.assert_array_equal(after.step_size, whole.step_size)


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_adapt_mass_off_keeps_the_inverse_mass_given(backend_name):
    given = np.array([[0.5, 2.0, 1.5]] * model.CHAINS) * np.arange(1, model.CHAINS + 1)[:, None]
    result = model.run(backend_name, num_warmup=WARMUP, num_samples=N, adapt_mass="off",
                       inverse_mass=given)  # fmt: skip
    np.testing.assert_array_equal(result.inverse_mass, given)
    assert not np.allclose(result.step_size, 0.1)  # the step size still adapts
    adapting = model.run(backend_name, num_warmup=WARMUP, num_samples=N, inverse_mass=given)
    assert not np.allclose(adapting.inverse_mass, given)


# -- NumPy: the same program on every backend; these check the host's bookkeeping ----


def _gaussian(x):  # N(0, diag(1, 4)), one array
    return -0.5 * (x[0] ** 2 + x[1] ** 2 / 4.0), -np.array([1.0, 0.25]) * x


def _plain(**options):
    settings = dict(num_samples=2 * N, num_warmup=WARMUP, seed=5, max_tree_depth=5,
                    value_and_grad=_gaussian, progress_bar=False)  # fmt: skip
    settings.update(options)
    start = settings.pop("start", np.full((3, 2), 0.5))
    return nuts.sample(None, start, **settings)


def test_first_draw_with_the_adapted_step_size_and_inverse_mass_continues_the_run():
    whole = _plain()
    first = _plain(num_samples=N)
    second = _plain(start=first.samples[-1], num_samples=N, num_warmup=0,
                    first_draw=WARMUP + N, step_size=first.step_size[-1],
                    inverse_mass=first.inverse_mass)  # fmt: skip
    np.testing.assert_array_equal(second.samples, whole.samples[N:])
    np.testing.assert_array_equal(second.inverse_mass, whole.inverse_mass)


def test_thin_keeps_every_thin_th_draw_across_calls():
    options = dict(
        num_warmup=20, step_size=None, seed=4, max_tree_depth=5, backend=None,
        value_and_grad=_gaussian, data=None, data_chain_axis=False, target_accept_prob=0.8,
        first_chain=0, first_draw=0, schedule="returns_first", progress_bar=False,
    )  # fmt: skip
    start = np.zeros((3, 2))
    every = nuts._sample(None, start, num_samples=30, draws_per_call=8, **options)
    thinned = nuts._sample(None, start, num_samples=10, thin=3, draws_per_call=8, **options)
    np.testing.assert_array_equal(thinned.samples, every.samples[::3])
    for field in ("num_leapfrogs", "tree_depth", "step_size", "accept_prob", "diverging"):
        np.testing.assert_array_equal(getattr(thinned, field), getattr(every, field)[::3])
    # Thinning keeps draws, not work: the next draw is the 31st.
    assert thinned.state.next_draw == 20 + 30


def test_jitter_depends_only_on_the_seed_and_the_chain():
    noise = adapted.jitter(6, 4, 2.0, seed=3, first_chain=0, dtype=np.float64)
    assert noise.shape == (6, 4) and np.all(np.abs(noise) < 2.0) and noise.std() > 0.5
    np.testing.assert_array_equal(adapted.jitter(2, 4, 2.0, 3, 4, np.float64), noise[4:])
    assert not np.allclose(adapted.jitter(6, 4, 2.0, 4, 0, np.float64), noise)
    start = np.zeros((4, 2))
    jittered = _plain(start=start, num_warmup=0, num_samples=3, jitter=2.0)
    two = _plain(start=start[2:], num_warmup=0, num_samples=3, jitter=2.0, first_chain=2)
    np.testing.assert_array_equal(two.samples, jittered.samples[:, 2:])
    plain = _plain(start=start, num_warmup=0, num_samples=3)
    assert not np.allclose(jittered.samples, plain.samples)


def test_jitter_moves_the_unconstrained_start():
    state = model.warmup("numpy", num_warmup=1, jitter=1.0, max_tree_depth=1)
    assert np.all(np.asarray(state.position["sigma"]) > 0)  # still inside the constraint


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"num_warmup": 10}, ValueError, "pass num_warmup=0"),
        ({"num_warmup": 0, "jitter": 1.0}, ValueError, "jitter= moves a new start"),
        ({"num_warmup": 0, "first_draw": 3}, ValueError, "leave first_chain= and first_draw="),
        ({"num_warmup": 0, "transforms": {"sigma": nuts.transforms.softplus()}}, ValueError,
         "keeps the transforms"),
    ],
)  # fmt: skip
def test_resuming_asks_for_nothing_new(options, error, words):
    state = model.warmup("numpy", num_warmup=5, max_tree_depth=2)
    with pytest.raises(error, match=words):
        model.run("numpy", state, num_samples=2, max_tree_depth=2, **options)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"inverse_mass": np.ones(3)}, r"inverse_mass must be .* shape \(2,\), or \(3, 2\)"),
        ({"inverse_mass": np.ones((2, 3))}, "inverse_mass must be"),
        ({"inverse_mass": np.array([1.0, -1.0])}, "positive and finite"),
        ({"adapt_mass": "full"}, "adapt_mass must be one of"),
        ({"thin": 0}, "thin must be an integer >= 1"),
        ({"jitter": -1.0}, "jitter must be a finite number >= 0"),
    ],
)
def test_bad_adaptation_settings_are_clear_errors(options, words):
    with pytest.raises(ValueError, match=words):
        _plain(num_samples=2, num_warmup=0, **options)


def test_warmup_draws_no_samples():
    with pytest.raises(TypeError, match="num_samples= belongs to nuts.sample"):
        nuts.warmup(None, np.zeros((2, 2)), num_warmup=5, num_samples=5, seed=0,
                    value_and_grad=_gaussian)  # fmt: skip
    with pytest.raises(ValueError, match="num_warmup must be at least 1"):
        nuts.warmup(None, np.zeros((2, 2)), num_warmup=0, seed=0, value_and_grad=_gaussian)


# -- a dense mass matrix ----------------------------------------------------------------

COV = np.array([[4.0, 1.98, 0.0], [1.98, 1.0, 0.0], [0.0, 0.0, 0.25]])  # correlation 0.99
PRECISION = np.linalg.inv(COV)


def _correlated(x):
    return -0.5 * x @ PRECISION @ x, -PRECISION @ x


@functools.cache
def _correlated_target(backend_name: str):
    if backend_name == "jax":
        import jax.numpy as jnp

        return lambda x: -0.5 * jnp.sum(x * jnp.matmul(PRECISION, x))
    import tensorflow as tf

    precision = tf.constant(PRECISION)
    return lambda x: -0.5 * tf.reduce_sum(x * tf.linalg.matvec(precision, x))


def _dense_run(backend_name: str, state=None, **options):
    settings = dict(num_samples=200, num_warmup=300, seed=2, max_tree_depth=8,
                    adapt_mass="dense", progress_bar=False)  # fmt: skip
    settings.update(options)
    if state is None:
        state = np.random.RandomState(1).normal(size=(4, 3))
    if backend_name == "numpy":
        return nuts.sample(None, state, value_and_grad=_correlated, **settings)
    return nuts.sample(_correlated_target(backend_name), state,
                       backend=model.backend(backend_name), **settings)  # fmt: skip


def test_the_dense_metric_draws_momenta_of_the_inverse_covariance():
    from pcbatch.mcmc import metric

    lower = metric.cholesky(COV)
    np.testing.assert_allclose(lower, np.linalg.cholesky(COV), rtol=1e-12)
    np.testing.assert_allclose(metric.lower_inverse(lower), np.linalg.inv(lower), rtol=1e-12)
    dense = metric.dense(COV)
    # p = momentum(z) is linear in z: its covariance is A A^T for the matrix A of the map.
    columns = np.stack([metric.momentum(e, dense) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(columns @ columns.T, PRECISION, rtol=1e-9, atol=1e-9)
    p = np.array([0.3, -1.0, 2.0])
    np.testing.assert_allclose(metric.velocity(p, dense), COV @ p)
    np.testing.assert_allclose(metric.kinetic_energy(p, dense), 0.5 * p @ COV @ p)


#: the dense-adaptation run: 80 draws after 120 of warmup in the fast tier (its last
#: window is shorter, so its estimate is rougher: variances within 60%, an ESS above 200,
#: where a diagonal metric gets 104 to 135), 200 after 300 in the slow tier
DENSE_RUN, DENSE_RTOL, DENSE_ESS = tiers.pick(
    ({"num_warmup": 120, "num_samples": 80}, 0.6, 200), ({}, 0.4, 300)
)


@pytest.mark.parametrize(
    "backend_name",
    [pytest.param(b, marks=() if b == "numpy" else tiers.slow) for b in backends.BACKEND_NAMES],
)
def test_dense_adaptation_learns_the_covariance_and_samples_it(backend_name):
    result = _dense_run(backend_name, **DENSE_RUN)
    assert result.inverse_mass.shape == (4, 3, 3)
    # Stan's regularized estimate from the last window (about 125 draws in the slow tier):
    # near the covariance, its strong correlation found.
    variances = np.diagonal(result.inverse_mass, axis1=1, axis2=2)
    np.testing.assert_allclose(variances, np.broadcast_to(np.diag(COV), (4, 3)), rtol=DENSE_RTOL)
    correlation = result.inverse_mass[:, 0, 1] / np.sqrt(variances[:, 0] * variances[:, 1])
    assert np.all(correlation > 0.95), correlation
    draws = np.asarray(result.samples)
    ess = diagnostics.effective_sample_size(draws)
    # a diagonal metric gets about a fifth of the slow tier's, half of the fast tier's
    assert np.all(ess > DENSE_ESS), ess
    sd = np.sqrt(np.diag(COV))
    np.testing.assert_array_less(np.abs(draws.mean(axis=(0, 1))), Z * sd / np.sqrt(ess))
    np.testing.assert_array_less(
        np.abs(draws.std(axis=(0, 1)) - sd), 2 * Z * sd / np.sqrt(2 * ess)
    )


@tiers.slow  # continuation is checked fast with a diagonal mass
def test_a_dense_run_continues_exactly_and_keeps_its_matrix():
    whole = _dense_run("numpy", num_warmup=WARMUP, num_samples=2 * N, max_tree_depth=5)
    first = _dense_run("numpy", num_warmup=WARMUP, num_samples=N, max_tree_depth=5)
    second = _dense_run("numpy", first.state, num_warmup=0, num_samples=N, max_tree_depth=5)
    # NumPy's matrix products round differently as the chains running together change
    # (the calls end at different times): equal up to that.
    np.testing.assert_allclose(second.samples, whole.samples[N:], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(second.inverse_mass, whole.inverse_mass, rtol=1e-9)
    assert first.state.dense and first.state.inverse_mass.shape == (4, 3, 3)


def test_a_dense_inverse_mass_given_stays_with_adapt_mass_off():
    per_chain = np.stack([COV * (k + 1) for k in range(4)])
    result = _dense_run("numpy", num_warmup=50, num_samples=5, adapt_mass="off",
                        inverse_mass=per_chain)  # fmt: skip
    np.testing.assert_allclose(result.inverse_mass, per_chain, rtol=1e-12)
    shared = _dense_run("numpy", num_warmup=0, num_samples=5, adapt_mass="off", inverse_mass=COV)
    assert shared.inverse_mass.shape == (4, 3, 3)


def test_a_dense_metric_takes_a_state_of_any_shape():
    def value_and_grad(x):  # [2, 2] per chain
        return -0.5 * np.sum(x * x), -x

    result = nuts.sample(None, np.zeros((3, 2, 2)), value_and_grad=value_and_grad,
                         num_samples=5, num_warmup=30, seed=0, adapt_mass="dense",
                         progress_bar=False)  # fmt: skip
    assert result.samples.shape == (5, 3, 2, 2) and result.inverse_mass.shape == (3, 4, 4)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"inverse_mass": COV}, "adapt_mass='diagonal' would replace it"),
        ({"inverse_mass": -COV, "adapt_mass": "off"}, "positive definite"),
        ({"inverse_mass": COV + np.triu(COV, 1), "adapt_mass": "off"}, "symmetric"),
    ],
)
def test_bad_dense_inverse_masses_are_clear_errors(options, words):
    with pytest.raises(ValueError, match=words):
        _dense_run("numpy", num_warmup=0, num_samples=2, **{"adapt_mass": "diagonal", **options})
