"""The No-U-Turn Sampler: statistics against known answers, on every backend.

Moment checks are scaled by the effective sample size: a mean is accepted within
5 standard errors (sd / sqrt(ESS)), so a correct sampler fails one check with
probability below 1e-6; the runs are seeded, so a passing test never flakes.
"""

from __future__ import annotations

import functools
import io
import sys

import numpy as np
import pytest

import pcbatch
from pcbatch import api
from pcbatch.mcmc import diagnostics, nuts, progress
from tests import backends, tiers
from tests.mcmc import targets

Z = 5.0  # standard errors allowed


@functools.cache
def _target(name: str) -> targets.Target:
    return {f.__name__: f for f in targets.ALL}[name]()


@functools.cache
def _log_prob_for(name: str, backend: str):
    """One function object per (target, backend), so compiled samplers are reused."""
    target = _target(name)
    if backend == "jax":
        import jax.numpy as jnp

        return lambda x: target.log_prob(x, jnp)
    import tensorflow.experimental.numpy as tnp

    return lambda x: target.log_prob(x, tnp)


def _initial(target: targets.Target, chains: int, backend: str):
    rng = np.random.RandomState(3)
    state = rng.normal(size=(chains, target.dim))
    if backend == "jax":
        import jax.numpy as jnp

        backends.backend("jax")  # float64, like the NumPy run
        return jnp.asarray(state)
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.constant(state)
    return state


def run(name: str, library: str, **options) -> nuts.NutsResult:
    target = _target(name)
    settings = dict(num_samples=400, num_warmup=300, seed=1, max_tree_depth=8)
    settings.update(options)
    chains = settings.pop("chains", 8)
    initial = _initial(target, chains, library)
    if library == "numpy":
        return nuts.sample(None, initial, value_and_grad=target.value_and_grad, **settings)
    return nuts.sample(_log_prob_for(name, library), initial, **settings)


_cached_run = functools.lru_cache(maxsize=None)(run)

TARGET_NAMES = [f.__name__ for f in targets.ALL]

# The long runs, every target on every backend, are the slow tier's; the fast tier checks
# moments in test_nuts_models (a dict state with data, on NumPy), and JAX's and
# TensorFlow's draws, gradients and seeds in the shorter tests below.
FAST_MOMENTS: set = set()
MOMENT_CASES = [
    pytest.param(
        name, backend, id=f"{name}-{backend}",
        marks=() if (name, backend) in FAST_MOMENTS else tiers.slow,
    )
    for backend in backends.BACKEND_NAMES
    for name in TARGET_NAMES
]
#: the run whose shapes are checked: 10 dimensions in the slow tier
SHAPES_TARGET = tiers.pick("normal_1d", "correlated_gaussian")
#: and its length: 100 draws after 100 of warmup in the fast tier; the slow tier's is the
#: moments test's run (400 after 300), reused
SHAPES_RUN = tiers.pick({"num_samples": 100, "num_warmup": 100}, {})
SHAPES_DRAWS = SHAPES_RUN.get("num_samples", 400)


@pytest.mark.parametrize(("name", "backend"), MOMENT_CASES)
def test_moments_match_the_known_answer(name, backend):
    target = _target(name)
    result = _cached_run(name, backend)
    draws = target.statistic(np.asarray(result.samples))
    ess = diagnostics.effective_sample_size(draws)
    assert np.all(ess > 200), f"ESS {ess}"
    assert np.all(diagnostics.potential_scale_reduction(draws) < 1.05)
    mean, sd = draws.mean(axis=(0, 1)), draws.std(axis=(0, 1))
    np.testing.assert_array_less(np.abs(mean - target.mean), Z * target.sd / np.sqrt(ess))
    # The sd's standard error is about sd / sqrt(2 ESS) for near-Gaussian draws; allow
    # twice that for the skewed ones.
    np.testing.assert_array_less(np.abs(sd - target.sd), 2 * Z * target.sd / np.sqrt(2 * ess))
    assert not np.asarray(result.diverging).any()


@pytest.mark.parametrize(
    "backend",
    [pytest.param(b, marks=() if b == "numpy" else tiers.slow) for b in backends.BACKEND_NAMES],
)
def test_results_have_the_documented_shapes_and_statistics(backend):
    result = _cached_run(SHAPES_TARGET, backend, **SHAPES_RUN)
    assert tuple(result.samples.shape) == (SHAPES_DRAWS, 8, _target(SHAPES_TARGET).dim)
    for stat in (result.num_leapfrogs, result.tree_depth, result.diverging, result.accept_prob):
        assert stat.shape == (SHAPES_DRAWS, 8)
    assert result.step_size.shape == (SHAPES_DRAWS, 8)
    # Warmup is over: one adapted step size per chain, for every draw.
    assert np.all(result.step_size == result.step_size[:1])
    assert 0.6 < result.accept_prob.mean() < 1.0
    assert np.all(result.num_leapfrogs <= 2**result.tree_depth - 1)
    assert 0.0 < result.utilization <= 1.0
    assert 0.0 < result.lockstep_utilization <= 1.0
    assert result.leapfrog_steps >= result.num_leapfrogs.sum()


