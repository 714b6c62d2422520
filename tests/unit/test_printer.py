"""Tests of the canonical IR text form, pcbatch.ir.printer."""

import numpy as np
import pytest

from pcbatch import dsl
from pcbatch.ir import nodes
from pcbatch.ir.nodes import (
    Block,
    BranchOp,
    ControlFlowGraph,
    FunctionCallOp,
    GotoOp,
    HaltOp,
    IndirectGotoOp,
    PopOp,
    PrimOp,
    Program,
    PushGotoOp,
    SourceLoc,
)
from pcbatch.ir.printer import format_block, format_function, format_instruction, format_program
from pcbatch.ir.types import TensorType, Type, VariableAllocation

FIB_TEXT = """\
program main=fib in=(fib.n) out=(fib.__ret0)

function fib(fib.n) -> (fib.__ret0):
  fib.entry:
    fib.t0 = le2(fib.n)
    branch fib.t0 then fib.then1 else fib.else1
  fib.then1:
    fib.t1 = const[1]()
    fib.__ret0 = copy(fib.t1)
    return
  fib.else1:
    fib.t2 = <lambda>(fib.n)
    fib.t3 = call fib(fib.t2)
    fib.t4 = <lambda>(fib.n)
    fib.t5 = call fib(fib.t4)
    fib.t6 = add(fib.t3, fib.t5)
    fib.__ret0 = copy(fib.t6)
    return
"""


def _fib():
    mb = dsl.ModuleBuilder()
    fib = mb.declare("fib", params=("n",))
    with mb.define(fib) as f:
        with f.if_(f.prim(lambda n: n <= 2, "n", name="le2")):
            f.return_(f.const(1))
        with f.else_():
            a = f.call(fib, f.prim(lambda n: n - 1, "n"))
            b = f.call(fib, f.prim(lambda n: n - 2, "n"))
            f.return_(f.prim(np.add, a, b))
    return mb.program("fib")


def test_structured_golden():
    assert format_program(_fib()) == FIB_TEXT


def test_printing_is_deterministic_and_address_free():
    text = format_program(_fib(), with_locs=True)
    assert text == format_program(_fib(), with_locs=True)
    assert "0x" not in text


def test_locations_use_the_base_name():
    text = format_program(_fib(), with_locs=True)
    assert "fib.t0 = le2(fib.n)  # test_printer.py:" in text
    assert "function fib(fib.n) -> (fib.__ret0):  # test_printer.py:" in text
    assert "/" not in text.replace("fib.", "")


def test_types_are_listed_when_present():
    program = _fib()
    types = {v: Type(TensorType(np.int64, ())) for v in ("fib.n", "fib.__ret0")}
    types["fib.t0"] = Type(TensorType(np.bool_, ()))
    text = format_program(program.replace(var_types=types))
    assert "vars:\n  fib.__ret0 : int64[]\n  fib.n : int64[]\n  fib.t0 : bool[]\n" in text


def test_output_patterns():
    loc = SourceLoc("/x/y.py", "f", 3)
    single = PrimOp(("a",), ("b",), np.negative, loc=loc)
    nested = PrimOp(("a",), ("b", ("c", "d")), np.negative)
    assert format_instruction(single) == "(b,) = negative(a)"
    assert format_instruction(nested) == "b, (c, d) = negative(a)"
    move = nodes.copy_op(("a", "b"), ("x", "y"))
    assert format_instruction(move) == "x, y = copy(a, b)"


def test_per_example_primitives_are_marked():
    if "per_example" not in PrimOp.__dataclass_fields__:
        pytest.skip("PrimOp has no per_example field")
    op = PrimOp(("a",), "b", np.negative, per_example=True)
    assert format_instruction(op) == "b = negative(a) [per_example]"


def test_call_with_saves_and_tail():
    call = FunctionCallOp("f", ("a",), ("r", "s"), saves=("k", "m"), tail=True)
    assert format_instruction(call) == "r, s = call f(a) [saves k, m] [tail]"
    assert format_instruction(FunctionCallOp("g", (), ())) == "call g()"


def _lowered() -> Program:
    loc = SourceLoc("/home/u/prog.py", "fib", 7)
    blocks = (
        Block(
            "entry",
            (
                nodes.copy_op(("n",), ("k",), push=True, loc=loc),
                PrimOp(("n",), ("c", "t"), lambda n: (n, n), frozenset({"t"}), loc, "split"),
            ),
            BranchOp("c", "call", "done", loc),
        ),
        Block("call", (), PushGotoOp("back", "entry", loc)),
        Block("back", (PopOp(("k",), loc),), GotoOp("done")),
        Block("done", (), IndirectGotoOp()),
        Block("exit", (), HaltOp()),
    )
    int_t = Type(TensorType(np.int64, ()))
    return Program(
        functions=(),
        main="fib",
        vars_in=("n",),
        vars_out=("k",),
        var_types={"n": int_t, "k": int_t, "c": Type(TensorType(np.bool_, ())), "t": int_t},
        var_alloc={
            "n": VariableAllocation.REGISTER,
            "k": VariableAllocation.FULL,
            "c": VariableAllocation.TEMPORARY,
            "t": VariableAllocation.FULL,
        },
        graph=ControlFlowGraph(blocks),
    )


LOWERED_TEXT = """\
lowered program main=fib in=(n) out=(k)
vars:
  c : bool[] [TEMPORARY]
  k : int64[] [FULL]
  n : int64[] [REGISTER]
  t : int64[] [FULL]

graph:
  entry:
    k = copy(n) [push k]
    c, t = split(n)
    branch c then call else done
  call:
    push_goto entry (return to back)
  back:
    pop k
    goto done
  done:
    indirect_goto
  exit:
    halt
"""


def test_lowered_golden():
    assert format_program(_lowered()) == LOWERED_TEXT


def test_lowered_with_locs():
    text = format_program(_lowered(), with_locs=True)
    assert "    pop k  # prog.py:7\n" in text
    assert "    goto done\n" in text  # no loc, no comment


def test_format_block_and_function():
    program = _fib()
    fn = program.function("fib")
    assert format_block(fn.graph.blocks[1]) == (
        "fib.then1:\n  fib.t1 = const[1]()\n  fib.__ret0 = copy(fib.t1)\n  return"
    )
    assert format_function(fn).splitlines()[0] == "function fib(fib.n) -> (fib.__ret0):"
    lowered = _lowered()
    # Push marks need the program (its allocations).
    assert "[push k]" in format_block(lowered.graph.blocks[0], program=lowered)
    assert "[push" not in format_block(lowered.graph.blocks[0])
