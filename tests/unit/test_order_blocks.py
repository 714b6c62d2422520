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
