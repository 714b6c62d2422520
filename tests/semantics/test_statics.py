"""None and text arguments, and tests of global constants, fixed when a call compiles
(`pcbatch.frontend.statics`): exact against the plain function per example on every
backend, or rejected at the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pcbatch
from tests import backends
from tests.backends import backend_param
from tests.semantics import statics_src as src

AS = np.array([0.25, 2.0, 9.0, 30.0])


def _plain(fn, *batched, **shared):
    """The plain function on each example, ``shared`` passed as they are."""
    rows = [fn.python_function(*(b[i] for b in batched), **shared) for i in range(len(batched[0]))]
    return np.stack(rows)


def _error_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    (line,) = [first + i for i, text in enumerate(lines) if "# ERROR" in text]
    return line


@backend_param
@pytest.mark.parametrize("options", [
    {}, {"tol": None}, {"method": "bisect"}, {"method": "bisect", "tol": 1e-3},
    {"method": "builtin"}, {"tol": 1e-4, "method": "newton"},
], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "defaults")
def test_none_and_text_options_run_the_branch_python_takes(backend_name, options):
    b = backends.backend(backend_name)
    expected = _plain(src.root, AS, **options)
    np.testing.assert_allclose(expected, np.sqrt(AS), rtol=1e-3)
    backends.assert_close(src.root(AS, backend=b, **options), expected, backend_name)
    backends.assert_close(src.root(AS, dry_run=True, **options), expected, "numpy")


@backend_param
def test_a_per_example_tolerance_beside_a_text_option(backend_name):
    b = backends.backend(backend_name)
    tols = np.array([1e-2, 1e-6, 1e-9, 1e-3])
    expected = np.stack([src.root.python_function(a, t, "bisect") for a, t in zip(AS, tols)])
    backends.assert_close(src.root(AS, tols, "bisect", backend=b), expected, backend_name)
    backends.assert_close(src.root.map(AS, tols, method="bisect", width=2, backend=b),
                          expected, backend_name)


@backend_param
def test_text_goes_to_a_plain_helper_its_methods_and_or_fold(backend_name):
    b = backends.backend(backend_name)
    xs = np.array([-1.0, 0.5, 2.0])
    for fn, options in ((src.helper_option, {}), (src.helper_option, {"how": "keep"}),
                        (src.text_methods, {}), (src.text_methods, {"method": "chol"}),
                        (src.text_methods, {"method": "qr"}),
                        (src.folded_or, {}), (src.folded_or, {"scale": None})):
        expected = _plain(fn, xs, **options)
        backends.assert_close(fn(xs, backend=b, **options), expected, backend_name)
    scales = np.array([0.0, 2.0, 5.0])
    expected = np.stack([src.folded_or.python_function(x, s) for x, s in zip(xs, scales)])
    backends.assert_close(src.folded_or(xs, scales, backend=b), expected, backend_name)


@backend_param
def test_recursion_passes_its_text_argument_on(backend_name):
    b = backends.backend(backend_name)
    ns = np.array([0, 3, 5, 1])
    for options in ({}, {"mode": "up"}):
        expected = src.countdown(ns, dry_run=True, **options)  # recursion: Python's calls
        np.testing.assert_array_equal(expected, ns * (1 if not options else 2))
        backends.assert_close(src.countdown(ns, backend=b, **options), expected, backend_name)


@backend_param
def test_global_constants_decide_branches_at_compile_time(backend_name):
    b = backends.backend(backend_name)
    xs = np.array([1.0, -2.0])
    ns = np.array([3, 4])
    for fn, args in ((src.global_none, xs), (src.module_attribute, xs),
                     (src.global_flag_dtype, ns)):
        expected = _plain(fn, args)
        backends.assert_close(fn(args, backend=b), expected, backend_name)  # dtypes too


@backend_param
def test_hasattr_of_a_module_and_dead_debugging_code_decide_at_compile_time(backend_name):
    """Both were refused: ``hasattr(np, "trapezoid")`` was a per-example test (both sides
    compiled, and np.trapz fails on NumPy 2), and ``if DEBUG: print(i)`` rejected the
    print that Python never runs."""
    b = backends.backend(backend_name)
    v = np.array([[3.0, 1.0, 2.0], [-1.0, -5.0, 0.5]])
    backends.assert_close(src.library_version_check(v, backend=b),
                          _plain(src.library_version_check, v), backend_name)
    n = np.array([3, 0, 5])
    backends.assert_identical(src.debugging_left_in(n, backend=b), np.array([3, 0, 10]))


def test_a_rebound_global_constant_rebuilds_the_program(monkeypatch):
    xs = np.array([1.0, -2.0])
    np.testing.assert_array_equal(src.global_none(xs), xs)
    monkeypatch.setattr(src, "SHIFT", 10.0)
    np.testing.assert_array_equal(src.global_none(xs), xs + 10.0)


@backend_param
def test_raise_and_assert_in_a_branch_decided_when_compiling(backend_name):
    b = backends.backend(backend_name)
    xs = np.array([1.0, -2.0])
    for method in ("a", "b"):
        backends.assert_close(src.checked_method(xs, method=method, backend=b),
                              src.checked_method(xs, method=method, dry_run=True), backend_name)
    for method, error, match in (("c", NotImplementedError, "method 'c' is planned"),
                                 ("d", AssertionError, "unknown method 'd'")):
        with pytest.raises(error, match=match):
            src.checked_method(xs, method=method, dry_run=True)  # Python, per example
        with pytest.raises(error, match=match) as info:
            src.checked_method(xs, method=method, backend=b)
        notes = getattr(info.value, "__notes__", [])  # Python 3.11+
        assert all("for every example of the call" in n for n in notes)


REJECTED = [
    ("rebound_in_loop", "cannot be rebound inside a loop"),
    ("rebound_in_branch", "cannot be rebound inside an if on per-example values"),
    ("returned", "'method' is 'a' in this call"),
    ("held", "'tol' is None in this call"),
    ("computed", "'tol' is None in this call"),
    ("raise_with_a_per_example_value", "reads 'x', a per-example value"),
]


@backend_param
@pytest.mark.parametrize(("name", "match"), REJECTED)
def test_a_static_argument_held_as_a_value_is_rejected_at_its_line(backend_name, name, match):
    fn = pcbatch.Context().batch(getattr(src, name))
    with pytest.raises(pcbatch.AutobatchSyntaxError, match=match) as info:
        fn(np.array([1.0, 2.0]), backend=backends.backend(backend_name))
    assert (info.value.filename, info.value.lineno) == (src.__file__, _error_line(fn))
    # used as a value, Python's TypeError per example; pcbatch's is one too
    assert isinstance(info.value, TypeError) == (name in ("returned", "held", "computed"))


@backend_param
def test_a_raise_that_some_examples_reach_fails_those_examples(backend_name):
    """After a per-example return, or in a loop: only the examples that get there raise
    (they were rejected at the line)."""
    b = backends.backend(backend_name)
    fn = pcbatch.Context().batch(src.raise_after_a_per_example_return)
    backends.assert_close(fn(np.array([1.0, 2.0]), backend=b), [1.0, 2.0], backend_name)
    with pytest.raises(ValueError, match="negative"):
        fn(np.array([1.0, -2.0]), dry_run=True)
    with pytest.raises(ValueError, match="negative"):
        fn(np.array([1.0, -2.0]), backend=b)
    result, status = fn(np.array([1.0, -2.0, 3.0]), backend=b, return_status=True)
    assert [pcbatch.LaneStatus(s).name for s in np.asarray(status)] == ["OK", "ERROR", "OK"]
    np.testing.assert_array_equal(np.asarray(result)[[0, 2]], [1.0, 3.0])
    in_a_loop = pcbatch.Context().batch(src.raise_in_a_loop)
    with pytest.raises(ValueError, match="in a loop"):
        in_a_loop(np.array([1.0, 2.0]), backend=b)
    backends.assert_close(in_a_loop(np.array([1.0, 2.0]), method="b", backend=b), [1.0, 2.0],
                          backend_name)


@backend_param
def test_text_or_a_raise_reaching_another_batched_function_is_rejected_at_its_line(
    backend_name,
):
    b = backends.backend(backend_name)
    cases = ((src.passes_text, "passes flag='up' to the batched function callee", {}),
             (src.calls_a_raising_callee, "raise on every path of a function called", {}),
             (src.recurses_with_another_value, "compiled for mode='up'", {"mode": "up"}))
    for fn, match, options in cases:
        with pytest.raises(pcbatch.AutobatchSyntaxError, match=match) as info:
            fn(np.array([1, 2]), backend=b, **options)
        line = _error_line(src.raising_callee if fn is src.calls_a_raising_callee else fn)
        assert (info.value.filename, info.value.lineno) == (src.__file__, line)
    # the default is the value the call compiles for: the recursion is fine
    expected = src.recurses_with_another_value(np.array([1, 2]), dry_run=True)
    backends.assert_close(src.recurses_with_another_value(np.array([1, 2]), backend=b),
                          expected, backend_name)


@backend_param
def test_a_local_only_the_branch_not_taken_assigns_is_rejected_at_its_read(backend_name):
    """Python raises UnboundLocalError at ``return y`` for every example."""
    fn = pcbatch.Context().batch(src.unassigned_for_this_value)
    with pytest.raises(UnboundLocalError):
        fn(np.array([1.0, 2.0]), dry_run=True)
    with pytest.raises(pcbatch.TypeInferenceError, match="UnboundLocalError") as info:
        fn(np.array([1.0, 2.0]), backend=backends.backend(backend_name))
    assert f"{src.__file__}:{_error_line(fn)}" in str(info.value)
    np.testing.assert_array_equal(fn(np.array([1.0, 2.0]), method="a", dry_run=True), [1, 2])
