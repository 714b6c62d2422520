"""Tests of the IR verifier: one deliberately broken program per check."""

import dataclasses

import numpy as np
import pytest

from pcbatch import dsl
from pcbatch.errors import VerificationError
from pcbatch.ir import nodes
from pcbatch.ir.nodes import (
    Block,
    BranchOp,
    ControlFlowGraph,
    Function,
    FunctionCallOp,
    GotoOp,
    HaltOp,
    IndirectGotoOp,
    PopOp,
    PrimOp,
    Program,
    PushGotoOp,
    ReturnOp,
    SourceLoc,
)
from pcbatch.ir.types import TensorType, Type, VariableAllocation
from pcbatch.ir.verify import verify
from tests.programs.corpus import CORPUS

LOC = SourceLoc("/src/user.py", "model", 42)
INT = Type(TensorType(np.int64, ()))
BOOL = Type(TensorType(np.bool_, ()))


def _prim(vars_in, vars_out, loc=None):
    return PrimOp(tuple(vars_in), vars_out, np.negative, loc=loc, name="neg")


def _fn(name, vars_in, vars_out, *blocks):
    return Function(name, tuple(vars_in), tuple(vars_out), ControlFlowGraph(tuple(blocks)))


def _program(*functions, main="main", **kw):
    fn = next((f for f in functions if f.name == main), functions[0])
    return Program(tuple(functions), main, fn.vars_in, fn.vars_out, **kw)


def _identity_main(*instructions, terminator=None):
    """main(x) -> r, with the given body ending in r = copy(x); return."""
    body = (*instructions, nodes.copy_op(("x",), ("r",)))
    return _fn("main", ["x"], ["r"], Block("b0", body, terminator or ReturnOp()))


def _fails(program, *fragments):
    with pytest.raises(VerificationError) as info:
        verify(program)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


@pytest.mark.parametrize("entry", CORPUS, ids=lambda p: p.name)
def test_corpus_programs_verify(entry):
    verify(entry.build())


def test_corpus_programs_verify_after_type_inference():
    infer_types = pytest.importorskip("pcbatch.passes.infer_types")
    numpy_backend = pytest.importorskip("pcbatch.backends.numpy")
    rng = np.random.RandomState(0)
    for entry in CORPUS:
        args = entry.make_args(rng, 3)
        sig = [Type(TensorType(a.dtype, a.shape[1:])) for a in args]
        try:
            typed = infer_types.run(entry.build(), numpy_backend.NumpyBackend(), sig)
        except ValueError:
            continue  # see test_reference: infer_types gaps are reported there
        verify(typed)


def test_missing_main():
    _fails(_program(_identity_main(), main="nope"), "main function 'nope' does not exist")


def test_duplicate_function_names():
    _fails(_program(_identity_main(), _identity_main()), "duplicate function names: main")


def test_program_signature_must_match_main():
    program = dataclasses.replace(_program(_identity_main()), vars_in=("y",))
    _fails(program, "vars_in ('y',) differ from main's ('x',)")


def test_lowered_instruction_in_structured_program():
    _fails(
        _program(_identity_main(PopOp(("x",), LOC))),
        "function 'main', block 'b0', instruction 0 `pop x` at /src/user.py:42 in model",
        "PopOp is not allowed in a structured program",
    )


def test_lowered_terminator_in_structured_program():
    _fails(
        _program(_identity_main(terminator=HaltOp(LOC))),
        "terminator `halt`",
        "HaltOp cannot end a block of a structured program",
    )


def test_unknown_branch_target():
    fn = _fn(
        "main",
        ["x"],
        ["x"],
        Block("b0", (), BranchOp("x", "b1", "elsewhere", LOC)),
        Block("b1", (), ReturnOp()),
    )
    _fails(_program(fn), "block 'b0'", "jumps to unknown block 'elsewhere'")


def test_unknown_callee():
    call = FunctionCallOp("ghost", ("x",), ("y",), LOC)
    _fails(_program(_identity_main(call)), "calls unknown function 'ghost'", "call ghost(x)")


def test_call_arity():
    callee = _fn("g", ["a", "b"], ["c"], Block("g0", (_prim(["a"], "c"),), ReturnOp()))
    too_few = FunctionCallOp("g", ("x",), ("y",), LOC)
    _fails(_program(_identity_main(too_few), callee), "passes 1 arguments to 'g', which takes 2")
    too_many_results = FunctionCallOp("g", ("x", "x"), ("y", "z"), LOC)
    _fails(
        _program(_identity_main(too_many_results), callee),
        "binds 2 results of 'g', which returns 1",
    )


def test_read_before_assignment_on_one_path():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with f.if_(f.prim(lambda x: x > 0, "x")):
            f.copy("x", out="y")
        f.return_("y")
    _fails(
        mb.program("main"),
        "function 'main', block 'main.endif1', instruction 0 `main.__ret0 = copy(main.y)`",
        "test_verify.py",
        "reads 'main.y' before it is assigned on every path",
    )


def test_read_before_assignment_around_a_loop():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        with f.loop():
            f.break_if(f.prim(lambda x: x > 0, "x"))
            f.copy("x", out="y")
        f.prim(np.negative, "x", out="y")
        f.return_("y")
    verify(mb.program("main"))
    # Now read y at the loop head, where the first iteration has not set it.
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",)) as f:
        f.copy("x", out="z")
        with f.loop():
            f.break_if(f.prim(lambda z: z > 0, "z"))
            f.copy("x", out="y")
            f.copy("y", out="z")
        f.return_("z")
    verify(mb.program("main"))
    fn = mb.program("main").function("main")
    head = fn.graph.block("main.loop1")
    broken = dataclasses.replace(
        head, instructions=(_prim(["main.y"], "main.w", LOC), *head.instructions)
    )
    blocks = tuple(broken if b.label == head.label else b for b in fn.graph)
    fn = dataclasses.replace(fn, graph=ControlFlowGraph(blocks))
    _fails(_program(fn), "block 'main.loop1'", "reads 'main.y' before it is assigned")


