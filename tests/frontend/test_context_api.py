"""The seed's Context API: every method and call option, with pcbatch's refinements."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch.errors import AutobatchSyntaxError
from pcbatch.ir.nodes import Module, Program
from pcbatch.ir.types import TensorType, Type
from pcbatch.passes import pipeline
from tests import backends
from tests.backends import backend_param

INT = TensorType(np.dtype(np.int64), ())


def make_fib_context():
    ctx = pcbatch.Context()

    @ctx.batch
    def fib(n):
        if n <= 1:
            return n
        return fib(n - 1) + fib(n - 2)

    return ctx, fib


def test_bare_decorator_and_seed_fibonacci():
    _, fib = make_fib_context()
    np.testing.assert_array_equal(fib(np.array([6, 7, 8, 7])), [8, 13, 21, 13])


def test_decorator_with_type_inference_is_honoured():
    ctx = pcbatch.Context()

    @ctx.batch(type_inference=lambda arg_types: [Type(TensorType(np.dtype(np.float64), ()))])
    def half(x):
        return x // 2

    result = half(np.array([5, 8]))
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, [2.0, 4.0])


def test_batch_uncurried_and_function_names():
    ctx = pcbatch.Context()

    def double(x):
        return 2 * x

    batched = ctx.batch_uncurried(double)
    assert ctx.function_names() == ["double"]
    np.testing.assert_array_equal(batched(np.array([1, 2])), [2, 4])


def test_same_name_twice_raises_value_error():
    ctx, _ = make_fib_context()

    def fib(n):
        return n

    with pytest.raises(ValueError, match="fib"):
        ctx.batch(fib)


def test_module_program_and_unknown_main():
    ctx, _ = make_fib_context()
    module = ctx.module()
    assert isinstance(module, Module) and module.function_names() == ("fib",)
    program = ctx.program("fib")
    assert isinstance(program, Program) and program.main == "fib"
    with pytest.raises(ValueError, match="nope"):
        ctx.program("nope")


def test_program_compiled_and_lowered_with_and_without_signature():
    ctx, _ = make_fib_context()
    untyped = ctx.program_lowered("fib")
    assert untyped.lowered and not untyped.var_types
    backend = pcbatch.NumpyBackend()
    compiled = ctx.program_compiled("fib", [INT], backend)
    assert not compiled.lowered and compiled.var_types["fib.n"] == Type(INT)
    assert not ctx.program_compiled("fib").var_types
    lowered = ctx.program_lowered("fib", [INT], backend)
    assert lowered.lowered and lowered.var_alloc
    assert ctx.program_lowered("fib", [INT], backend) is lowered  # cached
    assert ctx.lowered_for_args("fib", [np.array([3, 4])], backend) is lowered


def test_alternating_signatures_do_not_recompile(monkeypatch):
    ctx, fib = make_fib_context()
    compiled = []
    original = pipeline.compile_program

    def counting(*args, **kwargs):
        compiled.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(pipeline, "compile_program", counting)
    for _ in range(3):
        fib(np.array([5, 6], dtype=np.int64))
        fib(np.array([5, 6], dtype=np.int32))
    assert len(compiled) == 2


def test_call_options():
    ctx, fib = make_fib_context()
    n = np.array([3, 9, 1])
    expected = [2, 34, 1]
    np.testing.assert_array_equal(fib(n, dry_run=True), expected)
    np.testing.assert_array_equal(fib(n, stackless=True), expected)
    np.testing.assert_array_equal(fib(n, max_stack_depth=12), expected)
    np.testing.assert_array_equal(fib(n, backend=pcbatch.NumpyBackend()), expected)
    np.testing.assert_array_equal(fib(n, block_code_cache={}), expected)
    with pytest.raises(pcbatch.StackOverflowError, match="'fib'"):
        fib(n, max_stack_depth=4)
    with pytest.raises(TypeError, match="dry_run"):
        fib(n, not_an_option=True)


def test_dry_run_works_at_any_batch_size_and_scalars_broadcast():
    ctx, fib = make_fib_context()
    np.testing.assert_array_equal(fib(np.arange(10), dry_run=True), fib(np.arange(10)))
    np.testing.assert_array_equal(fib(7), [13])


def test_functions_may_be_decorated_in_any_order():
    ctx = pcbatch.Context()

    @ctx.batch
    def is_even(n):
        if n == 0:
            return True
        return is_odd(n - 1)  # not decorated yet

    @ctx.batch
    def is_odd(n):
        if n == 0:
            return False
        return is_even(n - 1)

    np.testing.assert_array_equal(is_even(np.arange(7)), np.arange(7) % 2 == 0)


def test_keyword_and_default_arguments():
    ctx = pcbatch.Context()

    @ctx.batch
    def scaled(x, scale=2.0, shift=0.0):
        return x * scale + shift

    @ctx.batch
    def uses(x):
        return scaled(x, shift=1.0) + scaled(x, scale=3.0)

    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(uses(x), (2 * x + 1) + 3 * x)
    np.testing.assert_allclose(scaled(x, scale=4.0), 4 * x)


def test_inconsistent_batch_sizes_name_both_arguments():
    ctx = pcbatch.Context()

    @ctx.batch
    def add(a, b):
        return a + b

    with pytest.raises(ValueError, match="'a'.*'b'|'b'.*'a'"):
        add(np.arange(3), np.arange(4))


def test_truthy_normalizes_conditions():
    assert pcbatch.truthy(np.array(3)) == np.bool_(True)
    assert pcbatch.truthy(np.array([[0]])) == np.bool_(False)
    assert pcbatch.truthy(2.5) and not pcbatch.truthy(0)
    with pytest.raises(ValueError, match="np.all"):
        pcbatch.truthy(np.array([1, 2]))


def test_per_example_broadcasting_in_expressions():
    ctx = pcbatch.Context()

    @ctx.batch
    def scale(x):
        return np.array([1.0, 2.0, 3.0]) * x

    np.testing.assert_allclose(scale(np.array([1.0, 2.0, 3.0])), np.outer([1, 2, 3], [1, 2, 3]))
    np.testing.assert_allclose(
        scale(np.array([1.0, 2.0])), scale(np.array([1.0, 2.0]), dry_run=True)
    )


@backend_param
def test_a_mistake_in_one_function_does_not_stop_the_others(backend_name):
    """Only what main can reach is compiled: a function the call never reaches may hold a
    construct pcbatch rejects, and that error is raised where that function is called
    (or reached), not from every function of the Context."""
    ctx = pcbatch.Context()

    @ctx.batch
    def mean_of_rows(v):
        total = 0.0
        for x, y in zip(v, v, strict=True):  # rejected: strict=True is not supported
            total += x * y
        return total

    @ctx.batch
    def double(x):
        return 2 * x

    @ctx.batch
    def uses_mean(v):
        return mean_of_rows(v) + 1.0

    def shifted(x):  # a closure over a batched function is followed too
        @ctx.batch
        def plus_double(y):
            return double(y) + x

        return plus_double

    plus_double = shifted(10)
    options = {"backend": backends.backend(backend_name)}
    np.testing.assert_array_equal(double(np.array([1, 2]), **options), [2, 4])
    np.testing.assert_array_equal(plus_double(np.array([1, 2]), **options), [12, 14])
    for entry in (mean_of_rows, uses_mean):
        with pytest.raises(AutobatchSyntaxError, match="mean_of_rows.*strict=True"):
            entry(np.ones((2, 3)), **options)
    with pytest.raises(AutobatchSyntaxError, match="mean_of_rows"):
        ctx.module()  # every function: the mistake is in it
