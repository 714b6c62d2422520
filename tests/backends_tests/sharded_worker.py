"""Checks of the sharded JAX backend, run in a fresh process with forced host devices.

XLA reads ``--xla_force_host_platform_device_count`` once, when JAX starts, so
these checks cannot share the test session's process (whose other tests must
see one CPU device). ``tests/backends_tests/test_sharding.py`` launches this
script with ``XLA_FLAGS`` and ``PYTHONPATH`` set, one check per run:

    python sharded_worker.py CHECK [ARGS...]

Each check prints one JSON line per case, ``{"case": ..., "error": ...}``
(``error`` null when the case passed), which the test turns into assertions.
"""

from __future__ import annotations

import json
import re
import sys
import traceback

import numpy as np

#: collective HLO ops (asynchronous ones end in -start)
_COLLECTIVE = re.compile(
    r"\b(all-reduce|all-gather|all-to-all|collective-permute|reduce-scatter|"
    r"collective-broadcast|ragged-all-to-all)(-start)?\("
)
_CALLED = re.compile(
    r"\b(?:calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-]+)"
)
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_WHILE = re.compile(r"\bwhile\(.*?condition=%?([\w.\-]+), body=%?([\w.\-]+)")


def report(case: str, check) -> None:
    try:
        check()
        error = None
    except Exception:  # reported to the test, which fails with it
        error = traceback.format_exc(limit=6)
    print(json.dumps({"case": case, "error": error}), flush=True)