def test_return_before_results_are_assigned():
    fn = _fn(
        "main",
        ["x"],
        ["r"],
        Block("b0", (), BranchOp("x", "b1", "b2")),
        Block("b1", (nodes.copy_op(("x",), ("r",)),), ReturnOp()),
        Block("b2", (), ReturnOp(LOC)),
    )
    _fails(_program(fn), "block 'b2', terminator `return` at /src/user.py:42", "['r']")


def test_missing_type():
    program = _program(_identity_main(_prim(["x"], "y", LOC)), var_types={"x": INT, "r": INT})
    _fails(program, "instruction 0 `y = neg(x)`", "variable 'y' has no type")


def test_uncalled_functions_need_no_types():
    unused = _fn("unused", ["a"], ["a"], Block("u0", (), ReturnOp()))
    verify(_program(_identity_main(), unused, var_types={"x": INT, "r": INT}))


def test_branch_condition_must_be_a_scalar():
    fn = _fn(
        "main",
        ["x"],
        ["x"],
        Block("b0", (), BranchOp("x", "b1", "b1", LOC)),
        Block("b1", (), ReturnOp()),
    )
    verify(_program(fn, var_types={"x": BOOL}))
    vector = Type(TensorType(np.bool_, (3,)))
    _fails(_program(fn, var_types={"x": vector}), "branch condition 'x'", "shape ()")
    pair = Type((TensorType(np.bool_, ()), TensorType(np.bool_, ())))
    _fails(_program(fn, var_types={"x": pair}), "single tensor")


def test_duplicate_writes_and_bad_skip_mask():
    op = PrimOp(("x",), ("y", "y"), np.negative)
    _fails(_program(_identity_main(op)), "writes a variable twice")
    op = PrimOp(("x",), "y", np.negative, frozenset({"z"}))
    _fails(_program(_identity_main(op)), "skip_push_mask names variables it does not write")


# ---------------------------------------------------------------------------
# Lowered programs


def _lowered(blocks, var_types=None, var_alloc=None, functions=()):
    types = {"n": INT, "k": INT, "c": BOOL} if var_types is None else var_types
    allocs = (
        {
            "n": VariableAllocation.REGISTER,
            "k": VariableAllocation.FULL,
            "c": VariableAllocation.TEMPORARY,
        }
        if var_alloc is None
        else var_alloc
    )
    return Program(
        functions, "main", ("n",), ("k",), types, allocs, ControlFlowGraph(tuple(blocks))
    )


def _good_lowered_blocks():
    return [
        Block("entry", (nodes.copy_op(("n",), ("k",), push=True),), GotoOp("test")),
        Block("test", (_prim(["n"], "c"),), BranchOp("c", "call", "exit")),
        Block("call", (), PushGotoOp("back", "sub")),
        Block("back", (PopOp(("k",)),), GotoOp("exit")),
        Block("sub", (), IndirectGotoOp()),
        Block("exit", (), HaltOp()),
    ]


def test_lowered_program_verifies():
    verify(_lowered(_good_lowered_blocks()))


def test_lowered_unknown_return_target():
    blocks = _good_lowered_blocks()
    blocks[2] = Block("call", (), PushGotoOp("nowhere", "sub", LOC))
    _fails(_lowered(blocks), "block 'call'", "jumps to unknown block 'nowhere'")


def test_lowered_structured_ops_rejected():
    blocks = _good_lowered_blocks()
    blocks[0] = Block("entry", (FunctionCallOp("f", ("n",), ("k",)),), GotoOp("test"))
    _fails(_lowered(blocks), "FunctionCallOp is not allowed in a lowered program")
    blocks = _good_lowered_blocks()
    blocks[4] = Block("sub", (), ReturnOp())
    _fails(_lowered(blocks), "ReturnOp cannot end a block of a lowered program")


def test_lowered_needs_types_and_allocations():
    blocks = _good_lowered_blocks()
    _fails(
        _lowered(blocks, var_types={"k": INT, "c": BOOL}),
        "block 'entry', instruction 0",
        "variable 'n' is read but has no type",
    )
    _fails(
        _lowered(blocks, var_alloc={"k": VariableAllocation.FULL}),
        "variable 'n' is read but has no allocation",
    )


def test_pop_needs_a_full_variable():
    blocks = _good_lowered_blocks()
    allocs = {"n": VariableAllocation.REGISTER, "k": VariableAllocation.REGISTER}
    allocs["c"] = VariableAllocation.TEMPORARY
    _fails(
        _lowered(blocks, var_alloc=allocs),
        "block 'back', instruction 0 `pop k`",
        "pops 'k', whose allocation is REGISTER, not FULL",
    )


def test_lowered_program_has_no_functions():
    _fails(_lowered(_good_lowered_blocks(), functions=(_identity_main(),)), "functions == ()")


def test_lowered_entries_must_exist():
    program = _lowered(_good_lowered_blocks()).replace(entries={"main": "entry", "f": "gone"})
    _fails(program, "the entry of function 'f' is unknown block 'gone'")
