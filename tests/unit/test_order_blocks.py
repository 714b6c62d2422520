"""The block-ordering pass: each policy renumbers blocks and changes only the work done."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch import examples
from pcbatch.ir.nodes import PushGotoOp
from pcbatch.passes import order_blocks


def _lowered(schedule):
    ctx = examples.context
    program = ctx.program("fib")
    sig = pcbatch.vm.runner.signature_of([np.arange(3)])
    return ctx._cache.get(program, sig, pcbatch.NumpyBackend(), lowered=True, schedule=schedule)


def test_returns_first_puts_return_landings_before_every_other_block():
    base, ordered = _lowered("lowest_pc"), _lowered("returns_first")
    assert sorted(b.label for b in base.graph) == sorted(b.label for b in ordered.graph)
    assert ordered.graph.blocks[0].label == base.graph.blocks[0].label  # threads start there
    landings = {
        b.terminator.return_target for b in ordered.graph if isinstance(b.terminator, PushGotoOp)
    }
    labels = [b.label for b in ordered.graph.blocks[1:]]
    assert landings and set(labels[: len(landings)]) == landings



def test_returns_first_runs_the_later_continuation_of_a_function_first():
    """fib's landing after its second call comes before the one after its first call, so
    threads unwinding several levels pass the first landing once, not once per level."""
    lowest, ordered = _lowered("lowest_pc"), _lowered("returns_first")
    calls = lambda p: [b.terminator for b in p.graph if isinstance(b.terminator, PushGotoOp)]
    in_program_order = [t.return_target for t in calls(lowest) if t.return_target.startswith("fib")]
    position = {b.label: i for i, b in enumerate(ordered.graph.blocks)}
    assert len(in_program_order) == 2
    first_call, second_call = in_program_order
    assert position[second_call] < position[first_call]


def test_a_tree_builder_passes_its_first_continuation_once_per_unwinding():
    """In a loop of tree builds (NUTS's shape), the landing after build_tree's first call,
    which goes on to make the second call, runs less often than the landing after the
    second call (which runs once per level unwound). Run first, it ran once per level too
    (33 against 26 executions here)."""
    x = np.random.RandomState(2).randint(0, 1000, size=64)
    n_traj = np.full(64, 6)
    counts = {}
    for policy in ("lowest_pc", "returns_first"):
        with pcbatch.profile() as prof:
            result = examples.trajectories(x, n_traj, schedule=policy)
        for got, want in zip(result, examples.trajectories(x, n_traj, schedule="lowest_pc")):
            np.testing.assert_array_equal(got, want)
        counts[policy] = prof.block_counts
    ordered = counts["returns_first"]
    assert ordered["build_tree.endif1:1"] < ordered["build_tree.endif2:1"]
    assert sum(ordered.values()) < sum(counts["lowest_pc"].values())

def test_every_policy_gives_the_same_results_with_different_work():
    n = np.random.RandomState(0).randint(10, 16, size=50)
    counts = {}
    for policy in order_blocks.POLICIES:
        with pcbatch.profile() as prof:
            result = examples.fib(n, max_stack_depth=20, schedule=policy)
        np.testing.assert_array_equal(result, [examples.fib_one(int(k)) for k in n])
        counts[policy] = prof.block_executions
    assert all(c > 0 for c in counts.values())


def test_an_unknown_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown schedule 'fastest'.*lowest_pc"):
        examples.fib(np.arange(3), schedule="fastest")
