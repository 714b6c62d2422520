"""Validation models for NUTS, each with a trusted answer (issue 26, item 8).

Every model has a log density written ONCE against an array namespace ``xp`` (NumPy,
``jax.numpy`` or ``tensorflow.experimental.numpy``), over ONE chain's unconstrained
parameters (a dict; a positive or bounded parameter is sampled on the real line, with
the log-det-Jacobian of its transform written out by hand), with its data as a
separate argument, so that the sampler's ``data=`` carries it. Some models also have
a hand-written NumPy gradient for the NumPy backend.

The answers are analytic where the posterior is known (Neal's funnel, the 1,000-D
Gaussian) and otherwise the moments of a long NumPyro run, stored in
``benchmarks/references/posteriors.json`` with its seed, command and versions
(``benchmarks/make_references.py`` writes it). The module lives in ``benchmarks/``
because the benchmark (``benchmarks/posteriors.py``) and the reference script are its
main users and the reference file sits beside them; the tests import it as
``benchmarks.posterior_models``, as ``tests/test_loops_benchmark.py`` imports
``benchmarks.loops``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
from collections.abc import Callable

import numpy as np

from pcbatch.mcmc import diagnostics

REFERENCE_FILE = pathlib.Path(__file__).parent / "references" / "posteriors.json"


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    log_prob: Callable  # (params, data, xp) -> log density of ONE chain's params
    initial: Callable  # (num_chains, rng) -> dict of arrays [num_chains, ...]
    data: dict | None
    quantities: Callable  # samples (dict of [draws, chains, ...]) -> {name: [draws, chains, k]}
    reference: Callable  # () -> {name: Moments}
    value_and_grad: Callable | None = None  # NumPy: (params, data) -> (logp, gradient)
    divergent: bool = False  # known to diverge (a funnel): its moments are not checked
    max_tree_depth: int = 10


@dataclasses.dataclass(frozen=True)
class Moments:
    """A quantity's reference mean and sd, with their standard errors (0: exact)."""

    mean: np.ndarray
    sd: np.ndarray | None  # None: the sd is not checked (its estimate is too noisy)
    mean_se: np.ndarray | float = 0.0
    sd_se: np.ndarray | float = 0.0


def _normal(x, scale, xp_sum):
    """Sum of N(x; 0, scale) log densities, up to the constant."""
    return -0.5 * xp_sum((x / scale) ** 2)


def _flat(draws) -> np.ndarray:
    """[draws, chains, ...] -> [draws, chains, k]."""
    draws = np.asarray(draws, dtype=np.float64)
    return draws.reshape(draws.shape[:2] + (-1,))


# -- eight schools (Rubin 1981; Gelman et al., BDA3 section 5.5) -----------------------

SCHOOLS = {
    "y": np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
    "sigma": np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]),
}
# mu ~ N(0, 5), tau ~ HalfCauchy(5), theta_j ~ N(mu, tau), y_j ~ N(theta_j, sigma_j);
# tau is sampled as log_tau, so log p gains log_tau (the Jacobian of tau = exp(log_tau)).
MU_SCALE, TAU_SCALE = 5.0, 5.0


def _half_cauchy_on_log(log_tau, xp):
    """log HalfCauchy(exp(log_tau); TAU_SCALE) + log_tau, up to the constant."""
    tau = xp.exp(log_tau)
    return -xp.log1p((tau / TAU_SCALE) ** 2) + log_tau


def _schools_centered(params, data, xp):
    mu, log_tau, theta = params["mu"], params["log_tau"], params["theta"]
    tau = xp.exp(log_tau)
    prior = _normal(mu, MU_SCALE, xp.sum) + _half_cauchy_on_log(log_tau, xp)
    schools = _normal(theta - mu, tau, xp.sum) - 8.0 * log_tau
    return prior + schools + _normal(data["y"] - theta, data["sigma"], xp.sum)


def _schools_centered_grad(params, data):
    mu, log_tau, theta = params["mu"], params["log_tau"], params["theta"]
    tau2 = np.exp(2.0 * log_tau)
    ratio = tau2 / TAU_SCALE**2
    spread = theta - mu
    grad = {
        "mu": -mu / MU_SCALE**2 + np.sum(spread) / tau2,
        "log_tau": -2.0 * ratio / (1.0 + ratio) + 1.0 - 8.0 + np.sum(spread**2) / tau2,
        "theta": -spread / tau2 + (data["y"] - theta) / data["sigma"] ** 2,
    }
    return _schools_centered(params, data, np), grad


