"""Per-draw statistics, ArviZ conversion and rank-normalized diagnostics (issue 26 item 5).

The per-draw energies are checked against a direct computation: a chain's momentum is
a pure function of (seed, chain, draw) (`pcbatch.mcmc.random`), so the Hamiltonian at
the start of each draw, and with one leapfrog step per draw the whole trajectory, can
be recomputed on the host from the draws themselves.
"""

from __future__ import annotations

import logging
import statistics
import warnings

import numpy as np
import pytest

from pcbatch.mcmc import arviz_data, diagnostics, nuts, special
from pcbatch.mcmc import random as rnd
from tests import backends, tiers
from tests.mcmc.test_nuts import SHORT, run

MEAN, SD = 1.0, 2.0  # tests/mcmc/targets.py's normal_1d


def _log_density(x):
    return -0.5 * ((np.asarray(x, np.float64) - MEAN) / SD) ** 2


def _gradient(x):
    return -(x - MEAN) / SD**2


def _momentum(seed, chain, draw, inv_mass):
    z = rnd.normal(np.uint32(seed), np.uint32(chain), np.uint32(draw), rnd.MOMENTUM, 1, np.float64)
    return z / np.sqrt(inv_mass)


def _start_energy(q, seed, chain, draw, inv_mass):
    """The Hamiltonian at a draw's start: at the previous draw, with the draw's momentum."""
    p = _momentum(seed, chain, draw, inv_mass)
    return 0.5 * np.sum(p * p * inv_mass) - _log_density(q).sum()


# -- per-draw statistics ---------------------------------------------------------


@pytest.mark.parametrize("backend", tiers.numpy_fast(backends.BACKEND_NAMES))
def test_each_draw_reports_its_log_density_and_energy(backend):
    # The SHORT run of test_nuts (3 chains, 10 warmup + 20 draws), warmup draws kept: the
    # same compiled program, which keeping the warmup draws does not change.
    result = run("normal_1d", backend, save_warmup=True, **SHORT)
    warm = result.warmup_draws
    assert warm.samples.shape == (10, 3, 1) and warm.energy.shape == (10, 3)
    draws = np.concatenate([np.asarray(warm.samples), np.asarray(result.samples)])[..., 0]
    start = np.random.RandomState(3).normal(size=(1, 3))  # test_nuts's initial state
    previous = np.concatenate([start, draws[:-1]])
    energy = np.concatenate([warm.energy, result.energy])
    energy_error = np.concatenate([warm.energy_error, result.energy_error])
    np.testing.assert_allclose(
        np.concatenate([warm.log_density, result.log_density]), _log_density(draws), rtol=1e-12
    )
    # After warmup the mass matrix is fixed: the start of each kept draw is known.
    inv_mass = result.inverse_mass[:, 0]
    for d in range(10, 30):
        for c in range(3):
            h0 = _start_energy(previous[d, c], 1, c, d, inv_mass[c])
            np.testing.assert_allclose(energy[d, c] - energy_error[d, c], h0, rtol=1e-10)
    for field in ("energy_error", "max_energy_error"):
        assert np.isfinite(getattr(warm, field)).all() and np.isfinite(getattr(result, field)).all()
    # The largest error over the trajectory bounds the error at the draw.
    for draws_ in (warm, result):
        assert np.all(np.abs(draws_.max_energy_error) >= np.abs(draws_.energy_error))
    # The kept draws are those of a run without the warmup's.
    plain = run("normal_1d", backend, **SHORT)
    np.testing.assert_array_equal(np.asarray(plain.samples), np.asarray(result.samples))
    np.testing.assert_array_equal(plain.energy, result.energy)
    assert plain.warmup_draws is None


@pytest.mark.parametrize(
    "backend",
    [pytest.param(b, marks=() if b == "numpy" else tiers.slow) for b in backends.BACKEND_NAMES],
)
def test_with_one_leapfrog_step_the_energies_are_the_direct_computation(backend):
    # max_tree_depth=1: each draw takes one leapfrog step, forward or backward by its
    # direction coin, and proposes the new state or keeps the old one.
    step, seed = 0.9, 4
    result = run(
        "normal_1d", backend, num_samples=12, num_warmup=0, chains=3, seed=seed,
        step_size=step, max_tree_depth=1,
    )  # fmt: skip
    assert np.all(result.num_leapfrogs == 1)
    draws = np.asarray(result.samples)[..., 0]
    previous = np.concatenate([np.random.RandomState(3).normal(size=(1, 3)), draws[:-1]])
    moved = 0
    for d in range(12):
        for c in range(3):
            q = previous[d, c]
            p = _momentum(seed, c, d, 1.0)[0]
            h0 = 0.5 * p * p - _log_density(q)
            coin = rnd.uniform(np.uint32(seed), np.uint32(c), np.uint32(d), rnd.DIRECTION, 0,
                               np.float64)  # fmt: skip
            eps = np.sign(coin - 0.5) * step
            p_half = p + 0.5 * eps * _gradient(q)
            q1 = q + eps * p_half
            p1 = p_half + 0.5 * eps * _gradient(q1)
            h1 = 0.5 * p1 * p1 - _log_density(q1)
            took_step = abs(draws[d, c] - q1) < 1e-12
            assert took_step or draws[d, c] == q
            moved += took_step
            expected = h1 if took_step else h0
            np.testing.assert_allclose(result.energy[d, c], expected, rtol=1e-10)
            np.testing.assert_allclose(result.energy_error[d, c], expected - h0, atol=1e-10)
            np.testing.assert_allclose(result.max_energy_error[d, c], h1 - h0, atol=1e-10)
            np.testing.assert_allclose(result.log_density[d, c], _log_density(draws[d, c]))
    assert 0 < moved < 36  # both cases were checked


