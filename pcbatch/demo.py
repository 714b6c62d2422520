"""The demo: batched recursion on the NumPy backend (``python -m pcbatch.demo``).

Runs Fibonacci (double recursion) and a NUTS-shaped tree builder over a batch
of 1,000 examples each, checks the results against plain Python, and prints
throughput, the work the VM did, and how well lanes were used, beside the
per-example reference interpreter.
"""

from __future__ import annotations

import time

import numpy as np

import pcbatch
from pcbatch import examples
from pcbatch.passes import infer_types
from pcbatch.vm import reference, runner


def _reference_seconds_per_example(program, args, sample: int) -> float:
    head = [a[:sample] for a in args]
    typed = infer_types.run(program, pcbatch.NumpyBackend(), runner.signature_of(head))
    start = time.perf_counter()
    reference.run_batch(typed, head)
    return (time.perf_counter() - start) / sample


def _row(name, program, args, expected, max_stack_depth):
    runner.run(program, [a[:2] for a in args], max_stack_depth=max_stack_depth)  # compile once
    with pcbatch.profile() as prof:
        start = time.perf_counter()
        result = runner.run(program, args, max_stack_depth=max_stack_depth)
        seconds = time.perf_counter() - start
    first = result[0] if isinstance(result, tuple) else result
    ok = np.array_equal(first, expected)
    per_example_ref = _reference_seconds_per_example(program, args, sample=50)
    batch = len(args[0])
    print(
        f"{name:<11} {batch:>6} {seconds:>8.3f} {batch / seconds:>10.0f} "
        f"{prof.block_executions:>8} {prof.primitive_executions:>8} "
        f"{prof.lane_utilization:>6.3f} {prof.occupancy:>6.3f} "
        f"{per_example_ref * batch / seconds:>8.1f}x  {'ok' if ok else 'MISMATCH'}"
    )
    return ok


def main() -> int:
    rng = np.random.RandomState(0)
    n = rng.randint(10, 19, size=1000)
    x = rng.randint(0, examples.MOD, size=1000)
    n_traj = rng.randint(1, 12, size=1000)
    print("pcbatch demo: one-example programs run over a batch on the NumPy backend\n")
    print(
        f"{'program':<11} {'batch':>6} {'wall s':>8} {'examples/s':>10} "
        f"{'blocks':>8} {'prims':>8} {'util':>6} {'occup':>6} {'vs ref':>9}"
    )
    fib_expected = np.array([examples.fib_one(k) for k in n])
    tree_expected = np.array([examples.nuts_tree_one(a, b)[0] for a, b in zip(x, n_traj)])
    ok = _row("fibonacci", examples.build_fib(), [n], fib_expected, 20)
    ok &= _row("nuts-shaped", examples.build_nuts_tree(), [x, n_traj], tree_expected, 8)
    print(
        "\nblocks: VM steps; prims: batched primitive calls; util: mean fraction of lanes"
        "\nactive per primitive; occup: mean fraction of lanes not yet finished; vs ref:"
        "\nspeed-up over running each example alone in the reference interpreter."
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