def _schools_noncentered(params, data, xp):
    mu, log_tau, eta = params["mu"], params["log_tau"], params["eta"]
    theta = mu + xp.exp(log_tau) * eta
    prior = _normal(mu, MU_SCALE, xp.sum) + _half_cauchy_on_log(log_tau, xp)
    return prior + _normal(eta, 1.0, xp.sum) + _normal(data["y"] - theta, data["sigma"], xp.sum)


def _schools_noncentered_grad(params, data):
    mu, log_tau, eta = params["mu"], params["log_tau"], params["eta"]
    tau = np.exp(log_tau)
    pull = (data["y"] - mu - tau * eta) / data["sigma"] ** 2  # d log p / d theta
    ratio = tau**2 / TAU_SCALE**2
    grad = {
        "mu": -mu / MU_SCALE**2 + np.sum(pull),
        "log_tau": -2.0 * ratio / (1.0 + ratio) + 1.0 + tau * np.sum(pull * eta),
        "eta": -eta + tau * pull,
    }
    return _schools_noncentered(params, data, np), grad


def _schools_initial(latent: str):
    def initial(chains, rng):
        return {
            "mu": rng.normal(size=chains),
            "log_tau": rng.normal(size=chains),
            latent: rng.normal(size=(chains, 8)),
        }

    return initial


def _schools_quantities(samples):
    tau = np.exp(np.asarray(samples["log_tau"], dtype=np.float64))
    if "theta" in samples:
        theta = samples["theta"]
    else:
        theta = samples["mu"][..., None] + tau[..., None] * samples["eta"]
    return {"mu": _flat(samples["mu"]), "tau": _flat(tau), "theta": _flat(theta)}


# -- hierarchical logistic regression: iris, versicolor against virginica ---------------


@functools.cache
def iris_data() -> dict:
    """Fisher's iris (UCI; shipped by scikit-learn): the 100 versicolor and virginica
    flowers, their four measurements standardized, label 1 for virginica."""
    try:
        from sklearn.datasets import load_iris
    except ImportError:
        raise ImportError(
            "the logistic_iris model's data comes with scikit-learn: "
            "pip install scikit-learn (or 'pcbatch[bench]')"
        ) from None
    features, labels = load_iris(return_X_y=True)
    keep = labels > 0
    x = features[keep]
    return {"x": (x - x.mean(axis=0)) / x.std(axis=0), "y": (labels[keep] == 2) * 1.0}


# alpha ~ N(0, 2.5), tau ~ HalfNormal(1), beta_k ~ N(0, tau), y_i ~ Bernoulli(logit^-1(z_i))
ALPHA_SCALE = 2.5


def _logistic(params, data, xp):
    alpha, beta, log_tau = params["alpha"], params["beta"], params["log_tau"]
    tau = xp.exp(log_tau)
    prior = _normal(alpha, ALPHA_SCALE, xp.sum) - 0.5 * tau**2 + log_tau  # tau's Jacobian
    prior = prior + _normal(beta, tau, xp.sum) - 4.0 * log_tau
    z = alpha + xp.sum(data["x"] * beta, axis=-1)
    return prior + xp.sum(data["y"] * z - xp.logaddexp(0.0, z))


def _logistic_initial(chains, rng):
    return {
        "alpha": rng.normal(size=chains),
        "beta": rng.normal(size=(chains, 4)),
        "log_tau": rng.normal(size=chains),
    }


def _logistic_quantities(samples):
    tau = np.exp(np.asarray(samples["log_tau"], dtype=np.float64))
    return {"alpha": _flat(samples["alpha"]), "beta": _flat(samples["beta"]), "tau": _flat(tau)}


# -- Neal's funnel (Neal 2003): v ~ N(0, 3), x_i ~ N(0, exp(v / 2)), 9 of them ------------

FUNNEL_DIM = 9


def _funnel_centered(params, data, xp):
    v, x = params["v"], params["x"]
    return _normal(v, 3.0, xp.sum) - 0.5 * xp.sum(x**2) * xp.exp(-v) - 0.5 * FUNNEL_DIM * v


