"""Seed-API programs run unchanged after ``import pcbatch as ab`` (issue 25).

Written from the wording of the seed pages (``tfp.experimental.auto_batching``):
``Context.batch(type_inference)``, ``batch_uncurried(function, type_inference)``,
the module list, ``truthy``, and ``PrimOp`` as a namedtuple of four fields.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import pcbatch as ab
from tests import backends

INT = ab.TensorType(np.int64, ())


def _on(backend_name: str, value):
    """``value`` as the backend's own array type (what its users pass)."""
    if backend_name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(value)
    if backend_name == "tensorflow":
        import tensorflow as tf

        return tf.constant(value)
    return np.asarray(value)


def _same_types(types):
    return [types[0]]


@backends.backend_param
def test_type_inference_by_keyword_is_never_the_batched_function(backend_name):
    ctx = ab.Context()

    @ctx.batch(type_inference=_same_types)
    def plus1(x):
        return x + 1

    assert ctx.function_names() == ["plus1"]
    result = plus1(np.array([1, 2, 3]), backend=backends.backend(backend_name))
    backends.assert_close(result, np.array([2, 3, 4]), backend_name)


@pytest.mark.parametrize(
    "declared",
    [
        lambda ts: [ts[0]],  # the seed's form: a list of Types
        lambda ts: ts[0],  # one Type
        lambda ts: ts[0].tensors,  # one TensorType
        lambda ts: [ts[0].tensors],  # a list of TensorTypes
    ],
)
@backends.backend_param
def test_type_inference_forms_for_one_result(declared, backend_name):
    ctx = ab.Context()

    def double(x):
        return x * 2

    fn = ctx.batch_uncurried(double, declared)
    backends.assert_close(fn(np.array([1, 2]), backend=backends.backend(backend_name)),
                          np.array([2, 4]), backend_name)


@pytest.mark.parametrize(
    "declared",
    [lambda ts: (ts[0].tensors, ts[0].tensors), lambda ts: [ts[0], ts[0]]],
)
@backends.backend_param
def test_type_inference_forms_for_a_tuple_result(declared, backend_name):
    ctx = ab.Context()

    def both(x):
        return x, x + 1

    fn = ctx.batch_uncurried(both, declared)
    first, second = fn(np.array([1, 2]), backend=backends.backend(backend_name))
    backends.assert_close(first, np.array([1, 2]), backend_name)
    backends.assert_close(second, np.array([2, 3]), backend_name)


def test_type_inference_with_a_wrong_form_names_the_function():
    ctx = ab.Context()

    def double(x):
        return x * 2

    fn = ctx.batch_uncurried(double, lambda ts: 3)
    with pytest.raises(ab.TypeInferenceError, match="type_inference of 'double' returned 3"):
        fn(np.array([1, 2]))


def fib(n):
    if n <= 1:
        return n
    return fib(n - 1) + fib(n - 2)


@backends.backend_param
def test_batch_uncurried_recursion_through_the_global_name_is_a_batched_call(backend_name):
    ctx = ab.Context()
    batched_fib = ctx.batch_uncurried(fib, lambda ts: [ts[0]])
    calls = [op for block in ctx.program("fib").function("fib").graph
             for op in block.instructions if type(op).__name__ == "FunctionCallOp"]
    assert len(calls) == 2
    result = batched_fib(np.array([5, 6, 7]), backend=backends.backend(backend_name))
    backends.assert_close(result, np.array([5, 8, 13]), backend_name)


@backends.backend_param
def test_truthy_and_dry_run_on_the_backends_own_arrays(backend_name):
    assert bool(ab.truthy(_on(backend_name, [True])))
    assert not bool(ab.truthy(_on(backend_name, 0.0)))
    with pytest.raises(ab.ConditionShapeError):
        ab.truthy(_on(backend_name, [1, 2]))
    ctx = ab.Context()

    @ctx.batch
    def clip(x):
        if x > 1:
            return x * 2

        return x

    x = _on(backend_name, [1, 3])
    np.testing.assert_array_equal(np.asarray(clip(x, dry_run=True)), [1, 6])
    np.testing.assert_array_equal(np.asarray(clip(x)), [1, 6])


SEED_MODULES = ["allocation_strategy", "dsl", "frontend", "instructions", "liveness",
                "lowering", "numpy_backend", "tf_backend", "type_inference",
                "virtual_machine", "xla"]


@pytest.mark.parametrize("module", SEED_MODULES)
def test_seed_modules_are_attributes_and_importable(module):
    if module == "tf_backend" and "tensorflow" not in backends.BACKEND_NAMES:
        pytest.skip("TensorFlow is not installed")
    assert getattr(ab, module) is importlib.import_module(f"pcbatch.{module}")


