"""Tests of the reference interpreter, pcbatch.vm.reference."""

import numpy as np
import pytest

from pcbatch import dsl
from pcbatch.errors import BatchSizeError
from pcbatch.ir.nodes import Block, ControlFlowGraph, HaltOp
from pcbatch.ir.types import TensorType, Type, flatten
from pcbatch.vm import reference
from tests.programs.corpus import CORPUS, build_fib

INT = Type(TensorType(np.int64, ()))
BOOL = Type(TensorType(np.bool_, ()))


def _typed_fib():
    program = build_fib()
    names = {
        v
        for fn in program.functions
        for b in fn.graph
        for op in b.instructions
        for v in (*op.vars_in, *flatten(op.vars_out))
    }
    types = {v: INT for v in names | {"fib.n", "fib.__ret0"}}
    types["fib.t0"] = BOOL
    return program.replace(var_types=types)


def _infer(program, args):
    infer_types = pytest.importorskip("pcbatch.passes.infer_types")
    numpy_backend = pytest.importorskip("pcbatch.backends.numpy")
    sig = [Type(TensorType(np.asarray(a).dtype, np.shape(a)[1:])) for a in args]
    return infer_types.run(program, numpy_backend.NumpyBackend(), sig)


def test_fib_with_hand_set_types():
    program = _typed_fib()
    assert [int(reference.run(program, [n])) for n in (6, 7, 8)] == [8, 13, 21]
    out = reference.run_batch(program, [np.array([6, 7, 8])])
    assert out.dtype == np.int64 and out.tolist() == [8, 13, 21]


def test_values_take_the_declared_dtype_and_shape():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        f.return_(f.prim(lambda x: x + 1, "x", out="y"))
    vec = Type(TensorType(np.float32, (2,)))
    program = mb.program("main").replace(
        var_types={"main.x": INT, "main.y": vec, "main.__ret0": vec}
    )
    out = reference.run(program, [np.int64(5)])
    assert out.dtype == np.float32 and out.shape == (2,)
    np.testing.assert_array_equal(out, [6.0, 6.0])
    with pytest.raises(
        reference.InterpreterError, match="cannot store int64\\[1, 3\\] in 'main.x'"
    ):
        reference.run(program, [np.array([1, 2, 3])])


def _check_against_plain_python(entry, program, args, n):
    out = reference.run_batch(program, args)
    for i in range(n):
        expected = flatten(entry.reference(*(a[i] for a in args)))
        actual = [np.asarray(leaf)[i] for leaf in flatten(out)]
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, rtol=1e-12)


@pytest.mark.parametrize("entry", CORPUS, ids=lambda p: p.name)
def test_corpus_untyped(entry):
    rng = np.random.RandomState(1)
    args = entry.make_args(rng, 4)
    _check_against_plain_python(entry, entry.build(), args, 4)


@pytest.mark.parametrize("entry", CORPUS, ids=lambda p: p.name)
def test_corpus_typed(entry):
    rng = np.random.RandomState(2)
    args = entry.make_args(rng, 4)
    program = _infer(entry.build(), args)
    _check_against_plain_python(entry, program, args, 4)
    # The depth each program declares suffices (tail calls aside).
    if not entry.needs_tail_calls:
        for i in range(4):
            interp = reference.Interpreter(program)
            interp.call_main([a[i] for a in args])
            assert interp.max_depth <= entry.max_stack_depth


def test_step_limit_names_function_and_block():
    mb = dsl.ModuleBuilder()
    with mb.define("spin", params=("x",)) as f, f.loop():
        f.prim(lambda x: x + 1, "x", out="x")
    program = mb.program("spin")
    with pytest.raises(reference.StepLimitError, match="function 'spin' at block 'spin.loop1'"):
        reference.run(program, [np.int64(0)], max_steps=50)


def test_primitive_exceptions_propagate():
    class Boom(Exception):
        pass

    def explode(x):
        raise Boom("inside")

    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        f.return_(f.prim(explode, "x"))
    with pytest.raises(Boom, match="inside"):
        reference.run(mb.program("main"), [1])


def test_unassigned_read_is_an_interpreter_error():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with f.if_(f.prim(lambda x: x > 0, "x")):
            f.copy("x", out="y")
        f.return_("y")
    program = mb.program("main")
    assert reference.run(program, [3]) == 3
    with pytest.raises(reference.InterpreterError, match="'main.y' is read"):
        reference.run(program, [-3])


def test_run_batch_broadcasts_leading_one_and_scalars():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("a", "b", "c"), returns=2) as f:
        s = f.prim(lambda a, b, c: a + b + c, "a", "b", "c")
        f.return_(s, "c")
    program = mb.program("main")
    out, c = reference.run_batch(program, [np.array([1, 2, 3]), np.array([10]), np.int64(100)])
    assert out.tolist() == [111, 112, 113]
    assert c.tolist() == [100, 100, 100]
    with pytest.raises(BatchSizeError):
        reference.run_batch(program, [np.zeros(2), np.zeros(3), np.zeros(2)])


def test_pattern_arguments_and_results():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("p",)) as f:
        f.prim(lambda p: (p[1], p[0]), "p", out="q")
        f.return_("q")
    program = mb.program("main")
    pair = Type((TensorType(np.int64, ()), TensorType(np.float64, (2,))))
    swapped = Type((TensorType(np.float64, (2,)), TensorType(np.int64, ())))
    program = program.replace(var_types={"main.p": pair, "main.q": swapped, "main.__ret0": swapped})
    vec, num = reference.run_batch(program, [(np.array([1, 2]), np.ones((2, 2)))])
    assert vec.shape == (2, 2) and num.tolist() == [1, 2]


def test_lowered_programs_are_rejected():
    program = _typed_fib()
    lowered = program.replace(functions=(), graph=ControlFlowGraph((Block("b", (), HaltOp()),)))
    with pytest.raises(ValueError, match="structured programs only"):
        reference.run(lowered, [1])