def _funnel_centered_grad(params, data):
    v, x = params["v"], params["x"]
    scaled = np.exp(-v)
    grad = {"v": -v / 9.0 + 0.5 * np.sum(x**2) * scaled - 0.5 * FUNNEL_DIM, "x": -x * scaled}
    return _funnel_centered(params, data, np), grad


def _funnel_noncentered(params, data, xp):
    return _normal(params["v"], 3.0, xp.sum) + _normal(params["z"], 1.0, xp.sum)


def _funnel_noncentered_grad(params, data):
    grad = {"v": -params["v"] / 9.0, "z": -params["z"]}
    return _funnel_noncentered(params, data, np), grad


def _funnel_initial(latent: str):
    def initial(chains, rng):
        return {"v": rng.normal(size=chains), latent: rng.normal(size=(chains, FUNNEL_DIM))}

    return initial


def _funnel_quantities(samples):
    v = np.asarray(samples["v"], dtype=np.float64)
    x = samples["x"] if "x" in samples else np.exp(v / 2.0)[..., None] * samples["z"]
    return {"v": _flat(v), "x": _flat(x)}


def _funnel_reference():
    # x's sd is exp(9/4), but its fourth moment (3 e^18) makes a sample sd useless.
    return {
        "v": Moments(np.zeros(1), np.full(1, 3.0)),
        "x": Moments(np.zeros(FUNNEL_DIM), None),
    }


# -- stochastic volatility (simulated returns; after Kim, Shephard and Chib 1998) ----------
# h_t = mu + x_t, x_1 ~ N(0, sigma / sqrt(1 - phi^2)), x_t = phi x_{t-1} + N(0, sigma);
# y_t ~ N(0, exp(h_t / 2)). Priors: mu ~ N(0, 2), phi ~ Uniform(0, 1), sigma ~
# HalfNormal(1). Sampled: mu, logit(phi), log(sigma) and the standardized innovations e
# (non-centered: x = sigma * M(phi) (c * e), M[t, s] = phi^(t - s) for s <= t, and c
# scales the first innovation to the stationary sd).

SV_STEPS = 100
_LAGS = np.subtract.outer(np.arange(SV_STEPS), np.arange(SV_STEPS))
SV_LAGS = np.maximum(_LAGS, 0).astype(np.float64)
SV_LOWER = (_LAGS >= 0) * 1.0
SV_FIRST = (np.arange(SV_STEPS) == 0) * 1.0


@functools.cache
def sv_data() -> dict:
    """100 returns simulated from the model (mu -1, phi 0.9, sigma 0.5, seed 11)."""
    rng = np.random.RandomState(11)
    mu, phi, sigma = -1.0, 0.9, 0.5
    x = np.empty(SV_STEPS)
    x[0] = rng.normal() * sigma / np.sqrt(1.0 - phi**2)
    for t in range(1, SV_STEPS):
        x[t] = phi * x[t - 1] + sigma * rng.normal()
    return {"y": rng.normal(size=SV_STEPS) * np.exp((mu + x) / 2.0)}


def _sv_volatility(params, xp):
    """(h, phi, sigma) of ONE chain's parameters."""
    phi = 1.0 / (1.0 + xp.exp(-params["logit_phi"]))
    sigma = xp.exp(params["log_sigma"])
    first = 1.0 / xp.sqrt(1.0 - phi**2)
    scaled = params["e"] * (1.0 + SV_FIRST * (first - 1.0))
    x = sigma * xp.sum(phi**SV_LAGS * SV_LOWER * scaled, axis=-1)
    return params["mu"] + x, phi, sigma


def _sv(params, data, xp):
    h, phi, sigma = _sv_volatility(params, xp)
    # Jacobians: phi = logistic(logit_phi): log phi + log(1 - phi); sigma: log_sigma.
    prior = _normal(params["mu"], 2.0, xp.sum) + xp.log(phi) + xp.log(1.0 - phi)
    prior = prior - 0.5 * sigma**2 + params["log_sigma"] + _normal(params["e"], 1.0, xp.sum)
    return prior + xp.sum(-0.5 * h - 0.5 * data["y"] ** 2 * xp.exp(-h))


