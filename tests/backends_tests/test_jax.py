"""JAX specifics: one compilation per signature, jit composition, flags checked after a run."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch

jax = pytest.importorskip("jax")
jnp = jax.numpy

from pcbatch.backends.jax import JaxBackend  # noqa: E402
from pcbatch.examples import collatz, fib  # noqa: E402
from tests import backends, tiers  # noqa: E402


def test_same_shapes_do_not_retrace():
    backend = backends.backend("jax")
    n = np.array([5, 6, 7])
    fib(n, backend=backend)
    traces = backend.traces
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(fib(n + 1, backend=backend)), [8, 13, 21])
    assert backend.traces == traces


def test_jax_arrays_choose_the_jax_backend():
    result = fib(jnp.array([6, 7, 8]))
    assert isinstance(result, jax.Array)
    np.testing.assert_array_equal(np.asarray(result), [8, 13, 21])


def test_callable_inside_a_users_jit():
    @jax.jit
    def twice_collatz(x):
        return 2 * collatz(x)

    np.testing.assert_array_equal(np.asarray(twice_collatz(jnp.array([6, 7, 27]))), [16, 32, 222])


def test_map_in_priority_order_inside_a_users_jit_and_without_retracing():
    backend = backends.backend("jax")
    n = np.array([9, 3, 12, 5, 7, 1, 10])
    expected = np.asarray(fib(n, dry_run=True))

    @jax.jit
    def fibs(n):
        return fib.map(n, width=3, priority=np.array([9, 3, 12, 5, 7, 1, 10]), backend=backend)

    np.testing.assert_array_equal(np.asarray(fibs(jnp.asarray(n))), expected)
    traces = backend.traces
    for priority in (n, -n, None):  # the order is data: a new one does not recompile
        result = fib.map(n, width=3, priority=priority, backend=backend)
        np.testing.assert_array_equal(np.asarray(result), expected)
    assert backend.traces == traces


def test_stack_overflow_is_detected_after_the_run():
    with pytest.raises(pcbatch.StackOverflowError, match="'fib'") as info:
        fib(np.array([3, 20]), backend=backends.backend("jax"), max_stack_depth=6)
    assert info.value.suggested_depth is not None and info.value.suggested_depth > 6


def test_step_limit():
    with pytest.raises(pcbatch.StepLimitError):
        collatz(np.array([27]), backend=backends.backend("jax"), max_steps=10)


def test_profile_counts_on_jax():
    # The schedule's counts: a GPU's default, the sweep, runs every block at each step
    backend = JaxBackend(block_choice="loops")
    with pcbatch.profile() as jax_prof:
        fib(np.array([6, 7, 8, 7]), backend=backend)
    with pcbatch.profile() as numpy_prof:
        fib(np.array([6, 7, 8, 7]))
    assert jax_prof.block_executions == numpy_prof.block_executions
    assert jax_prof.primitive_counts == numpy_prof.primitive_counts


def test_the_garbage_collector_is_paused_while_a_program_is_traced_then_restored():
    import gc

    seen = []

    def observed(x):  # a primitive: runs while the program is traced
        seen.append(gc.isenabled())
        return x

    @pcbatch.Context().batch
    def double(x):
        return 2 * observed(x)

    backend = JaxBackend()
    np.testing.assert_array_equal(np.asarray(double(np.array([1, 2]), backend=backend)), [2, 4])
    assert False in seen  # traced with the collector off
    assert gc.isenabled()
    gc.disable()
    try:
        double(np.array([3, 4]), backend=JaxBackend())
        assert not gc.isenabled()  # a collector the caller turned off stays off
    finally:
        gc.enable()


@pytest.mark.parametrize("choice", ["loops", "flat", "switch", "sweep"])
def test_every_block_choice_gives_the_per_example_results(choice):
    """``block_choice`` changes how a step picks its block (GPU speed), never a result."""
    backend = JaxBackend(block_choice=choice)
    n = np.array([0, 1, 5, 9, 12])
    np.testing.assert_array_equal(np.asarray(fib(n, backend=backend)), fib(n, dry_run=True))
    x = np.array([1, 7, 27, 97, 3])
    np.testing.assert_array_equal(np.asarray(collatz(x, backend=backend)), collatz(x, dry_run=True))
    deep = np.array([16])  # past the depth of 10 (fib(40) runs for seconds after it)
    with pytest.raises(pcbatch.StackOverflowError):
        fib(deep, backend=backend, max_stack_depth=10)


def test_the_default_block_choice_is_the_sweep_on_a_gpu_only(monkeypatch):
    assert JaxBackend().step_choice == ("sweep" if jax.default_backend() == "gpu" else "loops")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert JaxBackend().step_choice == "sweep"
    assert JaxBackend(block_choice="loops").step_choice == "loops"
    with jax.default_device(jax.devices("cpu")[0]):  # the CPU asked for: the tree
        assert JaxBackend().step_choice == "loops"
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert JaxBackend().step_choice == "loops"


def test_a_sweep_counts_the_blocks_it_ran_as_steps():
    """Profiles and max_steps count blocks that some thread ran, whatever the choice."""
    x = np.array([3, 7, 1, 27, 6])
    counted = {}
    for choice in ("loops", "sweep"):
        with pcbatch.profile() as prof:
            collatz(x, backend=JaxBackend(block_choice=choice))
        assert sum(row["executions"] for row in prof.block_table()) == prof.block_executions
        counted[choice] = prof.block_executions
    # the schedule differs (no thread waits for others), the scale does not
    assert counted["loops"] / 2 < counted["sweep"] < counted["loops"] * 2
    with pytest.raises(pcbatch.StepLimitError, match="max_steps=20"):
        collatz(x, backend=JaxBackend(block_choice="sweep"), max_steps=20)


def test_an_unknown_block_choice_is_named():
    with pytest.raises(ValueError, match="block_choice"):
        JaxBackend(block_choice="tree")


@tiers.slow  # two NUTS compilations, about 25 s
def test_nuts_counts_its_gradients_alone_and_a_users_profile_sees_every_block():
    """NUTS counts only its gradient blocks (`profiling.counting`: the sweep then skips the
    other blocks' counts); inside a user's profile it counts everything, the same
    gradients."""
    from pcbatch.mcmc import nuts

    backend = JaxBackend(block_choice="sweep")
    x0 = jax.numpy.asarray(np.random.RandomState(0).normal(size=(4, 3)), "float32")
    run = lambda: nuts.sample(lambda x: -0.5 * jax.numpy.sum(x * x), x0, num_samples=5,
                              num_warmup=0, seed=0, backend=backend, progress_bar=False)
    alone = run()
    with pcbatch.profile() as outer:
        profiled = run()
    assert alone.gradient_evaluations == profiled.gradient_evaluations > 0
    assert alone.leapfrog_steps == profiled.leapfrog_steps
    np.testing.assert_array_equal(np.asarray(alone.samples), np.asarray(profiled.samples))
    assert sum(row["executions"] for row in outer.block_table()) == outer.block_executions
    assert len(outer.block_table()) > 2  # more than the gradient's blocks
