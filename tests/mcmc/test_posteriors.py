"""Correct posteriors on real models (issue 26, item 8): the validation models of
``benchmarks/posterior_models.py`` against their trusted answers, and simulation-based
calibration.

A mean (or sd) is accepted within Z combined standard errors: the run's, from its ESS,
and the reference's (0 for analytic answers). The fast tier checks the models
themselves (hand gradients against autodiff, one density on every array namespace, the
NumPyro reference against quadrature) and samples small versions on NumPy; the slow
tier samples every model on JAX and some on TensorFlow. The runs are seeded: a passing
test never flakes, and a correct sampler fails one check with probability below 1e-5.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from benchmarks import make_references, posterior_models
from tests import backends, tiers

Z = 5.0


def _max_z(name: str, result) -> float:
    return posterior_models.max_z(posterior_models.model(name), result.samples)


@functools.cache
def _run(name: str, library: str, chains: int, draws: int, warmup: int, **options):
    backend = backends.backend("jax") if library == "jax" else None  # float64
    return posterior_models.sample(
        name, library, chains=chains, draws=draws, warmup=warmup, seed=1, backend=backend,
        **options,
    )  # fmt: skip


# -- the models themselves (no sampling) -------------------------------------------


def _needs_data_package(name: str) -> None:
    if name == "logistic_iris":
        pytest.importorskip("sklearn", reason="the iris data comes with scikit-learn")


def _one_chain(name: str) -> dict:
    start = posterior_models.model(name).initial(3, np.random.RandomState(0))
    return {key: leaf[1] for key, leaf in start.items()}


WITH_GRADIENT = [
    "eight_schools_centered", "eight_schools_noncentered", "funnel_centered",
    "funnel_noncentered", "gaussian_1000d", "sbc_normal",
]  # fmt: skip


def test_the_listed_models_are_those_with_a_numpy_gradient():
    pytest.importorskip("sklearn")
    every = [*posterior_models.NAMES, "sbc_normal"]
    with_gradient = [n for n in every if posterior_models.model(n).value_and_grad is not None]
    assert with_gradient == WITH_GRADIENT


@pytest.mark.parametrize("name", WITH_GRADIENT)
def test_hand_written_gradients_match_jax_autodiff(name):
    jax = pytest.importorskip("jax")
    backends.backend("jax")  # float64
    chosen = posterior_models.model(name)
    params = _one_chain(name)
    logp, grad = chosen.value_and_grad(params, chosen.data)
    expected_logp, expected = jax.value_and_grad(
        lambda p: chosen.log_prob(p, chosen.data, jax.numpy)
    )({key: jax.numpy.asarray(leaf) for key, leaf in params.items()})
    np.testing.assert_allclose(logp, expected_logp, rtol=1e-12)
    for key in params:
        np.testing.assert_allclose(grad[key], expected[key], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", [*posterior_models.NAMES, "sbc_normal"])
@pytest.mark.parametrize("library", ["jax", "tensorflow"])
def test_each_log_density_is_the_same_on_every_array_namespace(name, library):
    # One source, three namespaces: a NumPy-only function (say, np.take) would break here.
    pytest.importorskip(library)
    _needs_data_package(name)
    chosen = posterior_models.model(name)
    params = _one_chain(name)
    expected = chosen.log_prob(params, chosen.data, np)
    if library == "jax":
        backends.backend("jax")
        import jax.numpy as xp
    else:
        import tensorflow.experimental.numpy as xp
    found = chosen.log_prob(
        {key: xp.asarray(leaf) for key, leaf in params.items()}, chosen.data, xp
    )
    np.testing.assert_allclose(np.asarray(found), expected, rtol=1e-12)


def test_the_eight_schools_reference_agrees_with_quadrature():
    # Two independent answers: NumPyro's NUTS on its own model, and a 2-D quadrature.
    stored = posterior_models.stored_references()["models"]["eight_schools"]
    exact = make_references.eight_schools_by_quadrature()
    reference = posterior_models.model("eight_schools_noncentered").reference()
    for quantity, moments in reference.items():
        found = exact[quantity]
        z_mean = np.abs(moments.mean - found["mean"]) / moments.mean_se
        z_sd = np.abs(moments.sd - found["sd"]) / moments.sd_se
        assert np.all(z_mean < Z) and np.all(z_sd < Z), (quantity, z_mean, z_sd)
    # The stored quadrature is today's.
    np.testing.assert_allclose(stored["quadrature"]["tau"]["mean"], exact["tau"]["mean"])


def test_the_references_say_how_they_were_made():
    stored = posterior_models.stored_references()
    assert set(stored["versions"]) == {"numpyro", "jax", "numpy"}
    for entry in stored["models"].values():
        assert entry["seed"] == make_references.SEED
        assert entry["command"].startswith("PYTHONPATH=. python benchmarks/make_references.py")
        for moments in entry["moments"].values():
            assert moments["ess_min"] > 10_000  # far more precise than any test's run


def test_z_scores_of_right_answers_are_standard_normal():
    # The standard errors (of means from the ESS, of sds from the squares' ESS) are right:
    # over 400 components of independent draws, the z-scores' mean square is about 1.
    rng = np.random.RandomState(3)
    scales = np.linspace(0.1, 10.0, 200)
    draws = rng.normal(size=(1000, 4, 200)) * scales
    z = posterior_models.z_scores(draws, posterior_models.Moments(np.zeros(200), scales))
    assert 0.85 < np.sqrt(np.mean(z**2)) < 1.15


def test_z_scores_catch_a_wrong_answer():
    # The comparison can fail: draws of N(0.3, 1) against a reference N(0, 1).
    draws = np.random.RandomState(0).normal(0.3, 1.0, size=(1000, 4, 1))
    right = posterior_models.Moments(np.full(1, 0.3), np.ones(1))
    wrong = posterior_models.Moments(np.zeros(1), np.ones(1))
    assert np.max(posterior_models.z_scores(draws, right)) < Z
    assert np.max(posterior_models.z_scores(draws, wrong)) > 3 * Z


# -- sampling: small versions on NumPy (fast), every model on JAX (slow) ------------


# The centered eight schools needs long runs at target_accept_prob=0.95 (its funnel):
# checked on JAX below (8 x 1000 draws); on NumPy 4 x 300 draws cost 275 CPU-s of CI.
@tiers.slow  # every model against its reference: slow tier
def test_eight_schools_noncentered_on_numpy_matches_the_reference():
    result = _run("eight_schools_noncentered", "numpy", 4, 100, 100)
    assert _max_z("eight_schools_noncentered", result) < Z


def test_the_centered_funnel_reports_divergences_on_numpy():
    # The neck of Neal's funnel is too narrow for a step size that suits its mouth:
    # trajectories into it diverge, and the result must say so; the non-centered funnel,
    # at the same step size, does not diverge. (Small: no warmup. After warmup the
    # divergences are rarer: the slow tier's JAX run checks those.)
    fixed = dict(step_size=1.0, warmup=0, max_tree_depth=6)
    centered = posterior_models.sample("funnel_centered", "numpy", chains=4, draws=30, **fixed)
    assert centered.diverging.dtype == bool and centered.diverging.sum() > 0
    straight = posterior_models.sample("funnel_noncentered", "numpy", chains=4, draws=30, **fixed)
    assert not straight.diverging.any()


# (model, chains, draws, warmup): enough draws for ESS in the hundreds.
JAX_RUNS = [
    ("eight_schools_centered", 8, 1000, 1000, {"target_accept_prob": 0.95}),
    ("eight_schools_noncentered", 8, 500, 500, {}),
    ("logistic_iris", 8, 500, 500, {}),
    ("funnel_noncentered", 8, 500, 500, {}),
    ("stochastic_volatility", 8, 300, 300, {}),  # smallest ESS about 430, max |z| 3.4
    ("gaussian_1000d", 8, 300, 300, {}),
]


@tiers.slow
@pytest.mark.parametrize(
    ("name", "chains", "draws", "warmup", "options"), JAX_RUNS, ids=[r[0] for r in JAX_RUNS]
)
def test_every_model_on_jax_matches_its_reference(name, chains, draws, warmup, options):
    pytest.importorskip("jax")
    _needs_data_package(name)
    result = _run(name, "jax", chains, draws, warmup, **options)
    assert _max_z(name, result) < Z
    found = posterior_models.model(name).quantities(
        {key: np.asarray(leaf) for key, leaf in result.samples.items()}
    )
    for quantity, draws_of in found.items():
        ess = posterior_models.diagnostics.effective_sample_size(draws_of)
        assert np.all(ess > 100), (quantity, ess)
        assert np.all(posterior_models.diagnostics.potential_scale_reduction(draws_of) < 1.05)


@tiers.slow
def test_the_centered_funnel_reports_divergences_on_jax():
    pytest.importorskip("jax")
    result = _run("funnel_centered", "jax", 8, 500, 500)
    assert result.diverging.sum() > 0
    assert _max_z("funnel_noncentered", _run("funnel_noncentered", "jax", 8, 500, 500)) < Z


@tiers.slow
@pytest.mark.parametrize("name", ["eight_schools_noncentered", "logistic_iris"])
def test_models_on_tensorflow_match_their_references(name):
    pytest.importorskip("tensorflow")
    _needs_data_package(name)
    result = _run(name, "tensorflow", 8, 500, 500)
    assert _max_z(name, result) < Z


# -- simulation-based calibration --------------------------------------------------

# A correct sampler fails a uniformity test at this p-value once in 10,000 seeds.
P_MIN = 1e-4


def test_the_uniformity_test_rejects_ranks_that_are_not_uniform():
    ranks = np.random.RandomState(0).randint(0, 20, size=200)
    assert posterior_models.chi_square_p_value(ranks, 20, 5) > P_MIN
    skewed = np.minimum(ranks, np.random.RandomState(1).randint(0, 20, size=200))
    assert posterior_models.chi_square_p_value(skewed, 20, 5) < 1e-6
    with pytest.raises(ValueError, match="odd and divide"):
        posterior_models.chi_square_p_value(ranks, 20, 4)


def test_the_chi_square_p_value_is_pearsons():
    stats = pytest.importorskip("scipy.stats")
    ranks = np.random.RandomState(2).randint(0, 21, size=60)
    counts = np.bincount(ranks * 7 // 21, minlength=7)
    expected = stats.chisquare(counts).pvalue
    assert posterior_models.chi_square_p_value(ranks, 21, 7) == pytest.approx(expected)


@tiers.slow  # per-chain data: test_nuts_models' fast test; SBC at size in the slow tier
def test_calibration_on_numpy_each_chain_with_its_own_data():
    calibration = posterior_models.run_sbc(
        "numpy", num_sets=16, draws=100, warmup=60, thin=5, bins=7, seed=0
    )
    assert calibration.ranks["mu"].shape == (16,)
    assert all(p > P_MIN for p in calibration.p_values.values()), calibration.p_values
    # Each chain fit its own data: the posterior means follow the simulated mu.
    truth, _ = posterior_models.sbc_simulate(16, seed=0)
    means = np.asarray(calibration.result.samples["mu"]).mean(axis=0)
    assert np.corrcoef(means, truth["mu"])[0, 1] > 0.8


@tiers.slow
def test_calibration_on_jax_over_200_data_sets():
    pytest.importorskip("jax")
    calibration = posterior_models.run_sbc(
        "jax", num_sets=200, draws=190, warmup=200, thin=10, bins=5, seed=0,
        backend=backends.backend("jax"),
    )  # fmt: skip
    assert all(p > P_MIN for p in calibration.p_values.values()), calibration.p_values
    # Against a wrong prior draw (shifted by half a prior sd) the same test fails.
    truth, _ = posterior_models.sbc_simulate(200, seed=0)
    shifted = posterior_models.sbc_ranks(
        truth["mu"] + 0.5, np.asarray(calibration.result.samples["mu"]), 10
    )
    assert posterior_models.chi_square_p_value(shifted, 20, 5) < P_MIN


# -- the benchmark, at a smoke run's size --------------------------------------------


@tiers.slow
def test_the_benchmark_prints_its_table(capsys):
    from benchmarks import posteriors

    posteriors.main([
        "--backends", "numpy", "--models", "funnel_noncentered", "logistic_iris",
        "--chains", "2", "--draws", "20", "--warmup", "20",
        "--sbc-sets", "10", "--sbc-ranks", "5", "--sbc-thin", "2",
    ])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["model", "backend", "chains", "draws", "max|z|"]
    assert lines[2].split()[:4] == ["funnel_noncentered", "numpy", "2", "20"]
    assert "skipped: no hand-written NumPy gradient" in lines[3]
    assert lines[4].startswith("SBC numpy      10 data sets as 10 chains")


def test_an_unknown_model_is_a_clear_error():
    with pytest.raises(ValueError, match="no validation model 'eight_schools'.*funnel_centered"):
        posterior_models.model("eight_schools")
