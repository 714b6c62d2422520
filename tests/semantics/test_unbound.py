"""Python's UnboundLocalError, thread by thread: a read of a local that some batch
member never assigned raises, as the per-example function does; members that did
assign it are unaffected, and variables always assigned before use cost nothing."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from tests import backends

ctx = pcbatch.Context()


@ctx.batch
def last_of_loop(n):
    for i in range(n):
        last = i * 2
    return last


@ctx.batch
def set_in_branch(x):
    if x > 0:
        y = x + 1
    elif x < -5:
        y = x - 1
    return y * 2


@ctx.batch
def assigned_after_check(x):
    if x > 0:
        y = 1
    if x <= 0:
        y = 2
    z = y + y  # checked once: the second read of y is known assigned
    return z


@ctx.batch
def recursive_maybe(n):
    if n > 0:
        r = recursive_maybe(n - 1) + 1
    if n == 0:
        r = 0
    return r


@ctx.batch
def always_assigned(n):
    total = 0
    for i in range(n):
        total = total + i
    return total


def _per_example(fn, *args):
    return fn(*args, dry_run=True)  # the plain function, one batch member at a time


CASES = [
    (last_of_loop, (np.array([2, 3, 5]),)),
    (set_in_branch, (np.array([1, -7, 4]),)),
    (assigned_after_check, (np.array([1, -7, 4]),)),
    (recursive_maybe, (np.array([0, 3, 5]),)),
]


@pytest.mark.parametrize("fn,args", CASES, ids=lambda c: getattr(c, "name", ""))
@backends.backend_param
def test_assigned_everywhere_matches_python(fn, args, backend_name):
    expected = _per_example(fn, *args)
    backends.assert_close(fn(*args, backend=backends.backend(backend_name)), expected,
                          backend_name)


@pytest.mark.parametrize(
    "fn,args,variable",
    [
        (last_of_loop, (np.array([2, 0, 5]),), "last"),
        (set_in_branch, (np.array([1, -3, 4]),), "y"),
    ],
)
@backends.backend_param
@pytest.mark.parametrize("stackless", [False, True])
def test_unassigned_read_raises_unbound_local_error(fn, args, variable, backend_name, stackless):
    if stackless and backend_name not in backends.EAGER_NAMES:
        pytest.skip("the stackless interpreter runs on NumPy")
    with pytest.raises(UnboundLocalError):
        _per_example(fn, *args)
    with pytest.raises(UnboundLocalError, match=f"'{variable}'.*test_unbound.py"):
        fn(*args, backend=backends.backend(backend_name), stackless=stackless)


@backends.backend_param
def test_unassigned_lane_reports_error_status_and_others_stay_right(backend_name):
    result, status = last_of_loop(np.array([2, 0, 5]), backend=backends.backend(backend_name),
                                  return_status=True)
    np.testing.assert_array_equal(np.asarray(status), [0, int(pcbatch.LaneStatus.ERROR), 0])
    np.testing.assert_array_equal(np.asarray(result)[[0, 2]], [2, 8])


def test_functions_without_maybe_unbound_reads_get_no_guard():
    program = ctx.program("always_assigned")
    ops = [op for b in program.function("always_assigned").graph for op in b.instructions]
    assert not any(getattr(op.function, "is_guard", False) for op in ops)
    guarded = ctx.program("last_of_loop").function("last_of_loop")
    assert sum(getattr(op.function, "is_guard", False)
               for b in guarded.graph for op in b.instructions) == 1
