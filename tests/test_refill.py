"""Refill (``fn.map(inputs, width=B)``): N inputs through B lanes equal the per-example run.

Every test runs on every backend (`tests/backends.py`). The oracle is
``fn(*args, dry_run=True)``. Input counts below, at and above the width, and
not a multiple of it; both scheduling policies; recursion (stack depths reset
between the inputs a lane runs), loops, tuple and namedtuple results, vector
arguments and values shared by every input. Occupancy counts show that refill
keeps lanes busy where a lockstep batch idles them.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch import examples
from pcbatch.vm.machine import StepLimitError
from tests import tiers
from tests.backends import BACKEND_NAMES, assert_close, backend, backend_param, leaves
from tests.programs.python_corpus import PY_CORPUS_BY_NAME

# (corpus program, input count, width): N < B, N == B, N not a multiple of B.
CORPUS_CASES = [
    ("collatz", 9, 16),
    ("even_odd", 12, 12),
    ("ackermann", 10, 3),
    ("mod3", 11, 4),
    ("hanoi", 7, 2),
    ("gcd_mod", 10, 3),
    ("newton_sqrt", 9, 4),
    ("search_sorted", 10, 3),
    ("nuts_trajectories", 7, 3),
    ("leapfrog_oscillator", 8, 3),
]
NUMPY_ONLY = {"guarded_lookup", "guarded_div", "first_big"}


def _assert_same(actual, expected, backend_name):
    assert type(actual) is type(expected) or not isinstance(expected, tuple)
    for a, e in zip(leaves(actual), leaves(expected), strict=True):
        assert_close(a, e, backend_name)


# Every case on NumPy; on JAX and TensorFlow the fast tier takes the cases in turn (tests/tiers.py).
@pytest.mark.parametrize(
    ("name", "count", "width", "backend_name"), tiers.in_turn(CORPUS_CASES, BACKEND_NAMES)
)
def test_map_equals_dry_run(name, count, width, backend_name):
    entry = PY_CORPUS_BY_NAME[name]
    args = entry.make_args(np.random.RandomState(count), count)
    expected = entry.fn(*args, dry_run=True)
    actual = entry.fn.map(
        *args, width=width, max_stack_depth=entry.max_stack_depth, backend=backend(backend_name)
    )
    _assert_same(actual, expected, backend_name)


@pytest.mark.parametrize(
    ("schedule", "backend_name"),
    tiers.in_turn([("lowest_pc",), ("returns_first",), ("most_threads",)], BACKEND_NAMES),
)
def test_map_under_every_policy(schedule, backend_name):
    _check_trajectories(backend_name, 9, width=5, schedule=schedule)


def _check_trajectories(backend_name, count: int, **map_options):
    """The NUTS-shaped program mapped over ``count`` inputs, against the per-example run."""
    x = np.random.RandomState(5).randint(0, 1000, count)
    n_traj = np.random.RandomState(6).randint(0, 5, count)
    priority = n_traj if map_options.pop("priority", None) == "n_traj" else None
    expected = examples.trajectories(x, n_traj, dry_run=True)
    actual = examples.trajectories.map(
        x, n_traj, priority=priority, backend=backend(backend_name), **map_options
    )
    _assert_same(actual, expected, backend_name)


@backend_param
def test_map_shares_values_without_the_input_dimension(backend_name):
    """A 0-d argument is one value for every input, as in a plain batched call; inputs
    may be given by keyword."""
    entry = PY_CORPUS_BY_NAME["gcd_mod"]
    a = np.random.RandomState(0).randint(0, 200, 10)
    expected = entry.fn(a, np.int64(84), dry_run=True)
    actual = entry.fn.map(a, b=np.int64(84), width=4, backend=backend(backend_name))
    _assert_same(actual, expected, backend_name)


@backend_param
def test_map_of_no_inputs(backend_name):
    result = examples.fib.map(np.zeros((0,), np.int64), width=8, backend=backend(backend_name))
    assert np.asarray(result).shape == (0,)
    assert np.asarray(result).dtype == np.asarray(examples.fib(np.array([3]))).dtype


@backend_param
def test_map_with_deep_and_too_deep_recursion(backend_name):
    """A lane runs shallow inputs after a deep one (its stacks start empty again)."""
    n = np.array([2, 11, 3, 1, 9, 10, 4])
    expected = examples.fib(n, dry_run=True)
    actual = examples.fib.map(n, width=3, max_stack_depth=11, backend=backend(backend_name))
    assert_close(actual, expected, backend_name)
    with pytest.raises(pcbatch.StackOverflowError) as info:
        examples.fib.map(n, width=3, max_stack_depth=5, backend=backend(backend_name))
    assert info.value.function == "fib"
    assert info.value.suggested_depth is not None and info.value.suggested_depth >= 10


@backend_param
def test_map_honors_max_steps(backend_name):
    x = np.arange(1, 40)
    with pytest.raises(StepLimitError):
        examples.collatz.map(x, width=4, max_steps=50, backend=backend(backend_name))


def _counts(backend_name, run):
    with pcbatch.profile() as prof:
        run(backend(backend_name))
    return prof


@backend_param
def test_refill_keeps_lanes_busy(backend_name):
    """Collatz over 120 inputs, 10 lanes: refill against 12 lockstep chunks of 10
    (the default group for 10 lanes is 1: each lane refilled at once)."""
    x = np.arange(1, 121)

    def chunked(b):
        for start in range(0, len(x), 10):
            examples.collatz(x[start : start + 10], backend=b)

    lockstep = _counts(backend_name, chunked)
    refilled = _counts(backend_name, lambda b: examples.collatz.map(x, width=10, backend=b))
    # (Lockstep occupancy says little under the default most_threads policy: threads
    # that finish wait at main's return for the others instead of halting.)
    assert refilled.occupancy > 0.9
    assert refilled.lane_utilization > 1.5 * lockstep.lane_utilization
    assert refilled.block_executions < lockstep.block_executions
    # Each input runs its own instructions: the threads each primitive ran for agree.
    assert refilled.primitive_lanes == lockstep.primitive_lanes


@pytest.mark.skipif(len(BACKEND_NAMES) < 2, reason="needs a compiled backend")
def test_refill_counts_agree_across_backends():
    n = np.random.RandomState(2).randint(1, 14, 21)
    run = lambda b: examples.fib.map(n, width=6, backend=b)
    reference = _counts("numpy", run).as_dict()
    for name in BACKEND_NAMES[1:]:
        counts = _counts(name, run).as_dict()
        for key in ("block_executions", "primitive_executions", "primitive_lanes"):
            assert counts[key] == reference[key], (name, key)
        assert counts["occupancy"] == pytest.approx(reference["occupancy"], rel=1e-6)


@backend_param
def test_refill_in_groups(backend_name):
    """Free lanes wait for company: same results, fewer steps, higher utilization."""
    x = np.arange(1, 201)
    expected = examples.collatz(x, dry_run=True)
    profiles = {}
    for group in (1, 5, 20):
        with pcbatch.profile() as profiles[group]:
            result = examples.collatz.map(x, width=20, group=group, backend=backend(backend_name))
        assert_close(result, expected, backend_name)
    assert profiles[5].block_executions < profiles[1].block_executions
    assert profiles[5].lane_utilization > profiles[1].lane_utilization
    assert profiles[20].occupancy < profiles[1].occupancy


def test_map_rejects_bad_options():
    x = np.arange(1, 5)
    for width in (0, -2, 2.5, None, True):
        with pytest.raises(ValueError, match="width"):
            examples.collatz.map(x, width=width)
    with pytest.raises(ValueError, match="group"):
        examples.collatz.map(x, width=2, group=0)
    with pytest.raises(ValueError, match="stackless"):
        examples.collatz.map(x, width=2, stackless=True)
    with pytest.raises(TypeError, match="collatz"):
        examples.collatz.map(x, x, width=2)


def test_map_dry_run_is_the_per_example_run():
    x = np.arange(1, 9)
    np.testing.assert_array_equal(
        examples.collatz.map(x, width=3, dry_run=True), examples.collatz(x, dry_run=True)
    )


@backend_param
def test_threads_leaving_main_free_their_lanes_under_every_policy(backend_name):
    """most_threads gathers threads at a loop's exit; with refill it must not, or the
    lanes of finished threads would wait for the slowest instead of taking new inputs."""
    x = np.arange(1, 201)
    steps = {}
    for schedule in ("lowest_pc", "most_threads"):
        with pcbatch.profile() as prof:
            out = examples.collatz.map(
                x, width=20, schedule=schedule, backend=backend(backend_name)
            )
        np.testing.assert_array_equal(np.asarray(out), examples.collatz(x, dry_run=True))
        steps[schedule] = prof.block_executions
    assert steps["most_threads"] <= steps["lowest_pc"], steps


@backend_param
def test_priority_starts_the_longest_inputs_first(backend_name):
    """Fibonacci's thread lengths grow like fib(n): in input order the run ends on a few
    long threads with the other lanes idle; started longest first it does not. The
    results are the same, in input order, whatever the order the inputs start in."""
    # The fast tier's 40 inputs show it as clearly as the slow tier's 60, in a quarter
    # of the steps (the eager machines take a few seconds for the 60).
    low, high, count = tiers.pick((4, 14, 40), (5, 17, 60))
    n = np.random.RandomState(0).randint(low, high, count)
    expected = examples.fib(n, dry_run=True)
    profiles = {}
    for label, priority in (("input order", None), ("longest first", n), ("shortest", -n)):
        with pcbatch.profile() as profiles[label]:
            result = examples.fib.map(
                n, width=8, priority=priority, max_stack_depth=20, backend=backend(backend_name)
            )
        assert_close(result, expected, backend_name)
    longest, shortest = profiles["longest first"], profiles["shortest"]
    assert longest.occupancy > 0.95 > profiles["input order"].occupancy
    assert longest.block_executions < profiles["input order"].block_executions
    # Measured on NumPy: 2,513 steps against 3,969 for the 40 inputs, 10,509 against
    # 18,242 for the 60 (10,966 against 28,971 before jump threading took the base-case
    # test into every call).
    assert longest.block_executions < shortest.block_executions / 1.5
    assert longest.primitive_lanes == shortest.primitive_lanes  # the same work, reordered


@backend_param
def test_priority_with_shared_values_and_several_results(backend_name):
    """Ties keep input order; an argument every input shares is not reordered; each
    of several results comes back in input order."""
    _check_trajectories(backend_name, 11, width=4, priority="n_traj")
    entry = PY_CORPUS_BY_NAME["gcd_mod"]
    a = np.random.RandomState(0).randint(0, 200, 10)
    expected = entry.fn(a, np.int64(84), dry_run=True)
    actual = entry.fn.map(a, np.int64(84), width=3, priority=a % 3, backend=backend(backend_name))
    _assert_same(actual, expected, backend_name)


def test_priority_rejects_what_is_not_one_number_per_input():
    x = np.arange(1, 7)
    cases = [
        (np.arange(5), ValueError, r"shape \(6,\) for 6 inputs"),
        (np.ones((6, 1)), ValueError, "shape"),
        (np.array([1.0, np.nan, 0, 0, 0, 0]), ValueError, "input 1 has NaN"),
        (np.array(list("abcdef")), TypeError, "dtype <U1"),
        (object(), TypeError, "real number"),
    ]
    for priority, error, message in cases:
        with pytest.raises(error, match=message) as info:
            examples.collatz.map(x, width=2, priority=priority)
        assert "collatz.map(priority=...)" in str(info.value)