def _uphill(x):
    return np.sum(x), np.ones_like(x)


def test_a_trajectory_that_never_turns_takes_two_to_the_depth_minus_one_steps():
    # A constant gradient accelerates forever: no U-turn, no energy error (leapfrog is
    # exact for a constant force), so every draw builds the deepest tree allowed.
    result = nuts.sample(
        None,
        np.zeros((5, 3)),
        num_samples=4,
        num_warmup=0,
        max_tree_depth=5,
        seed=0,
        value_and_grad=_uphill,
    )
    np.testing.assert_array_equal(result.num_leapfrogs, 2**5 - 1)
    np.testing.assert_array_equal(result.tree_depth, 5)
    assert not result.diverging.any()


@tiers.slow  # test_chain_independence's NumPy test checks it fast
def test_a_chain_does_not_depend_on_the_chains_beside_it():
    target = _target("correlated_gaussian")
    start = np.random.RandomState(0).normal(size=(6, target.dim))
    options = dict(num_samples=12, num_warmup=12, seed=5, value_and_grad=target.value_and_grad)
    six = nuts.sample(None, start, **options)
    two = nuts.sample(None, start[3:5], first_chain=3, **options)
    np.testing.assert_array_equal(six.samples[:, 3:5], two.samples)
    np.testing.assert_array_equal(six.num_leapfrogs[:, 3:5], two.num_leapfrogs)


@pytest.mark.parametrize("backend", backends.BACKEND_NAMES)
def test_same_seed_same_draws_other_seed_other_draws(backend):
    first = run("normal_1d", backend, num_samples=20, num_warmup=10, chains=3)
    again = run("normal_1d", backend, num_samples=20, num_warmup=10, chains=3)
    other = run("normal_1d", backend, num_samples=20, num_warmup=10, chains=3, seed=2)
    np.testing.assert_array_equal(np.asarray(first.samples), np.asarray(again.samples))
    assert not np.array_equal(np.asarray(first.samples), np.asarray(other.samples))


@tiers.slow  # test_nuts_adaptation's continuation tests check it fast
def test_continuing_a_run_uses_fresh_draws():
    options = dict(
        num_samples=10, num_warmup=0, seed=4, value_and_grad=_target("normal_1d").value_and_grad
    )
    start = np.zeros((3, 1))
    whole = nuts.sample(None, start, **dict(options, num_samples=20))
    first = nuts.sample(None, start, **options)
    second = nuts.sample(None, np.asarray(first.samples[-1]), first_draw=10, **options)
    np.testing.assert_array_equal(whole.samples[:10], first.samples)
    np.testing.assert_array_equal(whole.samples[10:], second.samples)


def test_the_transition_kernel_steps_like_the_sampler():
    vg = _target("normal_1d").value_and_grad
    kernel = nuts.NoUTurnSampler(step_size=0.5, max_tree_depth=6, seed=9, value_and_grad=vg)
    state, results = np.zeros((4, 1)), kernel.bootstrap_results(np.zeros((4, 1)))
    states = []
    for _ in range(5):
        state, results = kernel.one_step(state, results)
        states.append(state)
    whole = nuts.sample(
        None,
        np.zeros((4, 1)),
        num_samples=5,
        num_warmup=0,
        step_size=0.5,
        max_tree_depth=6,
        seed=9,
        value_and_grad=vg,
    )
    np.testing.assert_array_equal(np.stack(states), whole.samples)
    assert results.draw == 5 and results.last.num_leapfrogs.shape == (1, 4)


def test_numpy_needs_value_and_grad():
    with pytest.raises(TypeError, match="value_and_grad="):
        nuts.sample(
            lambda x: -np.sum(x * x), np.zeros((2, 2)), num_samples=3, num_warmup=0, seed=0
        )


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"num_samples": 0, "num_warmup": 0}, "num_samples"),
        ({"num_samples": 3, "num_warmup": -1}, "num_warmup"),
        ({"num_samples": 3, "num_warmup": 0, "max_tree_depth": 40}, "max_tree_depth"),
    ],
)
def test_bad_settings_are_clear_errors(options, words):
    with pytest.raises(ValueError, match=words):
        nuts.sample(None, np.zeros((2, 2)), seed=0, value_and_grad=_uphill, **options)