def configure() -> None:
    """As in the test session: float64 like the oracle, the IR verifier between passes."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from pcbatch.passes import pipeline

    pipeline.VERIFY_BY_DEFAULT = True


def expect_devices(devices: int) -> None:
    import jax

    assert len(jax.devices()) == devices, f"expected {devices} devices, got {jax.devices()}"


def sharded(devices: int, **options):
    import jax
    from jax.sharding import Mesh

    from pcbatch.backends.jax import JaxBackend

    mesh = Mesh(np.array(jax.devices()[:devices]), ("batch",))
    return JaxBackend(mesh=mesh, axis="batch", **options)


def assert_identical(actual, expected) -> None:
    """Same nesting, shapes, dtypes and values, bit for bit."""
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        assert type(actual) is type(expected), (type(actual), type(expected))
        for a, e in zip(actual, expected):
            assert_identical(a, e)
        return
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
    np.testing.assert_array_equal(a, e)


# ---------------------------------------------------------------------------
# The program corpus


def corpus_entries():
    """(name, batched fn, make_args(rng, n), max_stack_depth) for both corpora."""
    from pcbatch import examples
    from tests.programs.python_corpus import NUMPY_ONLY, PY_CORPUS

    entries = [
        (p.name, p.fn, p.make_args, p.max_stack_depth)
        for p in PY_CORPUS
        if p.name not in NUMPY_ONLY
    ]
    ints = lambda hi: lambda rng, n: [rng.randint(0, hi, size=n)]
    entries += [
        ("examples.fib", examples.fib, ints(12), 15),
        ("examples.collatz", examples.collatz, lambda rng, n: [rng.randint(1, 60, size=n)], 15),
        ("examples.build_tree", examples.build_tree,
         lambda rng, n: [rng.randint(0, 5, size=n), rng.randint(0, 99, size=n)], 15),
        ("examples.trajectories", examples.trajectories,
         lambda rng, n: [rng.randint(0, 99, size=n), rng.randint(0, 6, size=n)], 15),
        ("examples.is_even", examples.is_even, ints(12), 15),
    ]
    return entries


def check_corpus(batch: int, devices: int, identical: str, every: int = 1) -> None:
    """Every ``every``-th corpus program and every program of ``pcbatch/examples.py``: the
    sharded run equals ``dry_run``; and bit for bit the one-device run, for the programs
    of ``pcbatch/examples.py`` (``identical="examples"``) or all (``"all"``: one more
    compilation per program, so not by default)."""
    from pcbatch.backends.jax import JaxBackend

    single, split = JaxBackend(), sharded(devices)
    entries = corpus_entries()
    chosen = [e for k, e in enumerate(entries) if k % every == 0 or e[0].startswith("examples.")]
    for name, fn, make_args, depth in chosen:
        args = make_args(np.random.RandomState(batch), batch)
        one_device = single if identical == "all" or name.startswith("examples.") else None
        report(name, corpus_case(fn, args, depth, split, one_device))


def corpus_case(fn, args, depth, split, one_device):
    def case():
        actual = fn(*args, backend=split, max_stack_depth=depth)
        if one_device is not None:
            assert_identical(actual, fn(*args, backend=one_device, max_stack_depth=depth))
        truth = fn(*args, dry_run=True)
        for a, t in zip(_leaves(actual), _leaves(truth), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(t), rtol=1e-9, atol=1e-6)

    return case


def _leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


# ---------------------------------------------------------------------------
# Layout, counts, flags


def check_layout(devices: int) -> None:
    import jax

    import pcbatch
    from pcbatch import examples

    x = np.arange(1, 4 * devices + 1)
    truth = examples.collatz(x, dry_run=True)

    def stays_sharded():
        out = examples.collatz(x, backend=sharded(devices))
        assert out.sharding.spec == jax.sharding.PartitionSpec("batch"), out.sharding
        assert len(out.addressable_shards) == devices
        rows = sorted(int(s.data.shape[0]) for s in out.addressable_shards)
        assert rows == [4] * devices, rows
        np.testing.assert_array_equal(np.asarray(out), truth)

    def gathered():
        out = examples.collatz(x[:-1], backend=sharded(devices, gather=True))
        assert out.sharding.is_fully_replicated, out.sharding
        np.testing.assert_array_equal(np.asarray(out), truth[:-1])

    def per_shard_counts():
        # Each shard's own scheduler: its steps are what the one-device VM needs
        # for that shard's threads alone, and the shards together cover the batch.
        backend = sharded(devices)
        with pcbatch.profile() as prof:
            examples.collatz(x[:-1], backend=backend)
        per_shard = [prof.shard_block_executions[d] for d in range(devices)]
        alone = []
        for d in range(devices):
            with pcbatch.profile() as one:
                examples.collatz(x[4 * d : min(4 * d + 4, x.size - 1)], backend=pcbatch_jax())
            alone.append(one.block_executions)
        assert per_shard == alone, (per_shard, alone)
        assert prof.block_executions == sum(per_shard)

    def padding_never_runs():
        # One thread on four devices: the other shards hold only padding.
        backend = sharded(devices)
        with pcbatch.profile() as prof:
            out = examples.collatz(np.array([27]), backend=backend)
        assert np.asarray(out).tolist() == [111]
        assert [prof.shard_block_executions[d] for d in range(1, devices)] == [0] * (devices - 1)
        lanes = sum(prof.primitive_lanes.values())
        with pcbatch.profile() as alone:
            examples.collatz(np.array([27]), backend=pcbatch_jax())
        assert lanes == sum(alone.primitive_lanes.values())

    def per_example_arguments_broadcast():
        out = examples.build_tree(3, np.arange(10), backend=sharded(devices))
        truth = examples.build_tree(np.full(10, 3), np.arange(10), dry_run=True)
        assert_identical(tuple(np.asarray(o) for o in out), tuple(np.asarray(t) for t in truth))

    def inputs_from_anywhere():
        from jax.sharding import NamedSharding
        from jax.sharding import PartitionSpec as P

        explicit = jax.make_mesh((devices,), ("batch",))  # Explicit axes, unlike sharded()
        placed = {
            "host": x,
            "default device": jax.numpy.asarray(x),
            "last device": jax.device_put(x, jax.devices()[devices - 1]),
            "sharded": jax.device_put(x, NamedSharding(explicit, P("batch"))),
        }
        for mesh_kind, backend in (
            ("auto", sharded(devices)),
            ("explicit", pcbatch.JaxBackend(mesh=explicit, axis="batch")),
        ):
            for where, arg in placed.items():
                out = examples.collatz(arg, backend=backend)
                message = f"{mesh_kind} mesh, input on {where}"
                np.testing.assert_array_equal(np.asarray(out), truth, err_msg=message)

    def inside_a_users_jit():
        backend = sharded(devices)
        twice = jax.jit(lambda a: 2 * examples.collatz(a, backend=backend))
        np.testing.assert_array_equal(np.asarray(twice(x[:-1])), 2 * truth[:-1])

    def refill_per_shard():
        # Each device refills its own lanes from its share of the inputs.
        for n, width in ((4 * devices + 3, 2 * devices), (3, devices), (4 * devices, 3)):
            inputs = np.arange(1, n + 1) * 7
            for gather in (False, True):
                backend = sharded(devices, gather=gather)
                with pcbatch.profile() as prof:
                    out = examples.collatz.map(inputs, width=width, backend=backend)
                np.testing.assert_array_equal(
                    np.asarray(out), examples.collatz(inputs, dry_run=True)
                )
                assert len(prof.shard_block_executions) == devices

    for case in (stays_sharded, gathered, per_shard_counts, padding_never_runs,
                 per_example_arguments_broadcast, inputs_from_anywhere, inside_a_users_jit,
                 refill_per_shard):
        report(case.__name__, case)


def pcbatch_jax():
    from pcbatch.backends.jax import JaxBackend

    return JaxBackend()


def check_flags(devices: int) -> None:
    import pcbatch
    from pcbatch import examples

    def overflow_on_one_shard():
        n = np.array([3, 2, 4, 1, 2, 3, 20])  # only the last shard recurses deeply
        try:
            examples.fib(n, backend=sharded(devices), max_stack_depth=8)
        except pcbatch.StackOverflowError as error:
            assert "fib" in str(error) and error.max_stack_depth == 8, error
        else:
            raise AssertionError("no StackOverflowError")

    def step_limit_on_one_shard():
        x = np.array([1, 2, 1, 2, 1, 2, 27])
        try:
            examples.collatz(x, backend=sharded(devices), max_steps=40)
        except pcbatch.StepLimitError as error:
            assert "1 thread(s) still running" in str(error), error
        else:
            raise AssertionError("no StepLimitError")

    for case in (overflow_on_one_shard, step_limit_on_one_shard):
        report(case.__name__, case)


# ---------------------------------------------------------------------------
# No communication inside the loop


def computations(hlo: str) -> dict:
    """HLO module text -> {computation name: its body lines}."""
    comps, name = {}, None
    for line in hlo.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith("{"):
            name = line.split()[1 if line.startswith("ENTRY") else 0].lstrip("%")
            comps[name] = []
        elif line.startswith("}"):
            name = None
        elif name is not None:
            comps[name].append(line)
    return comps


def collectives_in_loops(hlo: str) -> list:
    """The collective ops inside any while loop's condition or body (or what they call)."""
    comps = computations(hlo)
    todo = [c for lines in comps.values() for line in lines for c in _WHILE.findall(line)]
    todo = [name for pair in todo for name in pair]
    seen, found = set(), []
    while todo:
        name = todo.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for line in comps[name]:
            if _COLLECTIVE.search(line):
                found.append(line.strip()[:160])
            todo += _CALLED.findall(line)
            for group in _BRANCHES.findall(line):
                todo += [c.strip().lstrip("%") for c in group.split(",")]
    return found, len(seen)