def _sv_initial(chains, rng):
    return {
        "mu": rng.normal(size=chains) - 1.0,
        "logit_phi": 2.0 + 0.5 * rng.normal(size=chains),
        "log_sigma": -1.5 + 0.5 * rng.normal(size=chains),
        "e": rng.normal(size=(chains, SV_STEPS)),
    }


def _sv_quantities(samples):
    phi = 1.0 / (1.0 + np.exp(-np.asarray(samples["logit_phi"], dtype=np.float64)))
    sigma = np.exp(np.asarray(samples["log_sigma"], dtype=np.float64))
    return {"mu": _flat(samples["mu"]), "phi": _flat(phi), "sigma": _flat(sigma)}


# -- a 1,000-D Gaussian with scales from 0.1 to 10 (analytic) ----------------------------

GAUSSIAN_DIM = 1000
GAUSSIAN_MEAN = np.linspace(-3.0, 3.0, GAUSSIAN_DIM)
GAUSSIAN_SD = np.logspace(-1.0, 1.0, GAUSSIAN_DIM)


def _gaussian(params, data, xp):
    return _normal(params["x"] - GAUSSIAN_MEAN, GAUSSIAN_SD, xp.sum)


def _gaussian_grad(params, data):
    return _gaussian(params, data, np), {"x": -(params["x"] - GAUSSIAN_MEAN) / GAUSSIAN_SD**2}


def _gaussian_initial(chains, rng):
    return {"x": rng.normal(size=(chains, GAUSSIAN_DIM))}


# -- references ----------------------------------------------------------------------


@functools.cache
def stored_references() -> dict:
    return json.loads(REFERENCE_FILE.read_text())


def _stored(name: str) -> Callable:
    def reference():
        entry = stored_references()["models"][name]["moments"]
        return {
            quantity: Moments(*(np.asarray(m[key]) for key in ("mean", "sd", "mean_se", "sd_se")))
            for quantity, m in entry.items()
        }

    return reference


def _schools(centered: bool) -> Model:
    # Both parameterizations have one posterior: the reference is the non-centered run's.
    return Model(
        name="eight_schools_centered" if centered else "eight_schools_noncentered",
        log_prob=_schools_centered if centered else _schools_noncentered,
        initial=_schools_initial("theta" if centered else "eta"),
        data=SCHOOLS,
        quantities=_schools_quantities,
        reference=_stored("eight_schools"),
        value_and_grad=_schools_centered_grad if centered else _schools_noncentered_grad,
    )


def _funnel(centered: bool) -> Model:
    return Model(
        name="funnel_centered" if centered else "funnel_noncentered",
        log_prob=_funnel_centered if centered else _funnel_noncentered,
        initial=_funnel_initial("x" if centered else "z"),
        data=None,
        quantities=_funnel_quantities,
        reference=_funnel_reference,
        value_and_grad=_funnel_centered_grad if centered else _funnel_noncentered_grad,
        divergent=centered,
    )


def model(name: str) -> Model:
    """The validation model called ``name`` (one of `NAMES`, or ``"sbc_normal"``)."""
    if name in ("eight_schools_centered", "eight_schools_noncentered"):
        return _schools(centered=name == "eight_schools_centered")
    if name in ("funnel_centered", "funnel_noncentered"):
        return _funnel(centered=name == "funnel_centered")
    if name == "logistic_iris":
        return Model(
            name, _logistic, _logistic_initial, iris_data(), _logistic_quantities,
            _stored("logistic_iris"),
        )  # fmt: skip
    if name == "stochastic_volatility":
        return Model(
            name, _sv, _sv_initial, sv_data(), _sv_quantities, _stored("stochastic_volatility")
        )
    if name == "gaussian_1000d":
        return Model(
            name, _gaussian, _gaussian_initial, None, lambda s: {"x": _flat(s["x"])},
            lambda: {"x": Moments(GAUSSIAN_MEAN, GAUSSIAN_SD)}, _gaussian_grad,
        )  # fmt: skip
    if name == "sbc_normal":  # simulation-based calibration's model: no reference
        truth, data = sbc_simulate(1, seed=0)
        return Model(
            name, _sbc, lambda chains, rng: sbc_simulate(chains, rng.randint(2**31))[0],
            {"y": data["y"][0]}, lambda s: s, lambda: {}, _sbc_grad,
        )  # fmt: skip
    raise ValueError(f"no validation model {name!r}; the models are {NAMES}")


