"""Names a batched function reads from outside: globals, closures, helpers, other batched
functions (issue 24, defects 10 and 13).

Every batched result is compared with the plain function run on each example (the
oracle), after the global or closure changed between calls.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import pcbatch
from pcbatch.errors import AutobatchSyntaxError, NestedBatchedCallError
from tests import backends
from tests.semantics import scope_helpers

SCALE = 2.0
OFFSETS = np.array([1.0, 5.0])
THIS_MODULE = sys.modules[__name__]
FACTOR = 4.0  # read as THIS_MODULE.FACTOR


def per_example(function, x):
    """The oracle: the plain function on each example, stacked."""
    return np.stack([np.asarray(function(v)) for v in x])


def _offset(x):
    return x + OFFSETS[0]


def _scaled_context():
    ctx = pcbatch.Context()

    @ctx.batch
    def scaled(x):
        if x > 0:
            return x * SCALE
        return _offset(x) * THIS_MODULE.FACTOR

    return ctx, scaled


X = np.array([1.0, -2.0, 3.0, -0.5])


def _check(batched, backend_name, expected=None):
    got = batched(X, backend=backends.backend(backend_name))
    if expected is None:
        expected = per_example(batched.python_function, X)
    backends.assert_close(got, expected, backend_name)
    return got


# -- globals and closures changed between calls (defect 13) ------------------------


@backends.backend_param
def test_a_global_rebound_between_calls_is_read_anew(backend_name, monkeypatch):
    _, scaled = _scaled_context()
    first = _check(scaled, backend_name)
    monkeypatch.setattr(THIS_MODULE, "SCALE", 3.0)
    second = _check(scaled, backend_name)
    np.testing.assert_allclose(np.asarray(second)[X > 0], 1.5 * np.asarray(first)[X > 0])


@backends.backend_param
def test_a_helpers_global_array_changed_in_place_is_read_anew(backend_name, monkeypatch):
    monkeypatch.setattr(THIS_MODULE, "OFFSETS", OFFSETS.copy())
    _, scaled = _scaled_context()
    _check(scaled, backend_name)
    THIS_MODULE.OFFSETS[0] = 10.0  # in place: the helper's global, a small array
    _check(scaled, backend_name)


@backends.backend_param
def test_a_module_attribute_rebound_between_calls_is_read_anew(backend_name, monkeypatch):
    _, scaled = _scaled_context()
    _check(scaled, backend_name)
    monkeypatch.setattr(THIS_MODULE, "FACTOR", -1.0)
    _check(scaled, backend_name)


def _module_helper_context():
    ctx = pcbatch.Context()

    @ctx.batch
    def shifted(x):
        return scope_helpers.shift(x) * 2

    return shifted


@backends.backend_param
def test_a_global_of_a_helper_in_another_module_rebound_is_read_anew(backend_name, monkeypatch):
    shifted = _module_helper_context()
    _check(shifted, backend_name)
    monkeypatch.setattr(scope_helpers, "SHIFT", 10.0)
    np.testing.assert_allclose(np.asarray(_check(shifted, backend_name)), (X + 10.0) * 2)


def _closure_context():
    ctx = pcbatch.Context()
    power = 2

    @ctx.batch
    def raised(x):
        return x**power

    def set_power(value):
        nonlocal power
        power = value

    return raised, set_power


@backends.backend_param
def test_a_closure_variable_rebound_between_calls_is_read_anew(backend_name):
    raised, set_power = _closure_context()
    _check(raised, backend_name)
    set_power(3)
    third = _check(raised, backend_name)
    np.testing.assert_allclose(np.asarray(third), X**3)


def test_rebinding_a_global_to_an_equal_number_keeps_the_compiled_program(monkeypatch):
    ctx, scaled = _scaled_context()
    scaled(X)
    program = ctx.program("scaled")
    monkeypatch.setattr(THIS_MODULE, "SCALE", float("2.0"))  # another, equal, float
    scaled(X)
    assert ctx.program("scaled") is program
    monkeypatch.setattr(THIS_MODULE, "SCALE", 2.5)
    scaled(X)
    assert ctx.program("scaled") is not program


@pytest.mark.parametrize("backend_name", backends.COMPILED_NAMES)
def test_a_recompile_drops_the_old_compiled_program(backend_name, monkeypatch):
    backend = backends.make_backend(backend_name)  # a compile cache of its own
    _, scaled = _scaled_context()
    scaled(X, backend=backend)
    size = len(backend.compile_cache)
    for value in (3.0, 4.0):
        monkeypatch.setattr(THIS_MODULE, "SCALE", value)
        scaled(X, backend=backend)
    assert len(backend.compile_cache) == size


# -- batched functions called from plain helpers and other Contexts (defect 10) ------


def _helper_context():
    ctx = pcbatch.Context()

    @ctx.batch
    def twice(x):
        if x > 0:
            return x * 2
        return x

    def plain_helper(x):
        return twice(x) + 1

    @ctx.batch
    def through_plain_helper(x):
        return plain_helper(x)

    @ctx.batch
    def batched_helper(x):
        return twice(x) + 1

    @ctx.batch
    def through_batched_helper(x):
        return batched_helper(x)

    @ctx.batch
    def in_a_comprehension(x):
        return sum([twice(x * k) for k in range(2)])

    return through_plain_helper, through_batched_helper, in_a_comprehension


@backends.backend_param
def test_a_batched_call_from_a_plain_helper_is_a_clear_error(backend_name):
    through_plain_helper, _, in_a_comprehension = _helper_context()
    for function in (through_plain_helper, in_a_comprehension):
        with pytest.raises(NestedBatchedCallError, match="same ctx.batch") as caught:
            function(X, backend=backends.backend(backend_name))
        message = str(caught.value)
        assert f"while the batched function {function.name!r} runs" in message
        assert "'twice' was called" in message and __file__ in message


@backends.backend_param
def test_the_helper_decorated_with_the_same_context_runs_batched(backend_name):
    _, through_batched_helper, _ = _helper_context()
    _check(through_batched_helper, backend_name, expected=[3.0, -1.0, 7.0, 0.5])


def test_dry_run_calls_batched_functions_from_helpers_per_example():
    through_plain_helper, _, in_a_comprehension = _helper_context()
    np.testing.assert_array_equal(
        through_plain_helper(X, dry_run=True), [3.0, -1.0, 7.0, 0.5]
    )
    np.testing.assert_array_equal(in_a_comprehension(X, dry_run=True), [2.0, -2.0, 6.0, -0.5])


def test_a_host_callback_may_run_a_batched_function():
    ctx = pcbatch.Context()
    seen = []

    @ctx.batch
    def twice(x):
        return x * 2

    def report(values):
        seen.append(twice(values))  # host code, outside the run: a run of its own

    @ctx.batch
    def reporting(x):
        pcbatch.host_callback(report, x)
        return x

    reporting(X)
    np.testing.assert_array_equal(np.concatenate(seen), 2 * X)


def _other_context_call():
    first, second = pcbatch.Context(), pcbatch.Context()

    @first.batch
    def double(x):
        return x * 2

    @second.batch
    def calls_other_context(x):
        return double(x) + 1

    return calls_other_context


def _other_context_through_helper():
    first, second = pcbatch.Context(), pcbatch.Context()

    @first.batch
    def double(x):
        return x * 2

    def plain_helper(x):
        return double(x)

    @second.batch
    def calls_helper(x):
        return plain_helper(x) + 1

    return calls_helper


@backends.backend_param
def test_another_contexts_batched_function_from_a_helper_is_a_clear_error(backend_name):
    with pytest.raises(NestedBatchedCallError, match="Decorate 'double' and that helper"):
        _other_context_through_helper()(X, backend=backends.backend(backend_name))


def test_a_call_to_another_contexts_batched_function_is_rejected_at_its_line():
    calls_other_context = _other_context_call()
    with pytest.raises(AutobatchSyntaxError, match="another pcbatch.Context") as caught:
        calls_other_context(X)
    assert caught.value.filename == __file__
    assert caught.value.text.strip() == "return double(x) + 1"


class _Holder:
    pass


def _attribute_call():
    ctx = pcbatch.Context()
    holder = _Holder()

    @ctx.batch
    def double(x):
        return x * 2

    holder.double = double

    @ctx.batch
    def calls_by_attribute(x):
        return holder.double(x)

    return calls_by_attribute


def test_a_batched_function_called_through_an_attribute_is_rejected_at_its_line():
    with pytest.raises(AutobatchSyntaxError, match="by its own name") as caught:
        _attribute_call()(X)
    assert caught.value.text.strip() == "return holder.double(x)"
