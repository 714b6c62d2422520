"""A value's shape per example: one per variable, never hidden by broadcasting (issue 24;
programs in ``shapes_src``).

- A variable holding different shapes on different paths (``w = v[:1]`` on one, ``w =
  v * 2`` on another; ``acc = 1.0`` before a loop that makes it a vector) was
  broadcast to the larger shape on every backend, silently: ``w.sum()`` summed the
  first item three times, and a zero-trip loop's ``acc.sum()`` was 3.0 where Python
  gives 1.0. It is refused before anything runs, at both lines.
- A slice whose bound is a per-example value (``v[:k]``, ``v[k:]`` with ``k`` a
  variable) has a length that depends on the values. TensorFlow took one example's
  bound for all (``v[:k].sum()`` was 6.0 where Python gives 1.0), and type inference
  took the length from its dummy values (``v[k:]`` with ``k = 3`` of a 4-vector came
  back 3 items long on NumPy and Torch). NumPy and Torch run such a line one example
  at a time where its result's shape is the same for every example, and fail at the
  line where it is not; JAX and TensorFlow refuse it at the line, saying what to write.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pcbatch
from pcbatch.backends.batched_array import PerExampleFallbackWarning
from tests import backends
from tests.semantics import shapes_src as src

V = np.array([[1.0, 2.0, 3.0, 4.0], [4.0, 5.0, 6.0, 7.0], [0.5, -1.0, 2.0, 8.0]])


def _batched(function):
    return pcbatch.Context().batch(function)


def _line(function, offset: int) -> str:
    return f"{src.__file__}:{inspect.getsourcelines(function)[1] + offset}"


@backends.backend_param
@pytest.mark.parametrize(
    ("name", "other", "lines"),
    [
        ("vector_or_its_first_item", np.array([1, -1, 0]), (1, 3)),
        ("product_from_a_scalar", np.array([2, 0, 1]), (1, 3)),
    ],
)
def test_a_variable_of_two_shapes_is_refused_at_its_lines(name, other, lines, backend_name):
    program = getattr(src, name)
    per_example = [program(v, o) for v, o in zip(V, other)]
    broadcast = [program(v, o) for v, o in zip(V, np.ones_like(other))]
    assert per_example != broadcast  # what broadcasting the smaller shape would give
    with pytest.raises(pcbatch.TypeInferenceError, match="np.zeros_like") as info:
        _batched(program)(V, other, backend=backends.backend(backend_name))
    for offset in lines:
        assert _line(program, offset) in str(info.value)


@backends.backend_param
def test_a_variable_of_one_shape_from_the_start_runs(backend_name):
    batched = _batched(src.product_from_ones)
    n = np.array([2, 0, 1])
    want = batched(V, n, dry_run=True)
    np.testing.assert_array_equal(want, [src.product_from_ones(v, k) for v, k in zip(V, n)])
    backends.assert_close(batched(V, n, backend=backends.backend(backend_name)), want, backend_name)


@backends.backend_param
@pytest.mark.parametrize("name", ["prefix_sum", "window_from"])
def test_a_slice_with_a_per_example_bound_runs_per_example_or_is_refused(name, backend_name):
    program = getattr(src, name)
    k = np.array([1, 3, 2])
    want = np.array([program(v, i) for v, i in zip(V, k)])
    batched = _batched(program)
    backend = backends.backend(backend_name)
    if backend_name in backends.EAGER_NAMES:
        with pytest.warns(PerExampleFallbackWarning):
            backends.assert_close(batched(V, k, backend=backend), want, backend_name)
        return
    with pytest.raises(pcbatch.TypeInferenceError, match="np.arange") as info:
        batched(V, k, backend=backend)
    assert _line(program, 1) in str(info.value)


@backends.backend_param
def test_a_slice_whose_length_depends_on_the_values_fails_at_the_line(backend_name):
    """``k = 3`` stored, then ``v[k:]``: type inference's dummy ``k`` made it 3 items long."""
    n = np.array([1, 0, 2])
    with pytest.raises((pcbatch.TypeInferenceError, pcbatch.PcbatchError), match="depend") as info:
        _batched(src.tail_after_a_loop)(V, n, backend=backends.backend(backend_name))
    assert _line(src.tail_after_a_loop, 4) in str(info.value)


@backends.backend_param
def test_slices_with_constant_bounds_and_masks_run(backend_name):
    n = np.array([1, 0, 2])
    k = np.array([1, 3, 2])
    for program, args in [(src.tail_from_a_literal, (V, n)), (src.masked_prefix_sum, (V, k))]:
        batched = _batched(program)
        want = backends.leaves(batched(*args, dry_run=True))
        got = backends.leaves(batched(*args, backend=backends.backend(backend_name)))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            backends.assert_close(g, w, backend_name)


@backends.backend_param
def test_assigning_into_a_slice_of_per_example_length_writes_numpys_items(backend_name):
    # refused at the line before; now a mask along the first axis (test_item_assignment)
    k = np.array([1, 3, -2])
    batched = _batched(src.zero_a_prefix)
    got = batched(V, k, backend=backends.backend(backend_name))
    backends.assert_identical(np.asarray(got), np.asarray(batched(V, k, dry_run=True)))