def test_a_divergent_draw_reports_its_energy_error():
    # Step 30 on a unit Gaussian: the first leapfrog step's energy error is in the
    # hundreds of thousands, so every draw diverges at once and stays where it was.
    vg = lambda x: (-0.5 * np.sum(x * x), -x)
    result = nuts.sample(
        None, np.ones((2, 1)), num_samples=3, num_warmup=0, seed=0, step_size=30.0,
        value_and_grad=vg, max_tree_depth=3, progress_bar=False,
    )  # fmt: skip
    assert result.diverging.all()
    assert np.all(result.max_energy_error > 1000.0)
    np.testing.assert_array_equal(result.energy_error, 0.0)  # the start state is kept


# -- ArviZ -----------------------------------------------------------------------


def _structured_run():
    def value_and_grad(params):
        mu, theta = params["mu"], params["theta"]
        logp = -0.5 * mu**2 - 0.5 * np.sum((theta - 1.0) ** 2)
        return logp, {"mu": -mu, "theta": 1.0 - theta}

    start = {"mu": np.zeros(4), "theta": np.zeros((4, 3))}
    return nuts.sample(
        None, start, value_and_grad=value_and_grad, num_samples=60, num_warmup=40, seed=2,
        max_tree_depth=5, progress_bar=False, save_warmup=True,
    )  # fmt: skip


def test_to_arviz_makes_what_arviz_expects():
    arviz = pytest.importorskip("arviz")
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    result = _structured_run()
    data = result.to_arviz(coords={"school": ["a", "b", "c"]}, dims={"theta": ["school"]})
    assert set(data.posterior.data_vars) == {"mu", "theta"}
    assert data.posterior["theta"].dims == ("chain", "draw", "school")
    assert list(data.posterior["theta"].coords["school"].values) == ["a", "b", "c"]
    np.testing.assert_array_equal(data.posterior["theta"].values[1], result.samples["theta"][:, 1])
    stats = data.sample_stats
    names = {"lp", "energy", "energy_error", "max_energy_error", "tree_depth", "n_steps",
             "diverging", "acceptance_rate", "step_size"}  # fmt: skip
    assert names <= set(stats.data_vars)
    np.testing.assert_array_equal(stats["energy"].values, result.energy.T)
    np.testing.assert_array_equal(stats["lp"].values, result.log_density.T)
    # Warmup draws kept: ArviZ's warmup groups.
    assert data.warmup_posterior["mu"].shape == (4, 40)
    np.testing.assert_array_equal(
        data.warmup_sample_stats["energy"].values, result.warmup_draws.energy.T
    )
    # What users call on it.
    summary = arviz.summary(data)
    assert list(summary.index) == ["mu", "theta[a]", "theta[b]", "theta[c]"]
    np.testing.assert_allclose(
        summary["ess_bulk"].values,
        np.round(np.concatenate([[result.ess()["mu"]], result.ess()["theta"]])),
        atol=1.0,
    )
    bfmi = arviz.bfmi(data)
    if arviz_data.major_version(arviz) >= 1:  # a DataTree of the energy's E-BFMI
        bfmi = bfmi["energy"].values
    np.testing.assert_allclose(bfmi, _bfmi(result.energy))
    np.testing.assert_allclose(result.bfmi(), bfmi, rtol=1e-12)
    axes = arviz.plot_energy(data)
    assert axes is not None
    matplotlib.pyplot.close("all")


def _bfmi(energy):
    """E-BFMI per chain: mean squared energy change over the energy's variance."""
    return np.mean(np.diff(energy, axis=0) ** 2, axis=0) / np.var(energy, axis=0, ddof=1)


def test_without_warmup_draws_there_are_no_warmup_groups():
    pytest.importorskip("arviz")
    data = _cached_plain().to_arviz()
    assert "warmup_posterior" not in arviz_data.group_names(data)
    assert data.posterior["x"].dims == ("chain", "draw", "x_dim_0")


def _cached_plain():
    return run("normal_1d", "numpy", **SHORT)


# -- rank-normalized ESS and R-hat -------------------------------------------------


