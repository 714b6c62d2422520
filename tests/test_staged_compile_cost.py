"""What a staged program costs XLA to compile, and that the savings change no run.

The staged machine (`pcbatch.vm.staged`) leaves out what a program does not need: a
policy's per-step reductions where its choice is one fixed order (`policy.in_fixed_order`),
the program-counter stack of a program without calls, a profile's counters inside every
block, a compile of the blank state. Each test here fails where that part comes back.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import pcbatch
from pcbatch.vm import policy
from tests import backends


def collatz(x):
    steps = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


def _batched(*functions):
    ctx = pcbatch.Context()
    return ctx, [ctx.batch(f) for f in functions]


def _lowered(functions, args):
    ctx, _ = _batched(*functions)
    return ctx.lowered_for_args(functions[0].__name__, args)


def test_a_loop_whose_blocks_run_in_one_order_is_renumbered_and_needs_no_plan():
    program = _lowered([collatz], [np.arange(1, 9)])
    assert policy.plan_for(program) is not None  # most_threads: the body before the exit
    ordered = policy.in_fixed_order(program)
    assert [b.label for b in ordered.graph.blocks] == [
        "collatz.entry", "collatz.body2", "collatz.endloop1"
    ]
    assert policy.plan_for(ordered) is None


def test_blocks_that_can_meet_in_any_order_keep_their_numbering_and_plan():
    program = _lowered([is_even, is_odd], [np.arange(9)])
    assert policy.in_fixed_order(program) is program
    assert policy.plan_for(program) is not None


def _block_counts(function, args, backend):
    with pcbatch.profile() as prof:
        result = np.asarray(function(*args, backend=backend))
    counts = (dict(prof.block_counts), dict(prof.block_lanes), prof.primitive_executions)
    return result, prof.block_executions, counts, prof.active_lane_sum


@pytest.mark.parametrize("name", backends.COMPILED_NAMES)
def test_a_renumbered_program_runs_the_same_blocks_as_numpy(name):
    _, (batched,) = _batched(collatz)
    x = np.array([1, 6, 7, 27, 97])
    expected = _block_counts(batched, [x], pcbatch.NumpyBackend())
    result, steps, counts, active = _block_counts(batched, [x], backends.scheduled(name))
    np.testing.assert_array_equal(result, expected[0])
    assert (steps, counts) == expected[1:3]
    assert active == pytest.approx(expected[3])  # primitives' active lanes, on the host


def _blank_pc(function, args, backend) -> set:
    function(*args, backend=backend)
    (entry,) = [e for e in backend.compile_cache.values() if e.program.main == function.__name__]
    return set(entry.blank["pc"])


@pytest.mark.parametrize("name", backends.COMPILED_NAMES)
def test_only_a_program_with_calls_carries_a_program_counter_stack(name):
    backend = backends.make_backend(name)
    _, (loop,) = _batched(collatz)
    _, (recursive,) = _batched(fib)
    assert _blank_pc(loop, [np.array([3, 5])], backend) == {"top"}
    assert _blank_pc(recursive, [np.array([3, 5])], backend) == {"top", "stack", "depth"}


def _equations(jaxpr, primitive: str | None = None) -> int:
    """The equations of a jaxpr and of every jaxpr inside it (each call counted); with
    ``primitive``, only those of that primitive."""
    total = 0
    for eqn in jaxpr.eqns:
        total += primitive is None or eqn.primitive.name == primitive
        for param in eqn.params.values():
            for inner in param if isinstance(param, (tuple, list)) else [param]:
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's
                if hasattr(inner, "eqns"):
                    total += _equations(inner, primitive)
    return total


def _traced_equations(function, args, profiled: bool) -> int:
    """The equations of the staged program, as JAX traces it."""
    import jax

    backend = backends.make_backend("jax")
    counts = []

    def jit(traced):
        jitted = jax.jit(traced)

        def call(*arguments):
            counts.append(_equations(jitted.trace(*arguments).jaxpr.jaxpr))
            return jitted(*arguments)

        return call

    backend.jit = jit
    with pcbatch.profile() if profiled else contextlib.nullcontext():
        function(*args, backend=backend)
    (count,) = counts
    return count


@pytest.mark.skipif("jax" not in backends.COMPILED_NAMES, reason="needs JAX")
def test_a_profile_costs_the_same_few_ops_however_many_blocks():
    """Counted once per step, outside the dispatch: inside each block the counters cost
    every block ops (and XLA kernels) of its own."""
    _, (small,) = _batched(collatz)  # 3 blocks, and 5: both run main's entry first
    _, (large,) = _batched(fib)
    x = np.array([3, 5, 6])
    added = [
        _traced_equations(f, [x], profiled=True) - _traced_equations(f, [x], profiled=False)
        for f in (small, large)
    ]
    assert added[0] == added[1]


@pytest.mark.skipif("jax" not in backends.COMPILED_NAMES, reason="needs JAX")
def test_a_first_call_on_jax_compiles_one_xla_program():
    """The blank state is copied to the device without compiling a conversion for it."""
    import jax

    compiles = []

    def listener(event, *args, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    backend = backends.make_backend("jax")
    _, (batched,) = _batched(collatz)
    x = jax.device_put(np.arange(1, 38))  # a batch size no other test compiles for
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        np.asarray(batched(x, backend=backend))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert len(compiles) == 1


class _Traced(Exception):
    """Raised once the staged program is traced: the sizes are known, no compile needed."""


def _staged_sizes(call) -> dict:
    """Equations, ``while`` loops and masked selects (``select_n``) of the jaxpr that
    ``call(backend)`` stages on JAX, counted inside every inner jaxpr: deterministic
    measures of what XLA is given to compile (`benchmarks/compile_cost.py`)."""
    import jax

    backend = backends.make_backend("jax")
    counts = {}

    def jit(traced):
        def call_(*arguments):
            jaxpr = jax.jit(traced).trace(*arguments).jaxpr.jaxpr
            counts.update(
                eqns=_equations(jaxpr),
                whiles=_equations(jaxpr, "while"),
                selects=_equations(jaxpr, "select_n"),
            )
            raise _Traced

        return call_

    backend.jit = jit
    with pytest.raises(_Traced):
        call(backend)
    return counts


def _nuts_call(backend):
    from pcbatch.mcmc import nuts

    dim = 10
    precision = np.eye(dim) + 0.5 * np.ones((dim, dim)) / dim

    def log_prob(x):
        import jax.numpy as jnp

        return -0.5 * jnp.sum(x * jnp.matmul(jnp.asarray(precision, x.dtype), x))

    start = np.random.RandomState(1).normal(size=(8, dim)).astype(np.float32)
    nuts.sample(
        log_prob, start, num_samples=2, num_warmup=0, seed=0, step_size=0.1,
        progress_bar=False, backend=backend,
    )


#: The staged NUTS program's size, 10-D, 8 chains (before -> now): 3,946 -> 3,843
#: equations; 532 -> 502 selects (copy coalescing, `pcbatch.passes.coalesce`: a subtree's
#: result returned as it is moves nothing); 73 while loops (the binary dispatch tree: a
#: four-way one had 58, but its warm steps were slower, `JaxBackend.TREE_FAN_OUT`);
#: 3,851 equations after session 20's semantic checks (Python-number operands of
#: np.where and divisions: scalar work, no new loop or select); 3,893 after session 24's
#: bounds check of the draw buffers' item assignments (`SetItem.faulting`: six scalar
#: equations for each of the 7 writes per draw)
NUTS_BOUNDS = {"eqns": 3_900, "whiles": 73, "selects": 505}


@pytest.mark.skipif("jax" not in backends.COMPILED_NAMES, reason="needs JAX")
def test_the_staged_nuts_program_stays_small():
    sizes = _staged_sizes(_nuts_call)
    assert {k: v for k, v in sizes.items() if v > NUTS_BOUNDS[k]} == {}, sizes


@pytest.mark.skipif("jax" not in backends.COMPILED_NAMES, reason="needs JAX")
def test_a_loop_returning_its_counter_moves_no_register_into_the_result():
    """Collatz's ``steps`` is its result register (`pcbatch.passes.coalesce`): the loop's
    exit moves nothing (13 selects before)."""
    _, (batched,) = _batched(collatz)
    sizes = _staged_sizes(lambda backend: batched(np.array([3, 5, 6]), backend=backend))
    assert sizes["selects"] <= 12, sizes


@pytest.mark.skipif("jax" not in backends.COMPILED_NAMES, reason="needs JAX")
def test_nuts_on_jax_never_runs_the_density_eagerly_before_its_compile():
    """Type inference reads the gradient's declared results (`pcbatch.mcmc.gradients`)
    instead of running it on a dummy state: run eagerly, JAX compiled each operation of
    the density and its gradient on its own (21 XLA compiles in a first call, not 10)."""
    import jax

    from pcbatch.mcmc import nuts

    concrete = []

    def log_prob(x):
        primal = getattr(x, "primal", x)  # under the gradient's trace, the value it takes
        concrete.append(not isinstance(primal, jax.core.Tracer))
        return -0.5 * (x * x).sum()

    def call(backend):
        start = np.zeros((4, 3), np.float32)
        nuts.sample(
            log_prob, start, num_samples=2, num_warmup=0, seed=0, step_size=0.1,
            progress_bar=False, backend=backend,
        )

    _staged_sizes(call)
    assert concrete and not any(concrete), concrete


@pytest.mark.skipif("jax" not in backends.COMPILED_NAMES, reason="needs JAX")
def test_nuts_cuts_a_runs_jax_outputs_on_the_host_compiling_nothing():
    """The chains' packed state and the draw buffers, JAX arrays after a run, are cut on
    the host and put back on their device: sliced there, each shape compiled an XLA
    program of its own (8 of a first call's compiles)."""
    import types

    import jax

    from pcbatch.mcmc import nuts

    compiles = []

    def listener(event, *args, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    size, chains = 7, 3  # shapes no other test compiles a slice for
    packed = np.arange(chains * (5 * size + 8), dtype=np.float32).reshape(chains, -1)
    packed = jax.device_put(packed)
    draws = jax.device_put(np.ones((chains, 9, size), np.float32))
    run = types.SimpleNamespace(start=types.SimpleNamespace(dense=False), traced=False,
                                event_shape=(size,))  # fmt: skip
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        state = nuts._unpacked(packed, run)
        (joined,) = nuts._joined([(4, [draws]), (2, [draws])], on_host=True)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiles == []
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(state))
    np.testing.assert_array_equal(np.asarray(state.q), np.asarray(packed)[:, :size])
    assert joined.shape == (chains, 6, size)