def compiled_hlo(backend, fn, args, depth=15) -> str:
    """The optimized HLO of the sharded run ``fn(*args)`` compiled on ``backend``."""
    from pcbatch.vm import staged

    fn(*args, backend=backend, max_stack_depth=depth)
    (entry,) = backend.compile_cache.values()
    inputs = staged._with_batch_dims(entry.program, args)
    return entry.function.lower(*entry.arguments(inputs)).compile().as_text()


def check_hlo(devices: int) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    from pcbatch import examples

    def detector_sees_a_collective_in_a_loop():
        mesh = Mesh(np.array(jax.devices()[:devices]), ("batch",))

        def per_shard(x):
            return jax.lax.while_loop(lambda v: jax.lax.psum(v[0], "batch") < 100,
                                      lambda v: v + 1, x)

        f = jax.jit(jax.shard_map(per_shard, mesh=mesh, in_specs=P("batch"), out_specs=P("batch")))
        found, _ = collectives_in_loops(f.lower(jnp.arange(8.0)).compile().as_text())
        assert found, "the detector missed a psum inside a while loop"

    cases = {
        "collatz": (examples.collatz, [np.arange(1, 11)]),
        "fib": (examples.fib, [np.arange(10)]),
        "trajectories": (examples.trajectories, [np.arange(9), np.arange(9) % 5]),
    }

    def no_collectives(fn, args):
        def case():
            hlo = compiled_hlo(sharded(devices), fn, args)
            found, loop_computations = collectives_in_loops(hlo)
            assert loop_computations > 0, "no while loop found in the HLO"
            assert not found, found
            assert _COLLECTIVE.search(hlo), "expected collectives after the loop (combining)"

        return case

    report("detector", detector_sees_a_collective_in_a_loop)
    for name, (fn, args) in cases.items():
        report(f"no_collectives_in_loop[{name}]", no_collectives(fn, args))


