"""Compaction (``compaction=`` on compiled backends): blocks run on a bucket of their
active rows give the per-example run's results, and some steps do run compacted.

The compiled backends (`tests/backends.py`) run each program with a small bucket
(4 lanes of batches of about 10; 2 and 4 for Collatz), so
steps with few threads at a block take the gathered path; the profile's
per-bucket counts show that they did. NumPy already runs only the active rows
(it has no compaction option); its counts are the reference for the schedule.
The oracle is ``fn(*args, dry_run=True)``. Each compaction bucket compiles every
block once more, so the batches and the program list are kept small.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch import examples
from pcbatch.backends import compaction
from pcbatch.errors import StackOverflowError
from tests import tiers
from tests.backends import COMPILED_NAMES, assert_close, backend, leaves
from tests.programs.python_corpus import PY_CORPUS_BY_NAME

WIDTHS = (4,)
compiled_param = pytest.mark.parametrize(
    "backend_name", COMPILED_NAMES
)

# Recursion (fib, hanoi, digit_frames), mutual recursion, loops, the NUTS-shaped tree,
# item assignment into buffers with event shapes (running_maxima, digit_frames).
CORPUS = ["fib", "even_odd", "collatz", "hanoi", "digit_frames", "running_maxima"]



def _run_compacted(backend_name, fn, *args, widths=WIDTHS, **options):
    with pcbatch.profile() as prof:
        actual = fn(*args, backend=backend(backend_name, compaction=widths), **options)
    return actual, prof


def _assert_same(actual, expected, backend_name):
    for a, e in zip(leaves(actual), leaves(expected), strict=True):
        assert_close(a, e, backend_name)


# The fast tier takes the programs in turn, one compiled backend each (tests/tiers.py).
@pytest.mark.parametrize(
    ("name", "backend_name"),
    tiers.in_turn([(name,) for name in CORPUS], COMPILED_NAMES),
)
def test_compacted_corpus_equals_dry_run(name, backend_name):
    # Collatz (cheap to compile) with two buckets: each step picks one of three widths.
    widths = (2, 4) if name == "collatz" else WIDTHS
    entry = PY_CORPUS_BY_NAME[name]
    args = entry.make_args(np.random.RandomState(len(name)), 10)
    expected = entry.fn(*args, dry_run=True)
    actual, prof = _run_compacted(
        backend_name, entry.fn, *args, widths=widths, max_stack_depth=entry.max_stack_depth
    )
    _assert_same(actual, expected, backend_name)
    assert sum(prof.compacted_block_executions.values()) > 0
    assert set(prof.compacted_block_executions) <= set(widths)


@compiled_param
def test_compacted_trajectories_count_like_full_width(backend_name):
    """The NUTS-shaped program: same results, and the same schedule (steps, primitive
    lanes) as NumPy's active-rows run; only how each step runs differs."""
    x = np.random.RandomState(5).randint(0, 1000, 9)
    n_traj = np.random.RandomState(6).randint(0, 5, 9)
    expected = examples.trajectories(x, n_traj, dry_run=True)
    actual, prof = _run_compacted(backend_name, examples.trajectories, x, n_traj)
    _assert_same(actual, expected, backend_name)
    with pcbatch.profile() as reference:
        examples.trajectories(x, n_traj, backend=backend("numpy"))
    assert prof.block_executions == reference.block_executions
    assert prof.primitive_lanes == reference.primitive_lanes
    assert sum(prof.compacted_block_executions.values()) > 0
    assert not reference.compacted_block_executions


@compiled_param
def test_compacted_stack_overflow_is_detected(backend_name):
    """A push past the stack in a compacted block still stops the run and raises."""
    n = np.array([2, 3, 12])  # one deep thread: it recurses alone, in the 2-lane bucket
    with pytest.raises(StackOverflowError, match="fib"):
        _run_compacted(backend_name, examples.fib, n, max_stack_depth=6)


def test_buckets():
    assert compaction.buckets(None, 1000) == []
    assert compaction.buckets("auto", 1000) == [16, 128]
    assert compaction.buckets("auto", 100) == [16]
    assert compaction.buckets("auto", 20) == []
    assert compaction.buckets("auto", 100_000) == [256, 2048, 16384]
    assert compaction.buckets((64, 8, 2000), 1000) == [8, 64]
    with pytest.raises(ValueError, match="compaction"):
        compaction.check_option("fast")
    with pytest.raises(ValueError, match="positive ints"):
        compaction.check_option((0, 4))


@compiled_param
def test_compacted_host_callback_sees_each_thread_once_per_visit(backend_name):
    """A host callback in a compacted block reports the active threads' values only."""
    from tests import test_host_callback as hc

    xs = np.array([3, 1, 0, 2, 4, 6])
    hc.calls.clear()
    expected = hc.countdown(xs, dry_run=True)
    oracle = hc._reported()
    hc.calls.clear()
    actual, prof = _run_compacted(backend_name, hc.countdown, xs)
    assert_close(actual, expected, backend_name)
    assert hc._reported() == oracle
    assert sum(prof.compacted_block_executions.values()) > 0