def _arrays():
    """Draws [draws, chains, k] of every kind the diagnostics must handle."""
    rng = np.random.RandomState(0)
    cases = []
    for draws, chains in [(4, 1), (4, 2), (5, 3), (7, 2), (9, 4), (20, 1), (33, 3), (101, 4)]:
        walk = np.cumsum(rng.normal(size=(draws, chains, 1)), axis=0)  # mixes badly
        cases.append(np.concatenate([rng.normal(size=(draws, chains, 2)), walk], axis=2))
        cases.append(rng.randint(0, 3, size=(draws, chains, 2)).astype(float))  # ties
        cases.append(np.ones((draws, chains, 1)))  # constant
        cases.append(np.ones((draws, chains, 1)) * np.arange(chains)[:, None])  # each constant
        cases.append(np.where(rng.uniform(size=(draws, chains, 1)) < 0.1, np.nan, 0.0) + 1.0)
    cases.append(rng.normal(size=(3, 4, 1)))  # too few draws: NaN
    return cases


def _statistics(x, implementation):
    return {
        "bulk": diagnostics.ess(x, "bulk", implementation=implementation),
        "tail": diagnostics.ess(x, "tail", implementation=implementation),
        "rhat": diagnostics.rhat(x, implementation=implementation),
    }


def test_the_numpy_diagnostics_agree_with_arviz():
    pytest.importorskip("arviz")  # 0.x's functions, or 1.x's array interface
    logging.disable(logging.WARNING)  # ArviZ logs each NaN and short array
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # ArviZ's 0 / 0
            pairs = [(_statistics(x, "numpy"), _statistics(x, "arviz")) for x in _arrays()]
    finally:
        logging.disable(logging.NOTSET)
    compared = 0
    for ours, theirs in pairs:
        for name in ours:
            a, b = ours[name], theirs[name]
            assert a.shape == b.shape
            np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
            # Chains each constant at a different value: an infinite R-hat; ArviZ's is the
            # rounding of a zero within-chain variance (about 1e16).
            infinite = np.isinf(a)
            assert np.all(b[infinite] > 1e12)
            finite = ~np.isnan(a) & ~infinite
            np.testing.assert_allclose(a[finite], b[finite], rtol=1e-8, atol=0)
            compared += finite.sum()
    assert compared > 100


def test_without_arviz_the_numpy_code_runs(monkeypatch):
    x = np.random.RandomState(1).normal(size=(50, 4, 2))
    monkeypatch.setattr(diagnostics.importlib.util, "find_spec", lambda name: None)
    auto = _statistics(x, "auto")
    numpy_ = _statistics(x, "numpy")
    for name in auto:
        np.testing.assert_array_equal(auto[name], numpy_[name])
    # Independent draws: ESS near the draws' count, R-hat near 1.
    assert np.all((auto["bulk"] > 120) & (auto["bulk"] < 300))
    assert np.all(np.abs(auto["rhat"] - 1.0) < 0.05)


def test_bad_diagnostic_options_are_clear_errors():
    x = np.zeros((10, 2, 1))
    with pytest.raises(ValueError, match="method is 'bulk' or 'tail'"):
        diagnostics.ess(x, "mean")
    with pytest.raises(ValueError, match="implementation is one of"):
        diagnostics.rhat(x, implementation="scipy")
    with pytest.raises(ValueError, match=r"\[num_samples, num_chains"):
        diagnostics.ess(np.zeros(5))


def test_result_diagnostics_are_per_leaf():
    result = _cached_plain()
    draws = np.asarray(result.samples)
    np.testing.assert_array_equal(result.ess(), diagnostics.ess(draws))
    np.testing.assert_array_equal(result.rhat(), diagnostics.rhat(draws))
    classic = diagnostics.potential_scale_reduction(draws)
    np.testing.assert_array_equal(result.ess("classic"), diagnostics.effective_sample_size(draws))
    np.testing.assert_array_equal(result.rhat("classic"), classic)
    assert result.ess("tail", implementation="numpy").shape == (1,)


def test_the_normal_quantile_is_exact_to_double_precision():
    p = np.concatenate([np.logspace(-15, np.log10(0.5), 400), [0.3, 0.5, 0.7, 0.975]])
    p = np.concatenate([p, 1.0 - p[p < 0.4]])
    reference = np.array([statistics.NormalDist().inv_cdf(float(v)) for v in p])
    np.testing.assert_allclose(special.normal_quantile(p), reference, rtol=1e-12, atol=1e-14)



def test_bfmi_is_the_mean_squared_energy_step_over_its_variance_per_chain():
    energy = np.array([[1.0, 5.0], [3.0, 5.0], [2.0, 6.0], [4.0, 4.0]])
    steps = np.array([[4.0, 1.0, 4.0], [0.0, 1.0, 4.0]]).mean(axis=1)
    variances = np.array([np.var([1, 3, 2, 4], ddof=1), np.var([5, 5, 6, 4], ddof=1)])
    np.testing.assert_allclose(diagnostics.bfmi(energy), steps / variances, rtol=1e-15)
    assert np.isnan(diagnostics.bfmi(energy[:1])).all()
    with pytest.raises(ValueError, match="num_samples, num_chains"):
        diagnostics.bfmi(energy[:, 0])