def test_arviz_conversion():
    arviz = pytest.importorskip("arviz")
    result = _cached_run("normal_1d", "numpy", **SHAPES_RUN)  # the fast tier's shapes run
    data = result.to_arviz()
    assert isinstance(data, arviz.InferenceData)
    assert data.posterior["x"].shape == (8, SHAPES_DRAWS, 1)
    # Chains first, as ArviZ wants: chain 2's draws are the sampler's column 2.
    np.testing.assert_array_equal(data.posterior["x"].values[2], result.samples[:, 2])
    n_steps = data.sample_stats["n_steps"].values
    np.testing.assert_array_equal(n_steps[2], result.num_leapfrogs[:, 2])
    assert data.sample_stats["diverging"].shape == (8, SHAPES_DRAWS)


# -- the progress bar -------------------------------------------------------------

SHORT = dict(num_samples=20, num_warmup=10, chains=3)  # as test_same_seed_...: compiled once


@pytest.mark.parametrize("backend", tiers.one_compiled(backends.BACKEND_NAMES))
def test_the_progress_bar_counts_every_draw_and_changes_no_draw(backend, monkeypatch):
    pytest.importorskip("tqdm")
    bars = []

    class Recording(progress.DrawProgress):
        def __init__(self, total, **options):
            super().__init__(total, file=io.StringIO(), **options)
            bars.append(self)

        def close(self, finished):
            self.reported = self.count  # before the bar is completed
            super().close(finished)

    monkeypatch.setattr(progress, "DrawProgress", Recording)
    shown = run("normal_1d", backend, progress_bar=True, **SHORT)
    hidden = run("normal_1d", backend, progress_bar=False, **SHORT)
    for field in ("samples", "num_leapfrogs", "step_size", "accept_prob"):
        np.testing.assert_array_equal(
            np.asarray(getattr(shown, field)), np.asarray(getattr(hidden, field))
        )
    assert shown.gradient_evaluations == hidden.gradient_evaluations
    (bar,) = bars
    assert bar.total == 3 * (20 + 10)
    # Counted while running; TensorFlow's default, XLA, cannot call back: filled at the end.
    assert bar.reported == (0 if backend == "tensorflow" else bar.total)
    assert bar.bar.n == bar.total


def test_without_the_bar_the_program_has_no_callback():
    options = dict(num_samples=3, num_warmup=0, seed=0, value_and_grad=_uphill, max_tree_depth=3)
    with pcbatch.profile() as off:
        nuts.sample(None, np.zeros((2, 2)), progress_bar=False, **options)
    assert not any("host_callback" in label for label in off.primitive_counts)
    if progress.wanted(None) or not pytest.importorskip("tqdm"):
        return
    with pcbatch.profile() as on:
        nuts.sample(None, np.zeros((2, 2)), progress_bar=True, **options)
    assert on.primitive_lanes["host_callback(report_draws)"] == 2 * 3


def test_the_bar_is_on_by_default_only_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress.wanted(None)
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert progress.wanted(None)
    assert not progress.wanted(False)


def test_without_tqdm_the_bar_is_plain_lines(monkeypatch):
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: None)
    assert progress.wanted(True)
    assert not progress.wanted(None)  # the default needs tqdm
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    bar = progress.new_bar(200, "NUTS draws")
    assert isinstance(bar, progress.LineProgress)
    for _ in range(50):
        bar.add(4)
    bar.close(finished=True)
    lines = out.getvalue().splitlines()
    assert lines[0] == "NUTS draws: 0 of 200"
    assert [line.split(" (")[0] for line in lines[1:-1]] == [
        f"NUTS draws: {tenth}0%" for tenth in range(1, 10)
    ]
    assert lines[-1].startswith("NUTS draws: 100% (200 of 200) in ")


# -- backend= picks the gradient -------------------------------------------------


@pytest.mark.parametrize("backend", tiers.numpy_fast(backends.BACKEND_NAMES))
def test_backend_picks_the_gradient_whatever_the_initial_state(backend):
    numpy_start = np.random.RandomState(3).normal(size=(3, 1))  # as `_initial`
    settings = dict(num_samples=20, num_warmup=10, seed=1, max_tree_depth=8)
    if backend == "numpy":
        # A target alone cannot run on NumPy, even from another library's arrays.
        jax = pytest.importorskip("jax")
        with pytest.raises(TypeError, match="NumpyBackend needs value_and_grad="):
            nuts.sample(
                lambda x: -0.5 * (x * x).sum(),
                jax.numpy.asarray(numpy_start),
                backend=pcbatch.NumpyBackend(),
                **settings,
            )
        return
    native = run("normal_1d", backend, **SHORT)
    from_numpy = nuts.sample(
        _log_prob_for("normal_1d", backend),
        numpy_start,
        backend=api._shared_backend(backend),  # the native run's: its compiled program
        **settings,
    )
    np.testing.assert_array_equal(np.asarray(from_numpy.samples), np.asarray(native.samples))


def test_a_backend_that_is_not_one_is_a_clear_error():
    with pytest.raises(TypeError, match="not a pcbatch backend"):
        nuts.sample(
            lambda x: x, np.zeros((2, 1)), num_samples=2, num_warmup=0, seed=0, backend="jax"
        )
