"""`nuts.sample` and `NoUTurnSampler.one_step` inside the user's ``jax.jit`` and
``tf.function`` (issue 26, item 6): the same draws as an eager call with the same seed,
bit for bit; seeds as integers, traced integers or JAX keys; no retrace for new data.

Old code: the host-side parts of a run (``np.asarray`` of the outputs, ``seed % 2**32``
on the seed) raised under tracing (``TracerArrayConversionError``, ``OverflowError``,
``NotImplementedError``).

Each traced run compiles the whole sampler into the caller's program (tens of seconds
on a loaded machine): the fast tier keeps one JAX run and the refusals, the slow tier
the rest."""

from __future__ import annotations

import numpy as np
import pytest

from pcbatch.mcmc import nuts
from pcbatch.mcmc.tracing import integer_seed
from tests import tiers

RUN = dict(num_samples=4, num_warmup=4, max_tree_depth=3, progress_bar=False)
STATISTICS = ("tree_depth", "num_leapfrogs", "accept_prob", "step_size", "energy")


def _jax_target(x):
    import jax.numpy as jnp

    return -0.5 * jnp.sum(x * x)


def _tf_target(x):
    import tensorflow as tf

    return -0.5 * tf.reduce_sum(x * x)


def _same(actual, expected) -> None:
    np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected))


# -- JAX ----------------------------------------------------------------------------


def test_jit_gives_the_eager_draws_and_does_not_retrace_for_new_seeds_or_states():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    traces = []

    @jax.jit
    def run(seed, x0):
        traces.append(1)
        result = nuts.sample(_jax_target, x0, seed=seed, **RUN)
        return result.samples, {name: getattr(result, name) for name in STATISTICS}

    x0 = jnp.zeros((3, 2), jnp.float32)
    for seed, start in ((7, x0), (8, x0 + 1.0)):
        samples, statistics = run(jnp.asarray(seed, jnp.int32), start)
        eager = nuts.sample(_jax_target, start, seed=seed, **RUN)
        _same(samples, eager.samples)
        for name in STATISTICS:
            _same(statistics[name], getattr(eager, name))
    assert len(traces) == 1


@tiers.slow
def test_a_jax_key_seeds_the_run_as_its_integer_seed_inside_jit_and_eagerly():
    jax = pytest.importorskip("jax")
    x0 = jax.numpy.zeros((2, 3), jax.numpy.float32)
    run = jax.jit(lambda key, x0: nuts.sample(_jax_target, x0, seed=key, **RUN).samples)
    key = jax.random.key(3)
    expected = nuts.sample(_jax_target, x0, seed=integer_seed(key), **RUN).samples
    _same(run(key, x0), expected)
    _same(nuts.sample(_jax_target, x0, seed=key, **RUN).samples, expected)
    raw = jax.random.PRNGKey(3)  # a raw key: the same bits as its typed key's
    _same(nuts.sample(_jax_target, x0, seed=raw, **RUN).samples, expected)
    other = nuts.sample(_jax_target, x0, seed=jax.random.key(4), **RUN).samples
    assert not np.array_equal(np.asarray(other), np.asarray(expected))


@tiers.slow
def test_jit_with_a_structured_state_and_data_returns_the_traced_draws_and_no_counts():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def log_prob(params, data):
        return -0.5 * (params["mu"] ** 2 + jnp.sum((params["z"] - data) ** 2))

    state = {"mu": jnp.zeros(2, jnp.float32), "z": jnp.zeros((2, 3), jnp.float32)}
    seen = {}

    @jax.jit
    def run(seed, data):
        result = nuts.sample(log_prob, state, data=data, seed=seed, **RUN)
        seen.update(evaluations=result.gradient_evaluations, wall=result.wall_time,
                    utilization=result.utilization)
        return result.samples, result.inverse_mass

    data = jnp.ones(3, jnp.float32)
    samples, inverse_mass = run(jnp.asarray(5, jnp.int32), data)
    eager = nuts.sample(log_prob, state, data=data, seed=5, **RUN)
    _same(samples["z"], eager.samples["z"])
    _same(samples["mu"], eager.samples["mu"])
    _same(inverse_mass, eager.inverse_mass)
    # unknown while tracing
    assert seen == {"evaluations": None, "wall": None, "utilization": None}
    assert eager.gradient_evaluations > 0 and eager.wall_time > 0