def test_seed_classes_and_functions_at_top_level():
    for name in ["Context", "NumpyBackend", "TensorType", "Type", "truthy"]:
        assert hasattr(ab, name)
    assert ab.frontend.Context is ab.Context
    assert ab.frontend.truthy is ab.truthy
    if "tensorflow" in backends.BACKEND_NAMES:
        from pcbatch.backends.tensorflow import TensorFlowBackend

        assert ab.TensorFlowBackend is TensorFlowBackend
        assert ab.tf_backend.TensorFlowBackend is TensorFlowBackend


def test_primop_is_a_namedtuple_of_four_fields():
    op = ab.instructions.PrimOp(("a",), "b", np.negative)
    vars_in, vars_out, function, skip_push_mask = op
    assert (op[0], op[1], op[2], op[3]) == (vars_in, vars_out, function, skip_push_mask)
    assert vars_in == ("a",) and vars_out == "b" and function is np.negative
    assert skip_push_mask == frozenset() and len(op) == 4
    assert op._fields == ("vars_in", "vars_out", "function", "skip_push_mask")
    assert op._replace(vars_out="c").vars_out == "c"
    assert op.replace(vars_out="d").vars_out == "d" and op.replace() is op


def test_xla_compile_nested_output_keeps_the_structure():
    if "tensorflow" not in backends.BACKEND_NAMES:
        pytest.skip("TensorFlow is not installed")
    import tensorflow as tf

    compiled = ab.xla.compile_nested_output(lambda x: {"a": x + 1, "b": (x * 2,)})
    result = compiled(tf.constant([1.0, 2.0]))
    np.testing.assert_allclose(result["a"], [2.0, 3.0])
    np.testing.assert_allclose(result["b"][0], [2.0, 4.0])


@ab.batched_primitive
def _row_norms(v):
    # Written for a whole batch, as the seed's primitives are: axis -1 is the event.
    return np.sqrt(np.sum(v * v, axis=-1))


@backends.backend_param
def test_batched_primitive_helper_receives_the_whole_batch(backend_name):
    ctx = ab.Context()

    @ctx.batch
    def scaled_norm(v, k):
        if k > 0:
            return _row_norms(v * k) + 1.0
        return _row_norms(v)

    v = np.array([[3.0, 4.0], [6.0, 8.0], [1.0, 0.0]])
    k = np.array([1.0, -1.0, 2.0])
    expected = np.array([6.0, 10.0, 3.0])
    result = scaled_norm(v, k, backend=backends.backend(backend_name))
    backends.assert_close(result, expected, backend_name)
    ops = [op for b in ctx.program("scaled_norm").function("scaled_norm").graph
           for op in b.instructions if op.function is _row_norms]
    assert len(ops) == 2 and not any(op.per_example for op in ops)


def test_seed_backend_constructor_arguments():
    ab.NumpyBackend(safety_checks=False)
    if "tensorflow" not in backends.BACKEND_NAMES:
        return
    backend = ab.TensorFlowBackend(safety_checks=True, while_parallel_iterations=4,
                                   basic_block_xla_device="/cpu:0")
    assert backend.jit_compile and backend.while_parallel_iterations == 4
    ctx = ab.Context()

    @ctx.batch
    def fib(n):
        if n <= 1:
            return n
        return fib(n - 1) + fib(n - 2)

    backends.assert_close(fib(np.array([5, 6]), backend=backend), np.array([5, 8]),
                          "tensorflow")
    with pytest.raises(ValueError, match="while_parallel_iterations"):
        ab.TensorFlowBackend(while_parallel_iterations=0)


INT32 = ab.TensorType(np.int32, ())


def _pick(x):
    ans = 1
    if x > 4:
        ans = 3
    return ans


def _add(x, k):
    return x + k


@backends.backend_param
def test_declared_int32_result_takes_literals_and_python_scalar_inputs(backend_name):
    """Item 3: a declared int32 result on int32 inputs holds the literals ``1``/``3``
    and ``x + 5`` with the Python int 5 passed as an argument (the seed promotes scalar
    inputs); both were type errors ("cannot hold") before."""
    ctx = ab.Context()
    declared = lambda *types: [INT32]  # noqa: E731
    pick = ctx.batch_uncurried(_pick, declared)
    add = ctx.batch_uncurried(_add, declared)
    x = np.array([1, 5, 9], np.int32)
    backend = backends.backend(backend_name)
    picked = np.asarray(pick(x, backend=backend))
    assert picked.dtype == np.int32 and picked.tolist() == [1, 3, 3]
    added = np.asarray(add(x, 5, backend=backend))
    assert added.dtype == np.int32 and added.tolist() == [6, 10, 14]
