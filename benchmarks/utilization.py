"""Utilization benchmark: lockstep chunks, scheduling policies and refill, in one table.

For each workload (Collatz step counts over 100,000 starting values, Fibonacci
over 10,000 values of n in [5, 22], and the NUTS-shaped ``trajectories`` over
10,000 chains, all with 1,000 lanes) and each way of running it:

- ``chunks/<policy>``: plain batched calls on consecutive chunks of 1,000 inputs
  (every chunk waits for its slowest member), block order from ``<policy>``;
- ``refill/<policy>``: one ``fn.map(inputs, width=1000, schedule=<policy>)`` (free
  lanes refilled in groups, ``--group``, default ``map``'s: a tenth of the lanes);
- ``priority/<policy>``: the same with ``priority=`` a cost estimate per input, so the
  longest start first: ``n`` for Collatz and Fibonacci, the number of trajectories for
  the NUTS-shaped program.

Columns: VM steps and batched primitive executions; lane utilization (mean
fraction of lanes active per primitive execution) and occupancy (mean fraction
of lanes holding a live thread per VM step), both from ``pcbatch.profile()``;
wall time of one run without the profiler (compiled backends compile first, in
a run not timed); and memory: the bytes of registers and stacks the VM
allocates for 1,000 lanes at the run's ``max_stack_depth`` (registers one row
per lane; FULL variables and the program counter a stack of ``max_stack_depth``
rows) against the seed peer's rule of a full stack for every variable, and the
refill's pending-input and result buffers (N rows each, a column of their own). The allocation pass
(`pcbatch.passes.allocate`) decides which variables need no storage
(null/temporary), one row (register) or a stack (full).

Usage: ``python benchmarks/utilization.py [--scale S] [--backend numpy|jax|tensorflow]
[--policies returns_first,...] [--workloads collatz,fib,nuts] [--group G]
[--compaction auto|16,128]``. ``--scale 0.01`` runs 1/100 of every input count with
1/100 of the lanes (a smoke test). ``--compaction`` runs a compiled backend with that
compaction option (`pcbatch.vm.compact`) and adds a column: the block executions
that ran on a bucket of lanes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import pcbatch
from pcbatch import examples
from pcbatch.backends import compaction as compaction_option
from pcbatch.ir.types import VariableAllocation, flatten
from pcbatch.passes import order_blocks


def _workloads(scale: float):
    """(name, batched function, inputs, lanes, max_stack_depth, cost estimate per input)
    at ``scale``."""
    rng = np.random.RandomState(0)
    lanes = max(1, round(1000 * scale))
    count = lambda n: max(1, round(n * scale))
    starts = np.arange(1, count(100_000) + 1)
    yield "collatz", examples.collatz, [starts], lanes, 4, starts
    # Fibonacci: fib(n) = n for n <= 1, so n in [5, 22] recurses at most 22 deep.
    n = rng.randint(5, 23, size=count(10_000))
    yield "fib", examples.fib, [n], lanes, 24, n
    chains = count(10_000)
    nuts_args = [rng.randint(0, examples.MOD, size=chains), rng.randint(1, 13, size=chains)]
    yield "nuts", examples.trajectories, nuts_args, lanes, 8, nuts_args[1]


def _chunks(fn, args, lanes: int, options: dict):
    count = len(args[0])
    for start in range(0, count, lanes):
        fn(*[a[start : start + lanes] for a in args], **options)


def _runner(mode: str, fn, args, lanes: int, options: dict, group, cost):
    if mode == "chunks":
        return lambda: _chunks(fn, args, lanes, options)
    priority = cost if mode == "priority" else None
    return lambda: fn.map(*args, width=lanes, group=group, priority=priority, **options)


def _leaf_bytes(type_) -> int:
    return sum(int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
               for t in flatten(type_.tensors))


def memory(program, lanes: int, depth: int) -> tuple:
    """(bytes pcbatch allocates, bytes under one-stack-per-variable) for ``lanes`` threads.

    A register is one row per lane; a stack keeps ``depth`` saved rows below its top
    row, with an int32 depth per lane. The program counter is a stack in both.
    """
    stack = lambda row: lanes * (row * (depth + 1) + 4)
    ours = peer = stack(4)  # the program counter (int32)
    for name, type_ in program.var_types.items():
        row, alloc = _leaf_bytes(type_), program.alloc_of(name)
        peer += stack(row)
        if alloc == VariableAllocation.FULL:
            ours += stack(row)
        elif alloc == VariableAllocation.REGISTER:
            ours += lanes * row
    return ours, peer


def refill_buffers(program, lanes: int, count: int) -> int:
    """Bytes of a refill's pending inputs (N rows) and results (N + lanes rows)."""
    inputs = sum(_leaf_bytes(program.var_types[v]) for v in program.vars_in)
    results = sum(_leaf_bytes(program.var_types[v]) for v in program.vars_out)
    return count * inputs + (count + lanes) * results


