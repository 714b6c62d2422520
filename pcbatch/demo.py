"""The demo: ordinary Python recursion, batched on NumPy (``python -m pcbatch.demo``).

Runs the seed's Fibonacci (double recursion) and a NUTS-shaped program (a loop
of recursive tree builds with data-dependent early stops), both written as
plain Python in `pcbatch.examples`, over 1,000 examples each. Checks the
results against running each example alone (``dry_run=True``) and prints
throughput, the VM's work and how well lanes were used.
"""

from __future__ import annotations

import time

import numpy as np

import pcbatch
from pcbatch import examples


def _timed(fn, *args, **options):
    start = time.perf_counter()
    result = fn(*args, **options)
    return result, time.perf_counter() - start


def _row(name, fn, args, max_stack_depth):
    fn(*[a[:2] for a in args], max_stack_depth=max_stack_depth)  # compile once
    with pcbatch.profile() as prof:
        result, seconds = _timed(fn, *args, max_stack_depth=max_stack_depth)
    alone, alone_seconds = _timed(fn, *[a[:100] for a in args], dry_run=True)
    first = result[0] if isinstance(result, tuple) else result
    first_alone = alone[0] if isinstance(alone, tuple) else alone
    ok = np.array_equal(first[:100], first_alone)
    batch = len(args[0])
    speedup = (alone_seconds / 100) * batch / seconds
    print(
        f"{name:<12} {batch:>6} {seconds:>8.3f} {batch / seconds:>11.0f} "
        f"{prof.block_executions:>7} {prof.primitive_executions:>7} "
        f"{prof.lane_utilization:>6.3f} {prof.occupancy:>6.3f} {speedup:>8.1f}x  "
        f"{'ok' if ok else 'MISMATCH'}"
    )
    return ok


def main() -> int:
    rng = np.random.RandomState(0)
    n = rng.randint(10, 19, size=1000)
    x = rng.randint(0, examples.MOD, size=1000)
    n_traj = rng.randint(1, 12, size=1000)
    print("pcbatch demo: plain Python functions for one example, run over a batch (NumPy)\n")
    print(
        f"{'program':<12} {'batch':>6} {'wall s':>8} {'examples/s':>11} "
        f"{'blocks':>7} {'prims':>7} {'util':>6} {'occup':>6} {'vs alone':>9}"
    )
    ok = _row("fibonacci", examples.fib, [n], 20)
    ok &= _row("nuts-shaped", examples.trajectories, [x, n_traj], 8)
    print(
        "\nblocks: VM steps; prims: batched primitive calls; util: mean fraction of lanes"
        "\nactive per primitive; occup: mean fraction of lanes not yet finished; vs alone:"
        "\nspeed-up over running each example alone in plain Python (dry_run=True)."
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
