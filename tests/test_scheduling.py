"""Scheduling policies and ``pcbatch.sync()``: same results, different work.

The oracle is ``dry_run``; every test runs on every backend. Counts come from
``pcbatch.profile()`` (never timings).
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import pcbatch
from pcbatch.ir.nodes import is_sync_label
from pcbatch.passes import order_blocks
from pcbatch.vm import policy
from tests import backends
from tests.programs import sync_programs as sp
from tests.programs.python_corpus import PY_CORPUS_BY_NAME
from tests.reliability import bad_src

# Control-flow shapes where policies differ: recursion, loops with if/else, early exits.
SAMPLE = ("fib", "gcd_sub", "bisection", "partitions", "find_factor_pair", "nuts_trajectories")
# Compiled backends compile each program per policy (seconds each): a smaller sample, and
# only the dynamic policy (the static ones run the whole corpus in test_frontend_corpus).
COMPILED_SAMPLE = ("bisection", "nuts_trajectories")


def _check_policy(backend_name, policy_name, names):
    options = {"schedule": policy_name}
    if backend_name != "numpy":
        options["backend"] = backends.backend(backend_name)
    for name in names:
        entry = PY_CORPUS_BY_NAME[name]
        args = entry.make_args(np.random.RandomState(3), 9)
        expected = entry.fn(*[np.copy(a) for a in args], dry_run=True)
        actual = entry.fn(*args, max_stack_depth=entry.max_stack_depth, **options)
        if not isinstance(expected, tuple):
            actual, expected = (actual,), (expected,)
        for a, e in zip(actual, expected, strict=True):
            backends.assert_close(a, e, backend_name)


@pytest.mark.parametrize("policy_name", order_blocks.POLICIES)
def test_every_policy_equals_dry_run(policy_name):
    _check_policy("numpy", policy_name, SAMPLE)


@pytest.mark.parametrize("backend_name", backends.BACKEND_NAMES[1:])
def test_the_dynamic_policy_equals_dry_run_on_compiled_backends(backend_name):
    _check_policy(backend_name, "most_threads", COMPILED_SAMPLE)


def _args():
    rng = np.random.RandomState(0)
    return rng.randint(1, 1000, size=16), rng.randint(0, 6, size=16)


# The sync logic is shared by every policy: the dynamic one on NumPy only (compile time).
@pytest.mark.parametrize(
    "backend_name, policy_name",
    [(name, "lowest_pc") for name in backends.BACKEND_NAMES] + [("numpy", "most_threads")],
)
def test_sync_gathers_threads_and_changes_nothing_else(backend_name, policy_name):
    x, k = _args()
    expected = sp.ungathered(x, k, dry_run=True)
    options = {"schedule": policy_name, "backend": backends.scheduled(backend_name)}
    counts = {}
    for fn in (sp.ungathered, sp.gathered):
        with pcbatch.profile() as prof:
            result = fn(x, k, **options)
        backends.assert_close(result, expected, backend_name)
        counts[fn.name] = prof
    gathered, ungathered = counts["gathered"], counts["ungathered"]
    sync_block = [label for label in gathered.block_counts if is_sync_label(label)]
    assert sync_block and gathered.block_counts[sync_block[0]] == 1  # every thread at once
    assert gathered.block_executions < ungathered.block_executions
    assert gathered.primitive_executions < ungathered.primitive_executions


@backends.backend_param
def test_sync_points_that_reach_each_other_do_not_deadlock(backend_name):
    x, k = _args()
    expected = sp.syncs_in_a_loop(x, k, dry_run=True)
    result = sp.syncs_in_a_loop(x, k, backend=backends.backend(backend_name), max_steps=10_000)
    backends.assert_close(result, expected, backend_name)


def test_sync_is_a_no_op_in_plain_python():
    assert pcbatch.sync() is None
    assert sp.gathered.python_function(5, 3) == sp.ungathered.python_function(5, 3)


def test_sync_starts_a_block_in_the_ir():
    lowered = sp.ctx.lowered_for_args("gathered", list(_args()))
    labels = [b.label for b in lowered.graph]
    assert labels.count("gathered.sync3") == 1 and policy.plan_for(lowered) is not None
    assert "gathered.sync3:  # sync_programs.py:32" in str(lowered)


def test_sync_with_arguments_is_an_error_at_the_users_line():
    with pytest.raises(pcbatch.AutobatchSyntaxError, match="takes no arguments") as info:
        sp.bad_sync(np.arange(3))
    lines, first = inspect.getsourcelines(sp.bad_sync.python_function)
    marked = [first + i for i, line in enumerate(lines) if "# ERROR" in line]
    assert [info.value.lineno] == marked


def test_a_recursion_whose_entry_only_starts_threads_needs_no_plan():
    """Jump threading copies fib's base-case test into every call, so main's entry is
    run once, by every thread: most_threads then always runs the lowest program counter,
    and is compiled without a per-step choice (the same block executions)."""
    entry = PY_CORPUS_BY_NAME["fib"]
    args = entry.make_args(np.random.RandomState(0), 12)
    lowered = entry.fn.context.lowered_for_args("fib", args)
    reach = policy._reachability(lowered)
    assert not reach[:, 0].any()  # nothing leads back to main's entry
    assert lowered.schedule == "most_threads" and policy.plan_for(lowered) is None
    executions = {}
    for name in ("lowest_pc", "most_threads"):
        with pcbatch.profile() as prof:
            entry.fn(*args, schedule=name, max_stack_depth=entry.max_stack_depth)
        executions[name] = (prof.block_executions, prof.primitive_executions)
    assert executions["lowest_pc"] == executions["most_threads"]


def _plan(halt, **changes):
    none = np.zeros((halt, halt), bool)
    plan = policy.Plan(
        halt, True, 4, (), (), (), none, np.zeros(halt, bool), np.zeros(halt, bool)
    )
    return policy.Plan(**{**plan.__dict__, **changes})


def test_most_threads_runs_the_fullest_block_and_bounds_starvation():
    plan = _plan(3)
    pc = np.array([0, 1, 1, 3, 2])
    block, wait = policy.choose(policy.NUMPY_OPS, plan, pc, np.zeros(3, int))
    assert block == 1 and wait.tolist() == [1, 0, 1]
    block, wait = policy.choose(policy.NUMPY_OPS, plan, pc, np.array([4, 0, 5]))
    assert block == 2 and wait.tolist() == [5, 1, 0]  # the longest-starved block runs
    halted = np.array([3, 3])
    assert policy.choose(policy.NUMPY_OPS, plan, halted, np.zeros(3, int))[0] == 3


def test_a_thread_whose_stack_overflowed_stops_alone():
    """A staged run marks an overflowed thread with a program counter past the halt: the
    choice ignores it, as a halted thread, and the other threads run on."""
    pc = np.array([0, 1, 3 + 1 + 2, 1])
    for plan, choice in ((_plan(3), 1), (dataclasses.replace(_plan(3), greedy=False), 0)):
        assert policy.choose(policy.NUMPY_OPS, plan, pc, np.zeros(3, int))[0] == choice
    assert policy.choose(policy.NUMPY_OPS, _plan(3), np.array([3, 6]), np.zeros(3, int))[0] == 3


def test_most_threads_waits_for_arriving_threads_and_keeps_order_in_recursion():
    arrivals = np.zeros((3, 3), bool)
    arrivals[0, 2] = True  # threads at block 0 may still arrive at block 2
    pc = np.array([0, 2, 2, 1])
    block, _ = policy.choose(policy.NUMPY_OPS, _plan(3, arrivals=arrivals), pc, np.zeros(3, int))
    assert block == 0
    recursive = np.array([True, True, False])
    block, _ = policy.choose(policy.NUMPY_OPS, _plan(3, recursive=recursive), pc, np.zeros(3, int))
    assert block == 0  # the lowest program counter, inside the recursion


def test_the_numpy_scheduler_follows_the_staged_rule():
    """`Scheduler` (plain Python, NumPy VM) and `choose` (array ops, staged loop) agree."""
    rng = np.random.RandomState(0)
    for trial in range(300):
        halt = rng.randint(2, 7)
        reach = rng.uniform(size=(halt, halt)) < 0.3
        sync = tuple(b for b in range(halt) if rng.uniform() < 0.3)
        onehots = tuple(np.arange(halt) == s for s in sync)
        plan = policy.Plan(
            halt, bool(trial % 3), 3, sync, tuple(reach[:, s] & ~o for s, o in zip(sync, onehots)),
            onehots, rng.uniform(size=(halt, halt)) < 0.3, rng.uniform(size=halt) < 0.3,
            rng.uniform(size=halt) < 0.2,
        )
        scheduler = policy.Scheduler(plan)
        wait = np.zeros(halt, np.int64)
        for _ in range(6):
            pc = rng.randint(0, halt + 1, size=rng.randint(1, 9))
            expected, wait = policy.choose(policy.NUMPY_OPS, plan, pc, wait)
            assert scheduler.next_block(pc) == expected
            np.testing.assert_array_equal(scheduler.wait_array(), wait)


@pytest.mark.parametrize("backend_name", backends.BACKEND_NAMES)
def test_stack_overflow_with_and_without_a_plan_names_the_function(backend_name):
    """Staged runs stop at an overflowed thread whether a plan picks each block or the
    lowest program counter does (a recursion whose entry only starts threads)."""
    options = {} if backend_name == "numpy" else {"backend": backends.backend(backend_name)}
    n = np.array([3, 20, 5])
    for fn, planned in ((PY_CORPUS_BY_NAME["fib"].fn, False), (bad_src.deep, True)):
        lowered = fn.context.lowered_for_args(fn.name, [n])
        assert (policy.plan_for(lowered) is not None) == planned
        with pytest.raises(pcbatch.StackOverflowError) as info:
            fn(n, max_stack_depth=4, **options)
        assert info.value.function == fn.name