NAMES = [
    "eight_schools_centered",
    "eight_schools_noncentered",
    "logistic_iris",
    "funnel_centered",
    "funnel_noncentered",
    "stochastic_volatility",
    "gaussian_1000d",
]


# -- comparing draws with a reference --------------------------------------------------


def moments(draws: np.ndarray) -> Moments:
    """Mean and sd of ``draws`` [draws, chains, k], with standard errors from the ESS (of
    the draws for the mean, of their squared deviations for the variance)."""
    mean = draws.mean(axis=(0, 1))
    sd = draws.std(axis=(0, 1))
    squares = (draws - mean) ** 2
    ess = diagnostics.effective_sample_size(draws)
    variance_se = squares.std(axis=(0, 1)) / np.sqrt(diagnostics.effective_sample_size(squares))
    return Moments(mean, sd, sd / np.sqrt(ess), variance_se / (2.0 * sd))


def z_scores(draws: np.ndarray, reference: Moments) -> np.ndarray:
    """|estimate - reference| over the combined standard error, means then sds."""
    found = moments(draws)
    z = [np.abs(found.mean - reference.mean) / np.hypot(found.mean_se, reference.mean_se)]
    if reference.sd is not None:
        z.append(np.abs(found.sd - reference.sd) / np.hypot(found.sd_se, reference.sd_se))
    return np.concatenate(z)


def all_z(model: Model, samples) -> np.ndarray:
    """The z-score of every checked mean and sd of the model's quantities. For a correct
    sampler they are about standard normal: their root mean square is near 1."""
    reference = model.reference()
    found = model.quantities({key: np.asarray(leaf) for key, leaf in samples.items()})
    return np.concatenate([z_scores(found[name], reference[name]) for name in reference])


def max_z(model: Model, samples) -> float:
    """The largest z-score over every checked mean and sd of the model's quantities."""
    return float(np.max(all_z(model, samples)))


# -- running a model ---------------------------------------------------------------------


@functools.cache
def target(name: str, library: str) -> Callable:
    """The model's log density for ``library`` (jax or tensorflow; on numpy its log density
    and gradient), one function object per (model, library), so that the sampler's
    compiled program is reused across runs."""
    chosen = model(name)
    if library == "numpy":
        function = chosen.value_and_grad
        if function is None:
            raise ValueError(f"{name} has no NumPy gradient: run it on jax or tensorflow")
    elif library == "jax":
        import jax.numpy as jnp

        function = functools.partial(chosen.log_prob, xp=jnp)
    elif library == "tensorflow":
        import tensorflow.experimental.numpy as tnp

        function = functools.partial(chosen.log_prob, xp=tnp)
    else:
        raise ValueError(f"library must be numpy, jax or tensorflow, got {library!r}")
    if chosen.data is None:  # the sampler calls the target with the state alone
        return lambda params: function(params, None)
    return lambda params, data: function(params, data)


def default_backend(library: str):
    """None on NumPy; JAX in float64 (as NumPyro's references); TensorFlow with XLA."""
    if library == "numpy":
        return None
    if library == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    from pcbatch import api

    return api._shared_backend(library)


def sample(name: str, library: str, *, chains: int, draws: int, warmup: int, seed: int = 0,
           backend=None, **options):  # fmt: skip
    """NUTS on model ``name`` with ``library``'s gradient (numpy: the hand-written one)."""
    from pcbatch.mcmc import nuts

    chosen = model(name)
    start = chosen.initial(chains, np.random.RandomState(seed))
    settings = dict(
        num_samples=draws, num_warmup=warmup, seed=seed, max_tree_depth=chosen.max_tree_depth,
        data=chosen.data, progress_bar=False,
    )  # fmt: skip
    settings.update(options)
    if library == "numpy":
        return nuts.sample(None, start, value_and_grad=target(name, library), **settings)
    backend = backend if backend is not None else default_backend(library)
    return nuts.sample(target(name, library), start, backend=backend, **settings)