# ---------------------------------------------------------------------------
# NUTS with sharded chains


def check_nuts(devices: int) -> None:
    import jax.numpy as jnp

    from pcbatch.mcmc import nuts

    def log_prob(x):
        return -0.5 * jnp.sum(x * x / jnp.array([1.0, 4.0]))

    start = jnp.asarray(np.random.RandomState(0).normal(size=(6, 2)))
    settings = dict(num_samples=8, num_warmup=8, seed=3, max_tree_depth=4)

    def chains_sharded():
        one = nuts.sample(log_prob, start, **settings, backend=pcbatch_jax())
        split = nuts.sample(log_prob, start, **settings, backend=sharded(devices))
        # XLA compiles a kernel per batch width, and may contract multiply-adds
        # differently in each: floats agree to rounding, counts and flags exactly.
        for field in ("num_leapfrogs", "tree_depth", "diverging"):
            assert_identical(np.asarray(getattr(split, field)), np.asarray(getattr(one, field)))
        for field in ("samples", "accept_prob", "step_size", "inverse_mass"):
            a, e = np.asarray(getattr(split, field)), np.asarray(getattr(one, field))
            assert a.dtype == e.dtype
            np.testing.assert_allclose(a, e, rtol=1e-12, atol=1e-12)
        assert split.gradient_evaluations > 0 and split.leapfrog_steps == one.leapfrog_steps

    report("nuts_chains_sharded", chains_sharded)


# ---------------------------------------------------------------------------
# Several processes


def check_multiprocess(process: int, processes: int, port: str, devices: int) -> None:
    """One of ``processes`` processes on loopback, each with ``devices`` host devices."""
    import jax

    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=processes, process_id=process
    )
    from jax.sharding import Mesh

    from pcbatch import examples
    from pcbatch.backends.jax import JaxBackend

    total = processes * devices
    expect_devices(total)
    assert jax.process_count() == processes

    def same_as_one_process():
        mesh = Mesh(np.array(jax.devices()), ("batch",))
        everywhere = JaxBackend(mesh=mesh, gather=True)
        local = JaxBackend()  # this process's first device: the single-process run
        rng = np.random.RandomState(5)
        for fn, args in (
            (examples.collatz, [rng.randint(1, 99, size=3 * total + 1)]),
            (examples.trajectories, [np.arange(2 * total), np.arange(2 * total) % 5]),
        ):
            assert_identical(fn(*args, backend=everywhere), fn(*args, backend=local))

    def shards_stay_on_their_process():
        mesh = Mesh(np.array(jax.devices()), ("batch",))
        x = np.arange(1, 2 * total + 1)
        out = examples.collatz(x, backend=JaxBackend(mesh=mesh))
        truth = examples.collatz(x, dry_run=True)
        assert not out.is_fully_addressable
        for shard in out.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), truth[shard.index])

    report(f"multiprocess[{process}]/same_as_one_process", same_as_one_process)
    report(f"multiprocess[{process}]/shards_stay_on_their_process", shards_stay_on_their_process)


def main(argv) -> None:
    check, *rest = argv
    configure()
    if check == "multiprocess":
        process, processes, port, devices = rest
        check_multiprocess(int(process), int(processes), port, int(devices))
        return
    devices = int(rest[0])
    expect_devices(devices)
    if check == "corpus":
        check_corpus(int(rest[1]), devices, rest[2], int(rest[3]) if len(rest) > 3 else 1)
    else:
        {"layout": check_layout, "flags": check_flags, "hlo": check_hlo, "nuts": check_nuts}[
            check
        ](devices)


if __name__ == "__main__":
    main(sys.argv[1:])
