"""NUTS programs a BlackJAX or NumPyro user would write, that the other tests do not
(issue 26 follow-up, item 4): transforms inside the user's ``jax.jit``, dense
adaptation with the warmup saved for ArviZ, a namedtuple state with per-chain data,
float32 on JAX without 64-bit mode, thinning across a resumed run, empty runs, a log
density of -inf in part of the space, a log density of the wrong shape, integer data,
and one chain.

Old code: a transformed state inside ``jax.jit`` or ``tf.function`` raised
``TracerArrayConversionError`` (the start's support check read the traced values); a log
density of shape ``(1,)`` or a gradient of the wrong shape was a ``TypeInferenceError``
about the sampler's internals (``warmup.pack``, ``run_chain.grad``); ``num_samples=2.5``
ran 2 draws; on NumPy a log density of -inf made the sampler warn "invalid value
encountered in subtract".

Each compiled backend's run is a compilation of its own (tens of seconds on a loaded
machine): where a test compiles a new program, its JAX and TensorFlow cases are in the
slow tier (`tiers.numpy_fast`), or one of them in turn where the feature is host code
(`tiers.one_compiled`; ``--every-backend`` runs both).
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from pcbatch.backends import batched_array
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from pcbatch.mcmc import arviz_data, constrained, gradients, nuts
from tests import backends, tiers
from tests.mcmc import constrained_target as model

ROOT = pathlib.Path(__file__).resolve().parents[2]
Z = 5.0
SHORT = dict(num_samples=4, num_warmup=4, max_tree_depth=3, progress_bar=False)


def _as(backend_name: str, tree):
    """``tree``'s NumPy leaves as the backend's arrays (JAX in float64, as the suite's)."""
    if backend_name == "numpy":
        return tree
    backends.backend(backend_name)
    if backend_name == "jax":
        import jax.numpy as jnp

        convert = jnp.asarray
    else:
        import tensorflow as tf

        convert = tf.constant
    if isinstance(tree, dict):
        return {name: convert(leaf) for name, leaf in tree.items()}
    if isinstance(tree, tuple):
        return type(tree)(*(convert(leaf) for leaf in tree))
    return convert(tree)


def _xp(backend_name: str):
    """(sum, gather) of the backend's array library, for a log density of ONE chain."""
    if backend_name == "jax":
        import jax.numpy as jnp

        return jnp.sum, jnp.take
    import tensorflow as tf

    return tf.reduce_sum, tf.gather


# -- transforms inside the user's jax.jit / tf.function ----------------------------------


@pytest.mark.parametrize("backend_name", backends.COMPILED_NAMES)
def test_a_traced_constrained_start_is_mapped_to_unconstrained_space(backend_name):
    state = _as(backend_name, model.initial())
    constraints = constrained.build(model.TRANSFORMS, state)
    expected = constraints.unconstrain(state)
    if backend_name == "jax":
        import jax

        traced = jax.jit(constraints.unconstrain)(state)
    else:
        import tensorflow as tf

        traced = tf.function(constraints.unconstrain)(state)
    for name in ("sigma", "w"):
        np.testing.assert_allclose(np.asarray(traced[name]), np.asarray(expected[name]))


@tiers.slow
def test_structured_transforms_sample_inside_the_users_jit():
    jax = pytest.importorskip("jax")
    target = model.target("jax")

    @jax.jit
    def run(key, start):
        result = nuts.sample(target, start, seed=key, transforms=model.TRANSFORMS, **SHORT)
        return result.samples, result.diverging

    start = _as("jax", model.initial())
    key = jax.random.key(2)
    samples, _ = run(key, start)
    eager = nuts.sample(target, start, seed=key, transforms=model.TRANSFORMS, **SHORT)
    for name in ("sigma", "w"):
        np.testing.assert_array_equal(np.asarray(samples[name]), np.asarray(eager.samples[name]))
    assert np.all(np.asarray(samples["sigma"]) > 0)
    np.testing.assert_allclose(np.asarray(samples["w"]).sum(axis=-1), 1.0)
    # Traced, a start outside the support cannot be refused: it gives non-finite draws.
    outside = dict(start, sigma=-start["sigma"])
    samples, diverging = run(key, outside)
    assert not np.isfinite(np.asarray(samples["sigma"])).any() and np.asarray(diverging).all()
    # Traced, a nan start cannot be refused either: that chain's draws are not finite,
    # all its transitions divergent; the other chains' draws are the eager run's.
    nan_start = dict(start, sigma=start["sigma"].at[1].set(np.nan))
    samples, diverging = run(key, nan_start)
    assert np.isnan(np.asarray(samples["sigma"])[:, 1]).all() and np.asarray(diverging)[:, 1].all()
    others = np.arange(model.CHAINS) != 1
    np.testing.assert_array_equal(
        np.asarray(samples["w"])[:, others], np.asarray(eager.samples["w"])[:, others]
    )


@tiers.slow
def test_structured_transforms_sample_inside_tf_function():
    tf = pytest.importorskip("tensorflow")
    target = model.target("tensorflow")
    run = tf.function(
        lambda seed, start: nuts.sample(
            target, start, seed=seed, transforms=model.TRANSFORMS, **SHORT
        ).samples
    )
    start = _as("tensorflow", model.initial())
    samples = run(tf.constant(5), start)
    eager = nuts.sample(target, start, seed=5, transforms=model.TRANSFORMS, **SHORT)
    for name in ("sigma", "w"):
        np.testing.assert_array_equal(samples[name].numpy(), eager.samples[name].numpy())


# -- dense adaptation, warmup saved, ArviZ ----------------------------------------------


PRECISION = np.array([[2.0, 0.9, 0.3], [0.9, 1.0, 0.2], [0.3, 0.2, 0.5]])


def _dense_target(backend_name: str):
    """A correlated Gaussian over {"a": [2], "b": []}: a dense metric's model (NumPy:
    its value_and_grad)."""
    if backend_name == "numpy":

        def value_and_grad(params):
            x = np.concatenate([params["a"], params["b"][None]])
            grad = -PRECISION @ x
            return -0.5 * x @ PRECISION @ x, {"a": grad[:2], "b": grad[2]}

        return value_and_grad
    if backend_name == "jax":
        import jax.numpy as jnp

        def log_prob(params):
            x = jnp.concatenate([params["a"], params["b"][None]])
            return -0.5 * x @ jnp.asarray(PRECISION) @ x

        return log_prob
    import tensorflow as tf

    def tf_log_prob(params):
        x = tf.concat([params["a"], params["b"][None]], 0)
        return -0.5 * tf.reduce_sum(x * tf.linalg.matvec(tf.constant(PRECISION, x.dtype), x))

    return tf_log_prob


def _dense_run(backend_name: str, **options):
    start = _as(backend_name, {"a": np.zeros((3, 2)), "b": np.zeros(3)})
    settings = dict(num_samples=10, num_warmup=30, seed=6, max_tree_depth=4,
                    adapt_mass="dense", progress_bar=False)  # fmt: skip
    settings.update(options)
    target = _dense_target(backend_name)
    if backend_name == "numpy":
        return nuts.sample(None, start, value_and_grad=target, **settings)
    return nuts.sample(target, start, **settings)


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_dense_adaptation_with_the_warmup_saved_goes_to_arviz(backend_name):
    az = pytest.importorskip("arviz")
    result = _dense_run(backend_name, save_warmup=True)
    assert result.inverse_mass.shape == (3, 3, 3)  # dense: [chains, size, size]
    warmup = result.warmup_draws
    assert np.asarray(warmup.samples["a"]).shape == (30, 3, 2)
    assert np.asarray(warmup.samples["b"]).shape == (30, 3)
    assert warmup.energy.shape == warmup.step_size.shape == (30, 3)
    # Saving the warmup changes no kept draw.
    unsaved = _dense_run(backend_name)
    for name in ("a", "b"):
        np.testing.assert_array_equal(np.asarray(result.samples[name]),
                                      np.asarray(unsaved.samples[name]))  # fmt: skip
    np.testing.assert_array_equal(result.inverse_mass, unsaved.inverse_mass)
    data = result.to_arviz()
    for group in ("posterior", "sample_stats", "warmup_posterior", "warmup_sample_stats"):
        assert group in arviz_data.group_names(data)
    assert data.posterior["a"].shape == (3, 10, 2) and data.posterior["b"].shape == (3, 10)
    assert data.warmup_posterior["a"].shape == (3, 30, 2)
    assert data.warmup_sample_stats["energy"].shape == (3, 30)
    np.testing.assert_array_equal(data.warmup_posterior["b"].values,
                                  np.asarray(warmup.samples["b"]).T)  # fmt: skip
    bfmi = az.bfmi(data)  # ArviZ 1.x: a DataTree of the energy's E-BFMI per chain
    values = bfmi if arviz_data.major_version(az) == 0 else bfmi["energy"]
    assert np.asarray(values).shape == (3,) and np.all(np.isfinite(values))


# -- a namedtuple state, data with a chain axis ------------------------------------------

Params = collections.namedtuple("Params", ["mu", "tau"])


def _namedtuple_run(backend_name: str, y: np.ndarray) -> nuts.NutsResult:
    """``mu ~ N(y_c, 1)`` for chain ``c``'s row ``y_c``, ``tau ~ N(0, 1 / w)`` with ``w``
    shared; ``y`` has a chain axis, ``w`` not."""
    data = {"y": y, "w": np.array(2.0)}
    start = Params(np.zeros((3, 2)), np.zeros(3))
    options = dict(SHORT, num_samples=6, seed=8, data=data, data_chain_axis="y")
    if backend_name == "numpy":

        def value_and_grad(params, data):
            residual = data["y"] - params.mu
            logp = -0.5 * (np.sum(residual**2) + data["w"] * params.tau**2)
            return logp, Params(residual, -data["w"] * params.tau)

        return nuts.sample(None, start, value_and_grad=value_and_grad, **options)
    total, _ = _xp(backend_name)

    def log_prob(params, data):
        return -0.5 * (total((data["y"] - params.mu) ** 2) + data["w"] * params.tau**2)

    return nuts.sample(log_prob, _as(backend_name, start), **options)


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_a_namedtuple_state_with_per_chain_data(backend_name):
    y = np.arange(6.0).reshape(3, 2)
    result = _namedtuple_run(backend_name, y)
    assert isinstance(result.samples, Params) and result.names == ["mu", "tau"]
    assert np.asarray(result.samples.mu).shape == (6, 3, 2)
    assert np.asarray(result.samples.tau).shape == (6, 3)
    # Each chain sees its own row of y, and only it: a new row for chain 2 changes
    # chain 2's draws and no other's.
    other = _namedtuple_run(backend_name, y + np.array([[0.0], [0.0], [5.0]]))
    mu, other_mu = np.asarray(result.samples.mu), np.asarray(other.samples.mu)
    np.testing.assert_array_equal(mu[:, :2], other_mu[:, :2])
    assert not np.allclose(mu[:, 2], other_mu[:, 2])


# -- float32 on JAX without jax_enable_x64 -----------------------------------------------

_FLOAT32_RUN = """
import json
import numpy as np
import jax
import jax.numpy as jnp
from pcbatch.mcmc import nuts

assert not jax.config.jax_enable_x64

def log_prob(params, data):
    mu = jnp.take(params["mu"], data["group"])
    return -0.5 * jnp.sum((data["y"] - mu) ** 2) - 0.5 * params["tau"] ** 2

start = {"mu": jnp.zeros((3, 2), jnp.float32), "tau": jnp.ones(3, jnp.float32)}
data = {"y": np.array([0.5, 1.0, -1.0]), "group": np.array([0, 0, 1])}  # float64, int64
options = dict(data=data, seed=1, progress_bar=False, max_tree_depth=4)
result = nuts.sample(log_prob, start, transforms={"tau": nuts.transforms.positive()},
                     inverse_mass=np.array([1.0, 1.0, 0.5]), num_samples=20,
                     num_warmup=20, **options)
more = nuts.sample(log_prob, result.state, num_samples=5, num_warmup=0, **options)
statistics = ("step_size", "log_density", "energy", "accept_prob")
print(json.dumps({
    "samples": sorted({str(np.asarray(v).dtype) for v in result.samples.values()}),
    "statistics": sorted({str(getattr(result, name).dtype) for name in statistics}),
    "inverse_mass": str(result.inverse_mass.dtype),
    "resumed": str(np.asarray(more.samples["mu"]).dtype),
    "finite": bool(all(np.isfinite(np.asarray(v)).all() for v in result.samples.values())),
}))
"""


@tiers.slow
def test_float32_on_jax_without_x64_stays_float32():
    pytest.importorskip("jax")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("JAX_ENABLE_X64", None)
    done = subprocess.run(
        [sys.executable, "-c", _FLOAT32_RUN], env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"samples": ["float32"], "statistics": ["float32"],
                     "inverse_mass": "float32", "resumed": "float32", "finite": True}


# -- thinning across a resumed run ------------------------------------------------------


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_thinned_draws_of_a_resumed_run_are_those_of_one_run(backend_name):
    whole = model.run(backend_name, num_warmup=20, num_samples=12, thin=3)
    first = model.run(backend_name, num_warmup=20, num_samples=6, thin=3)
    second = model.run(backend_name, first.state, num_warmup=0, num_samples=6, thin=3)
    for name in ("sigma", "w"):
        joined = np.concatenate([np.asarray(first.samples[name]), np.asarray(second.samples[name])])
        np.testing.assert_array_equal(joined, np.asarray(whole.samples[name]))
    np.testing.assert_array_equal(np.concatenate([first.step_size, second.step_size]),
                                  whole.step_size)  # fmt: skip
    assert second.state.next_draw == whole.state.next_draw == 20 + 12 * 3


# -- empty runs ------------------------------------------------------------------------


def _gaussian(x):
    return -0.5 * np.sum(x * x), -x


@pytest.mark.parametrize(
    "lengths, words",
    [
        ({"num_samples": 0, "num_warmup": 10}, "num_samples must be at least 1.*nuts.warmup"),
        ({"num_samples": 0, "num_warmup": 0}, "num_samples must be at least 1"),
        ({"num_samples": 2.5, "num_warmup": 0}, "num_samples must be an integer, got 2.5"),
        ({"num_samples": 3, "num_warmup": 1.5}, "num_warmup must be an integer"),
        ({"num_samples": True, "num_warmup": 0}, "num_samples must be an integer"),
    ],
)
def test_a_run_without_draws_or_of_fractional_length_is_a_clear_error(lengths, words):
    with pytest.raises((ValueError, TypeError), match=f"nuts.sample: {words}"):
        nuts.sample(None, np.zeros((2, 2)), value_and_grad=_gaussian, seed=0, **lengths)


def test_no_warmup_samples_at_the_given_step_size():
    result = nuts.sample(None, np.zeros((2, 2)), value_and_grad=_gaussian, seed=0,
                         num_samples=3, num_warmup=0, step_size=0.25, max_tree_depth=3)  # fmt: skip
    assert result.samples.shape == (3, 2, 2) and result.warmup_draws is None
    np.testing.assert_array_equal(result.step_size, 0.25)
    np.testing.assert_array_equal(result.inverse_mass, 1.0)
    assert result.state.next_draw == 3


# -- a log density of -inf in part of the space -----------------------------------------

#: x[0] > -0.5: a standard normal truncated there (its mean phi(a) / (1 - Phi(a)))
WALL = -0.5
TRUNCATED_MEAN = 0.5092


def _walled_run(backend_name: str, num_samples: int, num_warmup: int) -> nuts.NutsResult:
    options = dict(num_samples=num_samples, num_warmup=num_warmup, seed=0, max_tree_depth=5,
                   progress_bar=False)  # fmt: skip
    if backend_name == "numpy":

        def value_and_grad(x):
            inside = x[0] > WALL
            return np.where(inside, -0.5 * np.sum(x * x), -np.inf), np.where(inside, -x, 0.0)

        return nuts.sample(None, np.zeros((4, 2)), value_and_grad=value_and_grad, **options)
    total, _ = _xp(backend_name)
    if backend_name == "jax":
        import jax.numpy as jnp

        def log_prob(x):
            return jnp.where(x[0] > WALL, -0.5 * total(x * x), -jnp.inf)
    else:
        import tensorflow as tf

        def log_prob(x):
            inf = tf.constant(-np.inf, x.dtype)
            return tf.where(x[0] > WALL, -0.5 * total(x * x), inf)

    return nuts.sample(log_prob, _as(backend_name, np.zeros((4, 2))), **options)


@pytest.mark.parametrize("backend_name", tiers.numpy_fast(backends.BACKEND_NAMES))
def test_a_log_density_of_minus_infinity_is_a_divergence_and_no_draw_goes_there(backend_name):
    with warnings.catch_warnings():
        # A trajectory's first state at -inf has no weight: the sampler's NumPy code
        # warned "invalid value encountered in subtract" (-inf - -inf) for it.
        warnings.simplefilter("error", RuntimeWarning)
        result = _walled_run(backend_name, num_samples=30, num_warmup=30)
    samples = np.asarray(result.samples)
    assert np.isfinite(samples).all() and np.isfinite(result.log_density).all()
    assert np.all(samples[..., 0] > WALL)
    assert result.diverging.any()  # trajectories that reached the wall say so
    assert np.all(result.max_energy_error[result.diverging] > 1000)
    assert np.isfinite(result.energy).all() and np.isfinite(result.step_size).all()


@tiers.slow
def test_a_walled_normal_has_the_truncated_normal_mean():
    result = _walled_run("numpy", num_samples=250, num_warmup=200)
    draws = np.asarray(result.samples)[..., 0]
    ess = result.ess(method="bulk")[0]
    assert ess > 100
    assert abs(draws.mean() - TRUNCATED_MEAN) < Z * 0.7 / np.sqrt(ess)  # sd about 0.7


# -- a log density or gradient of the wrong shape ---------------------------------------


@pytest.mark.parametrize("backend_name", backends.BACKEND_NAMES)
@pytest.mark.parametrize("shape, advice", [((1,), r"take its element \(\[0\]\)"),
                                           ((2,), "sum its terms")])  # fmt: skip
def test_a_log_density_that_is_no_scalar_is_a_clear_error(backend_name, shape, advice):
    who = "value_and_grad" if backend_name == "numpy" else "target_log_prob_fn"
    if backend_name == "numpy":

        def function(x):
            terms = -0.5 * x * x
            return (np.sum(terms, keepdims=True) if shape == (1,) else terms), -x

    else:
        total, _ = _xp(backend_name)

        def function(x):
            terms = -0.5 * x * x
            return total(terms, keepdims=True) if shape == (1,) else terms

    arguments = dict(SHORT, seed=0, backend=backends.backend(backend_name))
    if backend_name == "numpy":
        arguments["value_and_grad"] = function
    target = None if backend_name == "numpy" else function
    words = f"nuts.sample: {who} returned a log density of shape {shape} for ONE state"
    with pytest.raises(gradients.LogDensityShapeError, match=f"{re.escape(words)}.*{advice}"):
        nuts.sample(target, np.zeros((2, 2)), **arguments)


@pytest.mark.parametrize("backend_name", backends.BACKEND_NAMES)
def test_a_start_with_nan_or_inf_is_refused_naming_chains_and_leaf(backend_name):
    """Old code ran it: the chain's draws were inf or nan, nothing said (NumPy)."""
    options = dict(SHORT, seed=0, backend=backends.backend(backend_name))
    if backend_name == "numpy":
        options["value_and_grad"] = lambda q: (-0.5 * np.sum(q["a"] ** 2), {"a": -q["a"]})
    total = None if backend_name == "numpy" else _xp(backend_name)[0]
    target = None if total is None else (lambda q: -0.5 * total(q["a"] ** 2))
    array = np.zeros((4, 2))
    array[1, 0], array[3, 1] = np.nan, -np.inf
    with pytest.raises(ValueError, match=r"initial_state\['a'\] is not finite .* chains \[1, 3\]"):
        nuts.sample(target, _as(backend_name, {"a": array}), **options)
    if backend_name == "numpy":
        options["value_and_grad"] = lambda q: (-0.5 * np.sum(q**2), -q)
    else:
        target = lambda q: -0.5 * total(q**2)  # noqa: E731
    with pytest.raises(ValueError, match=r"initial_state is not finite .* chains \[1, 3\]"):
        nuts.sample(target, _as(backend_name, array), **options)


def test_a_gradient_of_another_shape_is_a_clear_error():
    def value_and_grad(x):
        return -0.5 * np.sum(x * x), np.zeros(3)

    words = r"value_and_grad returned a gradient of shape \(3,\) for ONE state of shape \(2,\)"
    with pytest.raises(ValueError, match=words):
        nuts.sample(None, np.zeros((2, 2)), value_and_grad=value_and_grad, seed=0, **SHORT)


# -- integer data ------------------------------------------------------------------------

#: six observations in three groups; mu_k ~ N(0, 10^2), y_i ~ N(mu_{group_i}, 1)
Y = np.array([1.0, 2.0, 0.5, -1.0, 3.0, 2.5])
GROUP = np.array([0, 0, 1, 1, 2, 2])
PRIOR_PRECISION = 0.01


def _grouped_run(backend_name: str, num_samples: int, num_warmup: int) -> nuts.NutsResult:
    data = {"y": Y, "group": GROUP}  # the group index: integers
    options = dict(num_samples=num_samples, num_warmup=num_warmup, seed=1, max_tree_depth=5,
                   progress_bar=False, data=data)  # fmt: skip
    start = {"mu": np.zeros((2, 3))}
    if backend_name == "numpy":

        def value_and_grad(params, data):
            mu, group = params["mu"], data["group"]
            onehot = (group[:, None] == np.arange(3)).astype(mu.dtype)
            residual = data["y"] - onehot @ mu
            logp = -0.5 * np.sum(residual**2) - 0.5 * PRIOR_PRECISION * np.sum(mu**2)
            return logp, {"mu": residual @ onehot - PRIOR_PRECISION * mu}

        return nuts.sample(None, start, value_and_grad=value_and_grad, **options)
    total, gather = _xp(backend_name)

    def log_prob(params, data):
        mu = params["mu"]
        residual = data["y"] - gather(mu, data["group"])
        return -0.5 * total(residual**2) - 0.5 * PRIOR_PRECISION * total(mu**2)

    return nuts.sample(log_prob, _as(backend_name, start), **options)


@pytest.mark.parametrize("backend_name", tiers.numpy_fast(backends.BACKEND_NAMES))
def test_integer_data_indexes_the_groups(backend_name):
    # 80 draws after 80 of warmup in the fast tier: each mu's ESS above 150 on NumPy
    draws, warmup = tiers.pick((80, 80), (150, 100))
    result = _grouped_run(backend_name, num_samples=draws, num_warmup=warmup)
    mu = np.asarray(result.samples["mu"])
    counts = np.bincount(GROUP)
    precision = counts + PRIOR_PRECISION
    mean = np.bincount(GROUP, weights=Y) / precision
    ess = result.ess(method="bulk")["mu"]
    assert np.all(ess > 50), ess
    error = np.abs(mu.mean(axis=(0, 1)) - mean)
    np.testing.assert_array_less(error, Z * precision**-0.5 / np.sqrt(ess))


def _gathered_value_and_grad(params, data):
    """The log density as a NumPy user writes it: ``mu[data["group"]]`` (a gather)."""
    mu, group = params["mu"], data["group"]
    residual = data["y"] - mu[group]
    grad = np.zeros_like(mu)
    np.add.at(grad, group, residual)
    logp = -0.5 * np.sum(residual**2) - 0.5 * PRIOR_PRECISION * np.sum(mu**2)
    return logp, {"mu": grad - PRIOR_PRECISION * mu}


def test_integer_data_as_an_index_is_batched_on_numpy():
    """Old code ran ``mu[data["group"]]`` one chain at a time (PerExampleFallbackWarning
    pointing at pcbatch's program.py); now one gather for all chains, the same draws."""
    options = dict(num_samples=20, num_warmup=20, seed=1, max_tree_depth=5, progress_bar=False,
                   data={"y": Y, "group": GROUP})  # fmt: skip
    start = {"mu": np.zeros((2, 3))}
    batched_array._warned.clear()  # a fallback warns once per primitive and process
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        gathered = nuts.sample(None, start, value_and_grad=_gathered_value_and_grad, **options)
    assert not [w for w in record if w.category is PerExampleFallbackWarning]
    onehot = _grouped_run("numpy", num_samples=20, num_warmup=20)
    np.testing.assert_allclose(gathered.samples["mu"], onehot.samples["mu"], rtol=1e-9)


def _branching_value_and_grad(q):
    if np.sum(q) > 100.0:  # Python control flow on a value: one chain at a time
        return -np.inf, -q
    return -0.5 * np.sum(q * q), -q


def test_a_log_density_that_falls_back_is_warned_about_at_the_users_line():
    batched_array._warned.clear()  # a fallback warns once per primitive and process
    with pytest.warns(PerExampleFallbackWarning) as record:
        nuts.sample(None, np.zeros((2, 2)), value_and_grad=_branching_value_and_grad, **SHORT,
                    seed=1)  # fmt: skip
    line = _branching_value_and_grad.__code__.co_firstlineno + 1
    assert {(w.filename, w.lineno) for w in record} == {(__file__, line)}
    assert f"{__file__}:{line}" in str(record[0].message)


# -- one chain -------------------------------------------------------------------------


@pytest.mark.parametrize("backend_name", tiers.one_compiled(backends.BACKEND_NAMES))
def test_one_chain_samples_resumes_and_steps(backend_name):
    start = {name: leaf[:1] for name, leaf in model.initial().items()}
    if backend_name == "numpy":
        target, options = None, dict(value_and_grad=model.value_and_grad)
    else:
        target, options = model.target(backend_name), {}
    options.update(seed=3, max_tree_depth=4, progress_bar=False, transforms=model.TRANSFORMS)
    start = _as(backend_name, start)
    result = nuts.sample(target, start, num_samples=8, num_warmup=10, **options)
    assert result.num_chains == 1 and np.asarray(result.samples["w"]).shape == (8, 1, 3)
    assert result.inverse_mass.shape == (1, 3) and result.step_size.shape == (8, 1)
    assert np.isnan(result.rhat()["sigma"])  # documented: R-hat needs 2 chains, as ArviZ's
    assert np.all(np.isfinite(result.ess()["w"]))
    options.pop("transforms")
    more = nuts.sample(target, result.state, num_samples=2, num_warmup=0, **options)
    assert np.asarray(more.samples["sigma"]).shape == (2, 1)
    kernel = nuts.NoUTurnSampler(target, step_size=0.3, max_tree_depth=3, seed=3,
                                 value_and_grad=options.get("value_and_grad"),
                                 transforms=model.TRANSFORMS)  # fmt: skip
    state, results = kernel.one_step(start, kernel.bootstrap_results(start))
    assert np.asarray(state["w"]).shape == (1, 3) and results.draw == 1
