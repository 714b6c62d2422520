"""Backends side by side: NumPy, JAX, TensorFlow (XLA), and each example alone in Python.

Prints one table. Per workload and backend: batched block executions, median
wall time of a warm call, microseconds per block execution, the first call's
time (tracing and compilation included) and the speed-up over running every
example alone as plain Python (the same function with ``dry_run=True``).

With ``--compaction SPEC`` (``auto`` or bucket widths such as ``16,128``), JAX and
TensorFlow also run with that compaction option (`pcbatch.vm.compact`), in rows
``jax/c`` and ``tf-xla/c`` beside the full-width ones, plus a column: the block
executions that ran compacted. Warm calls of a workload's backends alternate, so
that a change in the machine's load touches each alike. ``--only TEXT`` keeps the
workloads whose name contains TEXT, ``--backends jax,jax/c`` those backends.

Usage: ``python benchmarks/backends.py [--repeats N] [--compaction SPEC] [--only TEXT]
[--backends NAMES]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pcbatch
from pcbatch import examples
from pcbatch.vm import compact


def _backends(compaction) -> dict:
    """Name -> backend; with ``compaction``, each compiled backend twice (``/c``: compacted)."""
    found = {"numpy": pcbatch.NumpyBackend()}
    variants = [("", None)] + ([("/c", compaction)] if compaction is not None else [])
    try:
        from pcbatch.backends.jax import JaxBackend

        for suffix, option in variants:
            found["jax" + suffix] = JaxBackend(compaction=option)
    except ImportError:
        pass
    try:
        from pcbatch.backends.tensorflow import TensorFlowBackend

        for suffix, option in variants:
            found["tf-xla" + suffix] = TensorFlowBackend(jit_compile=True, compaction=option)
    except ImportError:
        pass
    return found


def _workloads():
    rng = np.random.RandomState(0)
    yield "fib n~U[10,16) x100", examples.fib_peer, [rng.randint(10, 16, size=100)], 20
    rng = np.random.RandomState(0)
    yield "fib n~U[15,20] x1000", examples.fib_peer, [rng.randint(15, 21, size=1000)], 24
    rng = np.random.RandomState(0)
    yield "even/odd x100", examples.is_even, [rng.randint(0, 201, size=100)], 4
    rng = np.random.RandomState(0)
    yield "collatz x10000", examples.collatz, [rng.randint(1, 100_000, size=10_000)], 4
    rng = np.random.RandomState(0)
    yield (
        "nuts-shaped x1000",
        examples.trajectories,
        [rng.randint(0, examples.MOD, size=1000), rng.randint(1, 12, size=1000)],
        8,
    )


def _block(result):
    for leaf in result if isinstance(result, tuple) else (result,):
        getattr(leaf, "block_until_ready", lambda: None)()


def _first_and_counts(fn, args, depth, backend):
    """The first call's seconds (compilation included) and a profiled call's counts."""
    start = time.perf_counter()
    _block(fn(*args, backend=backend, max_stack_depth=depth))
    first = time.perf_counter() - start
    with pcbatch.profile() as prof:
        fn(*args, backend=backend, max_stack_depth=depth)
    return first, prof


def _warm_times(fn, args, depth, backends: dict, repeats: int) -> dict:
    """Per backend: the median of ``repeats`` warm calls, the backends taking turns."""
    times = {name: [] for name in backends}
    for _ in range(repeats):
        for name, backend in backends.items():
            start = time.perf_counter()
            _block(fn(*args, backend=backend, max_stack_depth=depth))
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--compaction", default=None, help="also run compacted: auto or widths like 16,128"
    )
    parser.add_argument("--only", default="", help="workloads whose name contains this")
    parser.add_argument("--backends", default="", help="a subset, e.g. jax,jax/c")
    opts = parser.parse_args()
    backends = _backends(compact.parse_option(opts.compaction))
    if opts.backends:
        backends = {k: v for k, v in backends.items() if k in opts.backends.split(",")}
    header = (
        f"{'workload':<22} {'backend':<8} {'blocks':>7} {'compact':>7} {'warm s':>8} "
        f"{'us/block':>9} {'first s':>8} {'alone s':>8} {'alone/warm':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, args, depth in _workloads():
        if opts.only not in name:
            continue
        start = time.perf_counter()
        fn(*args, dry_run=True)
        alone = time.perf_counter() - start
        firsts = {b: _first_and_counts(fn, args, depth, backend) for b, backend in backends.items()}
        warm = _warm_times(fn, args, depth, backends, opts.repeats)
        for backend_name, (first, prof) in firsts.items():
            blocks, seconds = prof.block_executions, warm[backend_name]
            compacted = sum(prof.compacted_block_executions.values())
            print(
                f"{name:<22} {backend_name:<8} {blocks:>7} {compacted:>7} {seconds:>8.4f} "
                f"{seconds / max(blocks, 1) * 1e6:>9.1f} {first:>8.2f} {alone:>8.2f} "
                f"{alone / seconds:>9.1f}x"
            )
    print(
        "\nblocks: VM steps; compact: of those, block executions run on a bucket of lanes"
        "\n(--compaction); warm: median of --repeats calls after the first, the backends taking"
        "\nturns; first: the first call, compilation included; alone: every example run alone"
        "\nas plain Python."
    )


if __name__ == "__main__":
    main()
