"""Core benchmark: batched runs against running each example alone.

Prints one table. For each program and batch: VM block executions and batched
primitive executions (counted by ``pcbatch.profile()``), the median wall time
of the stack machine and of the stackless interpreter, the time to run every
example alone through the reference interpreter, and the ratios. All timings
come from one process, side by side; compilation is excluded (done once first).

Usage: ``python benchmarks/core.py [--repeats N] [--batch B]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pcbatch
from pcbatch import examples
from pcbatch.passes import infer_types
from pcbatch.vm import reference, runner


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cases(batch: int):
    rng = np.random.RandomState(0)
    yield "fib n~U[10,16]", examples.build_fib(), [rng.randint(10, 16, size=batch)], 20
    yield "collatz x~U[1,10^4]", examples.build_collatz(), [rng.randint(1, 10_000, size=batch)], 2
    yield (
        "nuts-shaped tree",
        examples.build_nuts_tree(),
        [rng.randint(0, examples.MOD, size=batch), rng.randint(1, 12, size=batch)],
        8,
    )


def _row(name: str, program, args, depth: int, opts) -> str:
    def run(stackless: bool):
        return runner.run(program, args, max_stack_depth=depth, stackless=stackless)

    run(False), run(True)  # compile both once
    with pcbatch.profile() as prof:
        run(False)
    stack = _median_seconds(lambda: run(False), opts.repeats)
    stackless = _median_seconds(lambda: run(True), opts.repeats)
    typed = infer_types.run(program, pcbatch.NumpyBackend(), runner.signature_of(args))
    alone = _median_seconds(lambda: reference.run_batch(typed, args), 1)
    return (
        f"{name:<20} {opts.batch:>6} {prof.block_executions:>7} "
        f"{prof.primitive_executions:>7} {prof.lane_utilization:>5.2f} {stack:>8.3f} "
        f"{stackless:>11.3f} {alone:>8.3f} {alone / stack:>10.1f}x {alone / stackless:>14.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1000)
    opts = parser.parse_args()
    header = (
        f"{'program':<20} {'batch':>6} {'blocks':>7} {'prims':>7} {'util':>5} "
        f"{'stack s':>8} {'stackless s':>11} {'alone s':>8} {'alone/stack':>11} "
        f"{'alone/stackless':>15}"
    )
    print(header)
    print("-" * len(header))
    for name, program, args, depth in _cases(opts.batch):
        print(_row(name, program, args, depth, opts))
    print(
        "\nblocks: VM steps of the stack machine; prims: batched primitive calls; util: mean"
        "\nfraction of lanes active per primitive; times are medians of --repeats runs"
        "\n(the per-example reference run once)."
    )


if __name__ == "__main__":
    main()