# -- simulation-based calibration (Talts et al. 2018) ------------------------------------
# mu ~ N(0, 1), log_sigma ~ N(0, 0.5), y_i ~ N(mu, exp(log_sigma)), 10 observations. Each
# simulated data set is one chain's data (data_chain_axis=True): if the sampler is right,
# the rank of the prior draw among its chain's (thinned) posterior draws is uniform.

SBC_OBSERVATIONS = 10
SBC_LOG_SIGMA_SCALE = 0.5


def _sbc(params, data, xp):
    mu, log_sigma = params["mu"], params["log_sigma"]
    prior = _normal(mu, 1.0, xp.sum) + _normal(log_sigma, SBC_LOG_SIGMA_SCALE, xp.sum)
    spread = xp.sum((data["y"] - mu) ** 2)
    return prior - SBC_OBSERVATIONS * log_sigma - 0.5 * spread * xp.exp(-2.0 * log_sigma)


def _sbc_grad(params, data):
    mu, log_sigma = params["mu"], params["log_sigma"]
    precision = np.exp(-2.0 * log_sigma)
    residual = data["y"] - mu
    grad = {
        "mu": -mu + precision * np.sum(residual),
        "log_sigma": -log_sigma / SBC_LOG_SIGMA_SCALE**2 - SBC_OBSERVATIONS
        + precision * np.sum(residual**2),
    }  # fmt: skip
    return _sbc(params, data, np), grad


def sbc_simulate(num_sets: int, seed: int) -> tuple:
    """Prior draws {"mu": [S], "log_sigma": [S]} and one data set per draw {"y": [S, 10]}."""
    rng = np.random.RandomState(seed)
    truth = {
        "mu": rng.normal(size=num_sets),
        "log_sigma": SBC_LOG_SIGMA_SCALE * rng.normal(size=num_sets),
    }
    noise = rng.normal(size=(num_sets, SBC_OBSERVATIONS))
    y = truth["mu"][:, None] + np.exp(truth["log_sigma"])[:, None] * noise
    return truth, {"y": y}


def sbc_ranks(truth: np.ndarray, draws: np.ndarray, thin: int) -> np.ndarray:
    """Per chain, how many of its draws [draws, chains] (every ``thin``-th, to make them
    nearly independent) lie below its prior draw: 0 to draws // thin."""
    kept = np.asarray(draws)[thin - 1 :: thin]
    return np.sum(kept < truth, axis=0)


def chi_square_p_value(ranks: np.ndarray, num_ranks: int, bins: int) -> float:
    """P-value of Pearson's test that ``ranks`` (0 to num_ranks - 1) are uniform, over
    ``bins`` equal bins (``bins`` odd and dividing ``num_ranks``: the degrees of freedom
    are even, where the chi-square survival function is a finite sum)."""
    if num_ranks % bins or bins % 2 == 0:
        raise ValueError(f"bins ({bins}) must be odd and divide num_ranks ({num_ranks})")
    counts = np.bincount(np.asarray(ranks) * bins // num_ranks, minlength=bins)
    expected = len(ranks) / bins
    half = 0.5 * np.sum((counts - expected) ** 2 / expected)
    terms = [half**i / np.prod(np.arange(1.0, i + 1.0)) for i in range((bins - 1) // 2)]
    return float(np.exp(-half) * np.sum(terms))


@dataclasses.dataclass(frozen=True)
class Calibration:
    ranks: dict  # parameter -> [num_sets] ranks
    p_values: dict  # parameter -> p-value of uniformity
    result: object  # the NutsResult


def run_sbc(library: str, *, num_sets: int, draws: int, warmup: int, thin: int, bins: int,
            seed: int = 0, backend=None) -> Calibration:  # fmt: skip
    """Simulation-based calibration: ``num_sets`` data sets as ``num_sets`` chains."""
    truth, data = sbc_simulate(num_sets, seed)
    result = sample(
        "sbc_normal", library, chains=num_sets, draws=draws, warmup=warmup, seed=seed,
        backend=backend, data=data, data_chain_axis=True,
    )  # fmt: skip
    num_ranks = draws // thin + 1
    ranks = {
        name: sbc_ranks(truth[name], np.asarray(result.samples[name]), thin) for name in truth
    }
    p_values = {name: chi_square_p_value(r, num_ranks, bins) for name, r in ranks.items()}
    return Calibration(ranks, p_values, result)