def _row(name, mode, policy, fn, args, lanes, depth, backend, group, cost) -> str:
    options = dict(max_stack_depth=depth, schedule=policy, backend=backend)
    run = _runner(mode, fn, args, lanes, options, group, cost)
    with pcbatch.profile() as prof:
        run()
    if getattr(backend, "staged", False):
        run()  # compiles the unprofiled program: not timed
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    program = fn.context.lowered_for_args(fn.name, [a[:lanes] for a in args], backend)
    ours, peer = memory(program, lanes, depth)
    buffers = refill_buffers(program, lanes, len(args[0])) if mode != "chunks" else 0
    return (
        f"{name:<14} {mode + '/' + policy:<22} {len(args[0]):>7} {prof.block_executions:>9} "
        f"{prof.primitive_executions:>9} {prof.lane_utilization:>5.3f} {prof.occupancy:>5.3f} "
        f"{seconds:>8.2f} {ours / 1024:>9.1f} {peer / 1024:>9.1f} {peer / ours:>6.1f}x "
        f"{buffers / 1024:>8.1f} {sum(prof.compacted_block_executions.values()):>7}"
    )


def _backend(name: str, compaction=None):
    if name == "numpy":
        if compaction is not None:
            raise SystemExit("--compaction is for the compiled backends (jax, tensorflow)")
        return pcbatch.NumpyBackend()
    if name == "jax":
        from pcbatch.backends.jax import JaxBackend

        return JaxBackend(compaction=compaction)
    from pcbatch.backends.tensorflow import TensorFlowBackend

    return TensorFlowBackend(compaction=compaction)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="input counts and lanes x S")
    parser.add_argument("--backend", default="numpy", choices=("numpy", "jax", "tensorflow"))
    parser.add_argument(
        "--workloads", default="collatz,fib,nuts", help="a subset of collatz,fib,nuts"
    )
    parser.add_argument(
        "--policies",
        default="returns_first",
        help="policies to compare with lowest_pc, comma-separated",
    )
    parser.add_argument(
        "--group", type=int, default=None, help="refill group (default: map's, lanes // 10)"
    )
    parser.add_argument(
        "--compaction", default=None, help="compiled backends: auto or widths like 16,128"
    )
    opts = parser.parse_args()
    policies = ["lowest_pc"] + [p for p in opts.policies.split(",") if p and p != "lowest_pc"]
    for policy in policies:
        order_blocks.check_policy(policy)
    backend = _backend(opts.backend, compaction_option.parse_option(opts.compaction))
    header = (
        f"{'workload':<14} {'mode/policy':<22} {'inputs':>7} {'steps':>9} {'prims':>9} "
        f"{'util':>5} {'occ':>5} {'wall s':>8} {'mem KiB':>9} {'peer KiB':>9} {'saving':>7} "
        f"{'bufs KiB':>8} {'compact':>7}"
    )
    print(
        f"backend: {opts.backend}; scale {opts.scale}; refill group {opts.group or 'default'}; "
        f"compaction {opts.compaction or 'off'}"
    )
    print(header)
    print("-" * len(header))
    chosen = opts.workloads.split(",")
    for name, fn, args, lanes, depth, cost in _workloads(opts.scale):
        if name not in chosen:
            continue
        for mode in ("chunks", "refill", "priority"):
            for policy in policies:
                row = _row(name, mode, policy, fn, args, lanes, depth, backend, opts.group, cost)
                print(row, flush=True)
    print(
        "\nsteps: VM block executions; prims: batched primitive executions; util: mean "
        "fraction of lanes active per primitive execution; occ: mean fraction of lanes "
        "holding a live thread per step; wall s: one unprofiled run; mem: registers and "
        "stacks allocated for the lanes at max_stack_depth; peer: a full stack for every "
        "variable; saving: peer / mem; bufs: refill's pending-input and result buffers; "
        "compact: steps run on a bucket of lanes (--compaction)."
    )


if __name__ == "__main__":
    main()
