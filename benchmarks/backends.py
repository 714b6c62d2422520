"""Backends side by side: NumPy, JAX, TensorFlow (XLA), and each example alone in Python.

Prints one table. Per workload and backend: batched block executions, median
wall time of a warm call, microseconds per block execution, the first call's
time (tracing and compilation included) and the speed-up over running every
example alone as plain Python (the same function with ``dry_run=True``).

Usage: ``python benchmarks/backends.py [--repeats N]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pcbatch
from pcbatch import examples


def _backends() -> dict:
    found = {"numpy": pcbatch.NumpyBackend()}
    try:
        from pcbatch.backends.jax import JaxBackend

        found["jax"] = JaxBackend()
    except ImportError:
        pass
    try:
        from pcbatch.backends.tensorflow import TensorFlowBackend

        found["tf-xla"] = TensorFlowBackend(jit_compile=True)
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


def _measure(fn, args, depth, backend, repeats):
    start = time.perf_counter()
    _block(fn(*args, backend=backend, max_stack_depth=depth))
    first = time.perf_counter() - start
    with pcbatch.profile() as prof:
        fn(*args, backend=backend, max_stack_depth=depth)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _block(fn(*args, backend=backend, max_stack_depth=depth))
        times.append(time.perf_counter() - start)
    return prof.block_executions, statistics.median(times), first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    opts = parser.parse_args()
    header = (
        f"{'workload':<22} {'backend':<7} {'blocks':>7} {'warm s':>8} {'us/block':>9} "
        f"{'first s':>8} {'alone s':>8} {'alone/warm':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, args, depth in _workloads():
        start = time.perf_counter()
        fn(*args, dry_run=True)
        alone = time.perf_counter() - start
        for backend_name, backend in _backends().items():
            blocks, warm, first = _measure(fn, args, depth, backend, opts.repeats)
            print(
                f"{name:<22} {backend_name:<7} {blocks:>7} {warm:>8.4f} "
                f"{warm / max(blocks, 1) * 1e6:>9.1f} {first:>8.2f} {alone:>8.2f} "
                f"{alone / warm:>9.1f}x"
            )
    print(
        "\nblocks: VM steps; warm: median of --repeats calls after the first; first: the first"
        "\ncall, compilation included; alone: every example run alone as plain Python."
    )


if __name__ == "__main__":
    main()
