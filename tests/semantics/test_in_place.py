"""In-place changes in a batched function reach neither the caller nor other examples.

Per example, Python's ``x += 1`` or ``y[0] = 5`` changes that example's array in place.
``dry_run=True`` gives each example an array of its own (it used to give a view of the
caller's array: ``x += 1`` changed the caller's batch, and a shared size-1 batch changed
from one example to the next), and a batched run never writes into its inputs, on any
backend. Constructs that would write into the caller's array are rejected at the line, and the
copy their error asks for (``np.array(x)``) works on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch.errors import AutobatchSyntaxError
from tests import backends


def add_in_place(x):
    x += 1
    return x


def add_shared(x, k):
    x += k
    return x * 2


def set_items_of_a_copy(x):
    y = np.array(x)
    y[0] = 5
    y[1] += x[2]
    return y


def converted_copies(x):
    t = 0
    for i in range(3):
        t = t + i
    y = np.asarray(x, dtype=np.int32)
    y[0] = t
    return y, np.array(t), np.asarray(t, dtype=np.float32)


def set_item_of_parameter(x):
    x[0] = 5
    return x


def ufunc_out(x):
    np.add(x, 1, out=x)
    return x


def _matrix():
    return np.arange(12.0).reshape(4, 3)


def _per_example(function, *args):
    """The plain function on each example, on a copy of its own (the oracle)."""
    size = max(np.shape(a)[0] for a in args if np.ndim(a))
    rows = []
    for i in range(size):
        example = [np.array(a if np.ndim(a) == 0 else a[i if len(a) > 1 else 0]) for a in args]
        rows.append(function(*example))
    if isinstance(rows[0], tuple):
        return [np.stack(column) for column in zip(*rows)]
    return [np.stack(rows)]


CASES = {
    "add_in_place": (add_in_place, lambda: (_matrix(),)),
    "shared_row": (add_shared, lambda: (np.array([[1.0, 2.0, 3.0]]), np.arange(4.0))),
    "shared_scalar": (add_shared, lambda: (np.array(1.5), np.arange(4.0))),
    "items_of_a_copy": (set_items_of_a_copy, lambda: (_matrix(),)),
    "converted_copies": (converted_copies, lambda: (_matrix(),)),
}


@pytest.mark.parametrize("case", CASES)
def test_dry_run_gives_each_example_its_own_array(case):
    function, make_args = CASES[case]
    args = make_args()
    before = [a.copy() for a in args]
    result = pcbatch.Context().batch(function)(*args, dry_run=True)
    for actual, expected in zip(backends.leaves(result), _per_example(function, *before)):
        backends.assert_close(actual, expected, "numpy")
    for arg, old in zip(args, before):
        np.testing.assert_array_equal(arg, old)


@backends.backend_param
@pytest.mark.parametrize("case", CASES)
def test_batched_run_matches_dry_run_and_leaves_inputs(case, backend_name):
    function, make_args = CASES[case]
    args = make_args()
    before = [a.copy() for a in args]
    batched = pcbatch.Context().batch(function)
    result = batched(*args, backend=backends.backend(backend_name))
    expected = batched(*before, dry_run=True)
    for actual, wanted in zip(backends.leaves(result), backends.leaves(expected), strict=True):
        backends.assert_close(actual, wanted, backend_name)
    for arg, old in zip(args, before):
        np.testing.assert_array_equal(arg, old)


@backends.backend_param
@pytest.mark.parametrize(
    ("function", "words"),
    [(set_item_of_parameter, "copy it first"), (ufunc_out, "assign the result instead")],
)
def test_writing_into_a_parameter_is_rejected_at_the_line(function, words, backend_name):
    x = _matrix()
    batched = pcbatch.Context().batch(function)
    with pytest.raises(AutobatchSyntaxError, match=words) as info:
        batched(x, backend=backends.backend(backend_name))
    assert info.value.filename == __file__
    np.testing.assert_array_equal(x, _matrix())
    batched(x, dry_run=True)  # plain Python, on copies
    np.testing.assert_array_equal(x, _matrix())


@pytest.mark.skipif("torch" not in backends.BACKEND_NAMES, reason="needs torch")
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_torch_tensor_argument_is_never_changed(dry_run):
    import torch

    tensor = torch.arange(12.0, dtype=torch.float64).reshape(4, 3)
    result = pcbatch.Context().batch(add_in_place)(tensor, dry_run=dry_run)
    np.testing.assert_array_equal(tensor.numpy(), _matrix())
    np.testing.assert_array_equal(result.numpy(), _matrix() + 1)
