"""Calls of batched functions: binding, defaults, None, call options, list arguments.

Every case that runs is compared with the plain (undecorated) function applied to each
example; every case that cannot batch must fail before running, at the user's line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pcbatch
from tests import backends
from tests.backends import backend_param
from tests.semantics import calls_src as src

XS = np.array([1.0, 2.0, 3.0])


def _per_example(fn, batched: dict, shared: dict | None = None, positional: int = 0):
    """The plain function on each example: ``batched`` arguments split along their first
    axis, ``shared`` ones passed as they are; the first ``positional`` go by position."""
    size = len(next(iter(batched.values())))
    results = []
    for i in range(size):
        values = {**{k: v[i] for k, v in batched.items()}, **(shared or {})}
        names = list(values)
        args = [values.pop(n) for n in names[:positional]]
        results.append(fn.python_function(*args, **values))
    return np.stack(results)


def _error_line(fn) -> int:
    lines, first = inspect.getsourcelines(fn)
    (line,) = [first + i for i, text in enumerate(lines) if "# ERROR" in text]
    return line


def _rejected_at_line(fn, call, match: str):
    with pytest.raises(pcbatch.AutobatchSyntaxError, match=match) as info:
        call()
    assert info.value.lineno == _error_line(fn)
    assert info.value.filename == src.__file__


# -- D5: defaults are the same value for every example --------------------------------
@backend_param
def test_array_default_is_shared_by_every_example(backend_name):
    b = backends.backend(backend_name)
    expected = _per_example(src.weighted, {"x": XS}, positional=1)
    np.testing.assert_allclose(expected, [6.0, 12.0, 18.0])
    backends.assert_close(src.weighted(XS, backend=b), expected, backend_name)
    backends.assert_close(src.weighted(XS, dry_run=True), expected, "numpy")
    backends.assert_close(src.weighted.map(XS, width=2, backend=b), expected, backend_name)


@backend_param
def test_scalar_and_tuple_defaults(backend_name):
    b = backends.backend(backend_name)
    xs2 = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    for fn, xs in ((src.scaled, XS), (src.paired, xs2)):
        expected = _per_example(fn, {"x": xs}, positional=1)
        backends.assert_close(fn(xs, backend=b), expected, backend_name)
        backends.assert_close(fn(xs, dry_run=True), expected, "numpy")


@backend_param
def test_list_default_is_one_array(backend_name):
    b = backends.backend(backend_name)
    expected = _per_example(src.list_weighted, {"x": XS}, positional=1)
    np.testing.assert_allclose(expected, [6.0, 12.0, 18.0])
    for fn in (src.list_weighted, src.calls_list_weighted):
        backends.assert_close(fn(XS, backend=b), expected, backend_name)
        backends.assert_close(fn(XS, dry_run=True), expected, "numpy")


@backend_param
def test_default_passed_explicitly_and_from_a_batched_call(backend_name):
    b = backends.backend(backend_name)
    ws = np.arange(9.0).reshape(3, 3)
    expected = _per_example(src.weighted, {"x": XS, "w": ws}, positional=2)
    backends.assert_close(src.weighted(XS, ws, backend=b), expected, backend_name)
    expected = np.array([src.weighted.python_function(x) + x for x in XS])
    backends.assert_close(src.calls_weighted(XS, backend=b), expected, backend_name)


# -- D6: keyword-only and positional-only parameters ------------------------------------
@backend_param
def test_keyword_only_parameters(backend_name):
    b = backends.backend(backend_name)
    ms, ks = np.array([0.5, 1.5, 2.5]), np.array([3.0, 4.0, 5.0])
    cases = [({"x": XS, "m": ms}, {}), ({"x": XS, "m": ms, "k": ks}, {})]
    for batched, _ in cases:
        expected = _per_example(src.kwonly, batched, positional=1)
        args = {k: v for k, v in batched.items() if k != "x"}
        backends.assert_close(src.kwonly(XS, **args, backend=b), expected, backend_name)
        backends.assert_close(src.kwonly(XS, **args, dry_run=True), expected, "numpy")
    with pytest.raises(TypeError, match="kwonly"):
        src.kwonly(XS, ms, backend=b)


@backend_param
def test_positional_only_parameters(backend_name):
    b = backends.backend(backend_name)
    ys, zs = np.array([2.0, 3.0, 4.0]), np.array([0.1, 0.2, 0.3])
    for batched, positional in (({"a": XS}, 1), ({"a": XS, "b": ys}, 2), ({"a": XS, "c": zs}, 1)):
        expected = _per_example(src.posonly, batched, positional=positional)
        args = list(batched.values())[:positional]
        kwargs = {k: v for k, v in list(batched.items())[positional:]}
        backends.assert_close(src.posonly(*args, **kwargs, backend=b), expected, backend_name)
        backends.assert_close(src.posonly(*args, **kwargs, dry_run=True), expected, "numpy")
    with pytest.raises(TypeError, match="posonly"):
        src.posonly(a=XS, backend=b)


@backend_param
def test_keyword_only_from_a_batched_call(backend_name):
    b = backends.backend(backend_name)
    expected = np.array([x * 2.0 + 1.0 + x * 10.0 + 0.5 for x in XS])
    backends.assert_close(src.calls_kwonly(XS, backend=b), expected, backend_name)
    backends.assert_close(src.calls_kwonly(XS, dry_run=True), expected, "numpy")


# -- D7: a parameter named like a call option is the parameter -------------------------
@backend_param
def test_parameter_named_like_an_option_wins(backend_name):
    b = backends.backend(backend_name)
    expected = _per_example(src.count_up, {"a": XS}, {"max_steps": 10}, positional=1)
    np.testing.assert_allclose(expected, XS + 10)
    backends.assert_close(src.count_up(XS, max_steps=10, backend=b), expected, backend_name)
    backends.assert_close(src.count_up(XS, max_steps=10, dry_run=True), expected, "numpy")
    shared = {"backend": 2.0, "schedule": 0.25}
    expected = _per_example(src.offset, {"x": XS}, shared, positional=1)
    actual = src.offset.with_options(backend=b)(XS, **shared)
    backends.assert_close(actual, expected, backend_name)


@backend_param
def test_with_options_reaches_a_shadowed_option(backend_name):
    b = backends.backend(backend_name)
    limited = src.count_up.with_options(max_steps=2, backend=b)
    with pytest.raises(pcbatch.StepLimitError, match="max_steps=2"):
        limited(XS, max_steps=10)
    expected = XS + 10
    roomy = src.count_up.with_options(max_steps=10_000, backend=b)
    backends.assert_close(roomy(XS, max_steps=10), expected, backend_name)
    # An option that names no parameter still works as a keyword.
    backends.assert_close(src.scaled(XS, max_steps=10_000, backend=b), XS * 2.5, backend_name)
    with pytest.raises(TypeError, match="given twice"):
        src.scaled.with_options(max_steps=5)(XS, max_steps=6, backend=b)
    with pytest.raises(TypeError, match="unknown option 'max_step'"):
        src.scaled.with_options(max_step=5)


@backend_param
def test_map_width_through_with_options(backend_name):
    b = backends.backend(backend_name)
    ws = np.array([2.0, 3.0, 4.0])
    expected = _per_example(src.widened, {"x": XS, "width": ws}, positional=1)
    actual = src.widened.with_options(width=2, backend=b).map(XS, width=ws)
    backends.assert_close(actual, expected, backend_name)
    with pytest.raises(TypeError, match="with_options"):
        src.widened.map(XS, width=ws, backend=b)
    with pytest.raises(TypeError, match="belongs to widened.map"):
        src.widened.with_options(width=2)(XS, backend=b)


# -- D14: options are checked, naming the option ---------------------------------------
BAD_OPTIONS = [
    ({"max_stack_depth": -1}, ValueError, "max_stack_depth takes a non-negative int"),
    ({"max_stack_depth": "10"}, TypeError, "max_stack_depth takes a non-negative int"),
    ({"max_stack_depth": 2.5}, TypeError, "max_stack_depth"),
    ({"max_stack_depth": True}, TypeError, "max_stack_depth"),
    ({"max_steps": "10"}, TypeError, "max_steps takes a non-negative int or None"),
    ({"max_steps": -3}, ValueError, "max_steps"),
    ({"backend": "cupy"}, TypeError, "backend takes None, a name"),
    ({"backend": 3}, TypeError, "backend takes"),
    ({"schedule": 3}, TypeError, "schedule takes a policy's name"),
    ({"schedule": "fastest"}, ValueError, "unknown schedule"),
    ({"stackless": "yes"}, TypeError, "stackless takes True or False"),
    ({"dry_run": 1}, TypeError, "dry_run takes True or False"),
    ({"block_code_cache": []}, TypeError, "block_code_cache takes a dict"),
]


@backend_param
@pytest.mark.parametrize(("options", "error", "match"), BAD_OPTIONS)
def test_bad_option_values_name_the_option(backend_name, options, error, match):
    options = {"backend": backends.backend(backend_name), **options}
    with pytest.raises(error, match=match):
        src.doubled(XS, **options)
    with pytest.raises(error, match=match):
        src.doubled.with_options(**options)(XS)


@backend_param
def test_bad_map_options_name_the_option(backend_name):
    b = backends.backend(backend_name)
    with pytest.raises(ValueError, match="width"):
        src.doubled.map(XS, width=0, backend=b)
    with pytest.raises(ValueError, match="group"):
        src.doubled.map(XS, width=2, group=-1, backend=b)
    with pytest.raises(ValueError, match="priority"):
        src.doubled.map(XS, width=2, priority=[1.0, 2.0], backend=b)


@backend_param
def test_backend_by_name(backend_name):
    expected = XS * 2
    backends.assert_close(src.doubled(XS, backend=backend_name), expected, backend_name)


@backend_param
def test_stack_depth_beyond_memory_names_max_stack_depth(backend_name):
    b = backends.backend(backend_name)
    ns = np.arange(1000) % 8
    expected = np.array([0, 1, 1, 2, 3, 5, 8, 13])
    if backend_name in backends.EAGER_NAMES:  # eager stacks grow as they are used
        result = src.fib(ns, max_stack_depth=10**9, backend=b)
        backends.assert_close(np.asarray(result)[:8], expected, backend_name)
        return
    with pytest.raises(ValueError, match="max_stack_depth=1000000000 for 1000 lanes"):
        src.fib(ns, max_stack_depth=10**9, backend=b)


def test_async_function_and_method_are_rejected_at_decoration():
    ctx = pcbatch.Context()

    async def later(x):
        return x

    with pytest.raises(TypeError, match="async functions are not supported"):
        ctx.batch(later)
    with pytest.raises(TypeError, match="class body"):

        class Model:
            @ctx.batch
            def f(self, x):
                return x

    assert ctx.function_names() == []


def test_a_lambda_is_rejected():
    """docs/semantics.md: lambdas are rejected (a positional lambda given to ``ctx.batch``
    is the seed's ``type_inference``, so the function it then decorates must be a def)."""
    ctx = pcbatch.Context()
    with pytest.raises(ValueError, match="defined with def, not lambda"):
        ctx.batch_uncurried(lambda x: x * 2)(XS)
    with pytest.raises(TypeError, match="needs a function defined with def"):
        ctx.batch(lambda x: x * 2)(XS)


@backend_param
def test_batch_uncurried_of_a_function_calling_itself_by_its_global_name(backend_name):
    """docs/semantics.md: the recursive call through the global name is a batched call."""
    n = np.array([3, 6, 8, 0])
    expected = [src.fib_by_global_name(int(k)) for k in n]
    got = src.fib_uncurried(n, backend=backends.backend(backend_name))
    np.testing.assert_array_equal(got, expected)


@backend_param
@pytest.mark.parametrize("name", ["calls_another_context", "calls_through_an_attribute"])
def test_a_batched_function_of_another_context_is_rejected_at_the_line(backend_name, name):
    fn = pcbatch.Context().batch(getattr(src, name))
    _rejected_at_line(fn, lambda: fn(XS, backend=backends.backend(backend_name)),
                      "another pcbatch.Context.*decorate both with the same ctx.batch")


# -- D16: a list is a batch, a tuple a structured value ---------------------------------
@backend_param
def test_list_of_numbers_is_a_batch(backend_name):
    b = backends.backend(backend_name)
    backends.assert_close(src.doubled([1.0, 2.0, 3.0], backend=b), XS * 2, backend_name)
    backends.assert_close(src.fib([6, 7, 8, 7], backend=b), np.array([8, 13, 21, 13]),
                          backend_name)
    backends.assert_close(src.fib([6, 7, 8, 7], dry_run=True), np.array([8, 13, 21, 13]),
                          "numpy")
    rows = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    backends.assert_close(src.doubled(rows, backend=b), np.array(rows) * 2, backend_name)


@backend_param
def test_tuple_is_a_structured_value(backend_name):
    b = backends.backend(backend_name)
    ys = np.array([10.0, 20.0, 30.0])
    backends.assert_close(src.summed((XS, ys), backend=b), XS + ys, backend_name)
    backends.assert_close(src.summed(([1.0, 2.0, 3.0], ys), backend=b), XS + ys,
                          backend_name)


@backend_param
def test_ragged_list_or_list_of_tuples_is_an_error(backend_name):
    b = backends.backend(backend_name)
    with pytest.raises(TypeError, match="pass an array, or a tuple"):
        src.doubled([[1.0, 2.0], [3.0]], backend=b)
    with pytest.raises(TypeError, match="a list of tuples"):
        src.summed([(1.0, 2.0), (3.0, 4.0)], backend=b)


@backend_param
def test_a_dict_argument_is_refused_saying_to_pass_a_namedtuple(backend_name):
    with pytest.raises(TypeError, match=r"namedtuple\('Params', \['a', 'b'\]\)"):
        src.doubled({"b": XS, "a": XS}, backend=backends.backend(backend_name))


# -- D4: None -------------------------------------------------------------------------
@backend_param
def test_is_none_on_a_variable_is_exact(backend_name):
    b = backends.backend(backend_name)
    for fn in (src.tests_is_none, src.tests_global_none, src.uses_none_statically):
        expected = _per_example(fn, {"x": XS}, positional=1)
        backends.assert_close(fn(XS, backend=b), expected, backend_name)


@backend_param
def test_none_default_passed_or_not(backend_name):
    b = backends.backend(backend_name)
    tols = np.array([0.5, 0.25, 0.125])
    expected = _per_example(src.optional_tol, {"x": XS, "tol": tols}, positional=1)
    backends.assert_close(src.optional_tol(XS, tol=tols, backend=b), expected, backend_name)
    # None, passed or by default, is fixed for the call: the branch Python takes runs
    # (tests/semantics/test_statics.py)
    expected = _per_example(src.optional_tol, {"x": XS}, positional=1)
    backends.assert_close(src.optional_tol(XS, backend=b), expected, backend_name)
    backends.assert_close(src.optional_tol(XS, dry_run=True), expected, "numpy")
    backends.assert_close(src.optional_tol(XS, None, backend=b), expected, backend_name)


NONE_CASES = [
    ("none_assigned", "None is not a batched value"),
    ("none_returned", "None is not a batched value"),
    ("none_in_branch", "None is not a batched value"),
    ("none_in_tuple", "None is not a batched value"),
    ("none_global", "None is not a batched value"),
    ("none_test", "None is not a batched value"),
    ("identity_of_arrays", "'is' compares object identity"),
    ("identity_with_true", "'is' compares object identity"),
    ("none_of_expression", "'is' compares object identity"),
]


@backend_param
@pytest.mark.parametrize(("name", "match"), NONE_CASES)
def test_none_as_a_value_is_rejected_at_its_line(backend_name, name, match):
    fn = pcbatch.Context().batch(getattr(src, name))
    _rejected_at_line(fn, lambda: fn(XS, backend=backends.backend(backend_name)), match)


@backend_param
def test_none_passed_to_a_batched_call_is_rejected_at_its_line(backend_name):
    b = backends.backend(backend_name)
    for fn, match in ((src.none_passed, "None is not a batched value"),
                      (src.none_default_used, "whose default is None")):
        _rejected_at_line(fn, lambda fn=fn: fn(XS, backend=b), match)


@backend_param
def test_helper_returning_none_is_an_error_at_its_line(backend_name):
    fn = pcbatch.Context().batch(src.helper_returns_none)
    with pytest.raises(pcbatch.TypeInferenceError, match="None") as info:
        fn(XS, backend=backends.backend(backend_name))
    assert f"{src.__file__}:{_error_line(fn)}" in str(info.value)


@backend_param
def test_run_checks_its_counts_too(backend_name):
    program = src.ctx.program("doubled")
    b = backends.backend(backend_name)
    with pytest.raises(ValueError, match="max_stack_depth takes a non-negative int"):
        pcbatch.run(program, [XS], backend=b, max_stack_depth=-1)
    with pytest.raises(TypeError, match="max_steps takes a non-negative int or None"):
        pcbatch.run(program, [XS], backend=b, max_steps="10")


@backend_param
def test_a_plain_helpers_side_effects_run_when_pcbatch_runs_it_not_per_example(backend_name):
    """docs/semantics.md, "a plain helper's side effects": type inference calls the
    helper on dummy inputs while compiling; NumPy (and Torch) call it once per batched step (for
    every example at once), JAX and TensorFlow only while tracing; ``dry_run`` (and the
    plain function) once per example. Per example Python would append 5 times here."""
    x = np.array([0.25, 1.0, 3.0])  # the first example skips the second call
    src.helper_calls.clear()
    src.calls_noisy_helper(x, dry_run=True)
    assert len(src.helper_calls) == 5
    fresh = backends.make_backend(backend_name)
    src.helper_calls.clear()
    expected = _per_example(src.calls_noisy_helper, {"x": x})
    np.testing.assert_array_equal(src.calls_noisy_helper(x, backend=fresh), expected)
    compiling = len(src.helper_calls)
    src.helper_calls.clear()
    np.testing.assert_array_equal(src.calls_noisy_helper(x, backend=fresh), expected)
    warm = len(src.helper_calls)
    eager = backend_name in backends.EAGER_NAMES
    assert warm == (2 if eager else 0)  # one per call site, not per example
    assert compiling > warm  # the dummy runs (and the trace) come on top


def dot_by_hand(v, k):
    out = 0.0
    for i in range(3):
        out += v[i] * k  # a NumPy scalar per example: += rebinds it
    return out


def uses_dot_by_hand(v, k):
    return dot_by_hand(v, k) + dot_by_hand(v[::-1], 1)


@backend_param
def test_a_plain_helper_accumulating_a_scalar_with_in_place_operators(backend_name):
    """``out = 0.0; out += v[i] * k`` in a plain helper: per example ``out`` is a NumPy
    scalar, which ``+=`` rebinds; every backend failed (JAX and TensorFlow: "np.add writes
    into an array"; NumPy and Torch: "return arrays must be of ArrayType")."""
    v = np.array([[1.0, 2.0, 3.0], [0.5, 0.1, 0.2]])
    k = np.array([2, 3])
    batched = pcbatch.Context().batch(uses_dot_by_hand)
    want = batched(v, k, dry_run=True)
    np.testing.assert_allclose(want, [uses_dot_by_hand(*row) for row in zip(v, k)])
    backends.assert_close(batched(v, k, backend=backends.backend(backend_name)), want,
                          backend_name)


def halved_until_small(x, n):
    for _ in range(n):
        x = x * 0.5 + 1
    return x


@backend_param
def test_big_endian_and_strided_arrays_are_arguments_like_any_other(backend_name):
    """Data read from a file can be big-endian (``>f8``): Torch and JAX refused it with an
    error about dummy inputs; strided and read-only arrays too are plain arguments."""
    batched = pcbatch.Context().batch(halved_until_small)
    n = np.array([3, 1, 0])
    want = batched(np.array([1.0, 2.0, 5.0]), n, dry_run=True)
    big_endian = np.array([1.0, 2.0, 5.0], dtype=">f8")
    strided = np.array([1.0, 9.0, 2.0, 9.0, 5.0])[::2]
    read_only = np.array([1.0, 2.0, 5.0])
    read_only.flags.writeable = False
    for x in (big_endian, strided, read_only):
        got = batched(x, n.astype(">i8"), backend=backends.backend(backend_name))
        backends.assert_identical(got, want)