@tiers.slow
def test_no_u_turn_sampler_one_step_inside_jit():
    jax = pytest.importorskip("jax")
    kernel = nuts.NoUTurnSampler(_jax_target, step_size=0.5, max_tree_depth=3, seed=2)
    x0 = jax.numpy.full((3, 2), 0.5, jax.numpy.float32)

    def step(x):
        return kernel.one_step(x, kernel.bootstrap_results(x))[0]

    _same(jax.jit(step)(x0), step(x0))


def test_jitter_with_a_traced_seed_is_refused_with_advice():
    jax = pytest.importorskip("jax")
    x0 = jax.numpy.zeros((2, 2), jax.numpy.float32)
    run = jax.jit(lambda seed: nuts.sample(_jax_target, x0, seed=seed, jitter=1.0, **RUN).samples)
    with pytest.raises(ValueError, match="jitter= needs a concrete seed"):
        run(jax.numpy.asarray(1, jax.numpy.int32))


def test_a_seed_that_is_no_integer_or_key_is_refused():
    def value_and_grad(x):
        return -0.5 * np.sum(x * x), -x

    with pytest.raises(TypeError, match="seed must be an integer"):
        nuts.sample(None, np.zeros((2, 2)), value_and_grad=value_and_grad, seed=1.5, **RUN)
    # a concrete integer array is an integer seed
    by_array = nuts.sample(
        None, np.zeros((2, 2)), value_and_grad=value_and_grad, seed=np.asarray(3), **RUN
    )
    by_int = nuts.sample(None, np.zeros((2, 2)), value_and_grad=value_and_grad, seed=3, **RUN)
    _same(by_array.samples, by_int.samples)


# -- TensorFlow ---------------------------------------------------------------------


@tiers.slow
def test_tf_function_gives_the_eager_draws_and_does_not_retrace_for_new_seeds_or_states():
    tf = pytest.importorskip("tensorflow")
    traces = []

    @tf.function
    def run(seed, x0):
        traces.append(1)
        result = nuts.sample(_tf_target, x0, seed=seed, **RUN)
        return result.samples, result.tree_depth

    x0 = tf.zeros((3, 2))
    for seed, start in ((7, x0), (-8, x0 + 1.0)):
        samples, depths = run(tf.constant(seed), start)
        eager = nuts.sample(_tf_target, start, seed=seed, **RUN)
        _same(samples, eager.samples)
        _same(depths, eager.tree_depth)
    assert len(traces) == 1


def test_tf_function_with_jit_compile_is_refused_with_advice():
    tf = pytest.importorskip("tensorflow")
    run = tf.function(lambda x0: nuts.sample(_tf_target, x0, seed=1, **RUN).samples,
                      jit_compile=True)  # fmt: skip
    with pytest.raises(NotImplementedError, match="without jit_compile"):
        run(tf.zeros((2, 2)))


@tiers.slow
def test_jit_returns_a_whole_result_whose_state_continues_the_run_eagerly():
    jax = pytest.importorskip("jax")
    x0 = jax.numpy.zeros((3, 2), jax.numpy.float32)
    key = jax.random.key(2)
    run = jax.jit(lambda key, x0: nuts.sample(_jax_target, x0, seed=key, **RUN))
    result = run(key, x0)  # a NutsResult is a JAX pytree
    assert isinstance(result, nuts.NutsResult) and result.wall_time is None
    seed = integer_seed(key)
    options = {**RUN, "num_samples": 2 * RUN["num_samples"]}
    longer = nuts.sample(_jax_target, x0, seed=seed, **options)
    half = RUN["num_samples"]
    _same(result.samples, longer.samples[:half])
    _same(result.accept_prob, longer.accept_prob[:half])
    rest = nuts.sample(_jax_target, result.state, seed=seed, **{**RUN, "num_warmup": 0})
    _same(rest.samples, longer.samples[half:])
