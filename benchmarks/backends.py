"""Backends side by side: NumPy, JAX, TensorFlow (XLA), and each example alone in Python.

Prints one table. Per workload and backend: batched block executions, median
wall time of a warm call, microseconds per block execution, the first call's
time (tracing and compilation included, measured in a fresh process that imports
only that backend's framework) and the speed-up over running every
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
import importlib.util
import statistics
import subprocess
import sys
import time

import numpy as np

import pcbatch
from pcbatch import examples
from pcbatch.backends import compaction as compaction_option


def _make_backend(name: str, compaction):
    """One backend by its row name (``jax``, ``jax/c``, ...); imports only its framework."""
    base, compacted = name.removesuffix("/c"), name.endswith("/c")
    option = compaction if compacted else None
    if base == "numpy":
        return pcbatch.NumpyBackend()
    if base == "jax":
        from pcbatch.backends.jax import JaxBackend

        return JaxBackend(compaction=option)
    from pcbatch.backends.tensorflow import TensorFlowBackend

    return TensorFlowBackend(jit_compile=True, compaction=option)


def _backend_names(compaction) -> list:
    """The installed backends' row names; compiled ones twice with ``compaction``."""
    names = ["numpy"]
    for name, module in (("jax", "jax"), ("tf-xla", "tensorflow")):
        if importlib.util.find_spec(module) is not None:
            names += [name] + ([name + "/c"] if compaction is not None else [])
    return names


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


def _first_call(workload: str, backend: str, compaction_spec) -> float:
    """The seconds of the first call (tracing and compilation included) in a fresh
    process that imports only this backend's framework: with TensorFlow loaded beside
    JAX, JAX's first Fibonacci call took 0.61-0.66 s against 0.44-0.46 s alone."""
    command = [sys.executable, __file__, "--first-call", workload, "--backends", backend]
    if compaction_spec is not None:
        command += ["--compaction", compaction_spec]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def _median_first_calls(workload: str, backends, opts) -> dict:
    """Per backend: the median of `_first_call` over ``opts.first_calls`` fresh processes,
    the backends taking turns (one process's first call varied by 0.1 s from run to run
    on the 2-core development machine)."""
    times: dict = {b: [] for b in backends}
    for _ in range(opts.first_calls):
        for b in backends:
            times[b].append(_first_call(workload, b, opts.compaction))
    return {b: statistics.median(t) for b, t in times.items()}


def _time_first_call(workload: str, backend_name: str, compaction) -> None:
    """Runs in the fresh process of `_first_call`: prints the first call's seconds."""
    name, fn, args, depth = next(w for w in _workloads() if w[0] == workload)
    backend = _make_backend(backend_name, compaction)
    start = time.perf_counter()
    _block(fn(*args, backend=backend, max_stack_depth=depth))
    print(time.perf_counter() - start)


def _counts(fn, args, depth, backend):
    """A profiled call's counts (after a first call, so no tracing is profiled)."""
    _block(fn(*args, backend=backend, max_stack_depth=depth))
    with pcbatch.profile() as prof:
        fn(*args, backend=backend, max_stack_depth=depth)
    return prof


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
    parser.add_argument(
        "--first-calls", type=int, default=3, help="fresh processes per first call (median)"
    )
    parser.add_argument("--first-call", default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    compaction = compaction_option.parse_option(opts.compaction)
    if opts.first_call is not None:
        return _time_first_call(opts.first_call, opts.backends, compaction)
    names = _backend_names(compaction)
    if opts.backends:
        names = [n for n in names if n in opts.backends.split(",")]
    backends = {name: _make_backend(name, compaction) for name in names}
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
        firsts = _median_first_calls(name, backends, opts)
        profiles = {b: _counts(fn, args, depth, backend) for b, backend in backends.items()}
        warm = _warm_times(fn, args, depth, backends, opts.repeats)
        for backend_name, prof in profiles.items():
            first = firsts[backend_name]
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
        "\nturns; first: the first call, compilation included, in a fresh process that imports"
        "\nonly that backend's framework (median of --first-calls processes, the backends"
        "\ntaking turns); alone: every example run alone as plain Python."
    )


if __name__ == "__main__":
    main()
