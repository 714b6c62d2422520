"""Plain helpers that write per-example values into an array they made from constants.

``out = np.zeros(2); out += v`` or ``np.multiply(v, 2, out=out)`` in a plain helper:
per example, each call fills its own array. A batched run once wrote every example into
the one array the helper made (NumPy and Torch gave every example the last one's values,
silently). Now NumPy and Torch run such a helper one example at a time (exact, with a
`PerExampleFallbackWarning` at the helper's line saying what to write instead), and the
compiled backends, which cannot, refuse it at the batched function's line before
anything runs. A helper that hands back one buffer it keeps for every call is refused
everywhere: Python's earlier results would change with the buffer, a batch's cannot.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pcbatch
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from pcbatch.errors import TypeInferenceError
from tests import backends
from tests.backends import EAGER_NAMES, backend_param


def add_into_zeros(v):
    out = np.zeros(2)
    out += v
    return out


def multiply_with_out(v):
    out = np.zeros(v.shape)
    np.multiply(v, 2.0, out=out)
    return out


def copy_into(v):
    out = np.zeros(2)
    np.copyto(out, v)
    return out


def put_into(v):
    out = np.zeros(2)
    np.put(out, [0, 1], v)
    return out


def assign_an_item(v):
    out = np.zeros(2)
    out[0] = v[0]
    out[1] = v[1] * 2
    return out


def add_at(v):
    out = np.zeros(3)
    np.add.at(out, [0, 0, 2], v[0])
    return out


HELPERS = [add_into_zeros, multiply_with_out, copy_into, put_into, assign_an_item, add_at]
WRITING_UFUNCS = [add_into_zeros, multiply_with_out, add_at]

_BUFFERS: dict = {}


def doubled_into_a_kept_buffer(x):
    out = _BUFFERS.setdefault((x.shape, x.dtype), np.empty(x.shape, x.dtype))
    np.multiply(x, 2, out=out)  # the same array comes back from every call
    return out


def _batched(helper):
    def uses_helper(x):
        return helper(x).sum() + helper(x)[0]

    uses_helper.__name__ = uses_helper.__qualname__ = f"uses_{helper.__name__}"
    return pcbatch.Context().batch(uses_helper)


@backend_param
@pytest.mark.parametrize("helper", HELPERS, ids=lambda h: h.__name__)
def test_a_helper_filling_its_own_array_gives_each_example_its_values(backend_name, helper):
    fn = _batched(helper)
    xs = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, -5.0]])
    expected = fn(xs, dry_run=True)
    be = backends.backend(backend_name)
    if backend_name not in EAGER_NAMES:
        with pytest.raises(TypeInferenceError, match="uses_") as raised:
            fn(xs, backend=be)
        if helper in WRITING_UFUNCS:  # says why, and what to write
            assert "np.zeros(2) + v" in str(raised.value)
        return
    with pytest.warns(PerExampleFallbackWarning, match="example's values instead"):
        got = fn(xs, backend=be)
    backends.assert_close(got, expected, backend_name)


@pytest.mark.parametrize("backend_name", EAGER_NAMES)
def test_the_fallback_leaves_a_global_array_as_it_was_before_rerunning(backend_name):
    """The batched attempt's write into a global array is undone before the helper runs
    one example at a time, so the global ends as the per-example run leaves it."""
    if backend_name == "torch":
        pytest.importorskip("torch")
    table = np.zeros(2)

    def record(v):
        np.copyto(table, v)
        return table.sum()

    def uses_record(x):
        return record(x) * 1.0

    fn = pcbatch.Context().batch(uses_record)
    xs = np.array([[1.0, 2.0], [3.0, 4.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerExampleFallbackWarning)
        got = fn(xs, backend=backends.backend(backend_name))
    np.testing.assert_allclose(np.asarray(got), [3.0, 7.0])
    np.testing.assert_array_equal(table, [3.0, 4.0])  # the last example's, as in Python


@backend_param
def test_a_helper_returning_one_kept_buffer_for_every_call_is_refused(backend_name):
    def twice_doubled(x):
        y = doubled_into_a_kept_buffer(x)
        z = doubled_into_a_kept_buffer(x + 10)
        return y * 1000 + z

    fn = pcbatch.Context().batch(twice_doubled)
    xs = np.array([1, 2, 3])
    _BUFFERS.clear()
    # plain Python: y is z, so every example gives 22 * 1000 + 22 (for x = 1)
    np.testing.assert_array_equal(fn(xs, dry_run=True), [22022, 24024, 26026])
    _BUFFERS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerExampleFallbackWarning)
        with pytest.raises((TypeInferenceError, ValueError), match="twice_doubled|same array"):
            fn(xs, backend=backends.backend(backend_name))


def same_array(v):
    return v


def first_two(v):
    return v[:2]


def fresh_zeros(v):
    return np.zeros_like(v)


def _change_what_a_helper_returned(helper):
    def change_result(x):
        y = x * 1.0
        w = helper(y)
        w[0] = 5.0
        return y.sum() + w.sum()

    change_result.__name__ = change_result.__qualname__ = f"change_{helper.__name__}"
    return pcbatch.Context().batch(change_result)


@backend_param
@pytest.mark.parametrize("helper", [same_array, first_two, fresh_zeros], ids=lambda h: h.__name__)
def test_changing_what_a_helper_returned_is_refused_where_python_may_share(backend_name, helper):
    """Python shares ``y`` with ``w`` when the helper returns its argument or a view, so
    ``w[0] = 5`` changes ``y``; the frontend cannot see inside the helper, so it refuses
    every array result there (before anything runs), naming the copy to write."""
    fn = _change_what_a_helper_returned(helper)
    with pytest.raises(TypeInferenceError, match=r"w = np.array\(helper\(y\)\)"):
        fn(np.array([[1.0, 2.0, 3.0]]), backend=backends.backend(backend_name))


@backend_param
def test_the_advised_copy_runs_and_a_helpers_array_changed_alone_is_exact(backend_name):
    def copied(x):
        y = x * 1.0
        w = np.array(same_array(y))
        w[0] = 5.0
        return y.sum() + w.sum()

    def changed_alone(x):
        w = fresh_zeros(x)  # x is not read again: nothing could show a sharing
        w[0] = 5.0
        return w.sum()

    xs = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for function in (copied, changed_alone):
        fn = pcbatch.Context().batch(function)
        got = fn(xs, backend=backends.backend(backend_name))
        backends.assert_close(got, fn(xs, dry_run=True), backend_name)
