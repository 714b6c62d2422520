"""Canonical text form of IR programs, for golden tests, errors and debugging.

Contract: the output is a deterministic function of the IR alone (never a
memory address, never the order of a dict that the IR does not fix), so two
equal programs print identically. Both structured programs (functions of
blocks) and lowered programs (one flat graph) print. Example::

    program main=fib in=(fib.n) out=(fib.__ret0)
    vars:
      fib.n : int64[] [FULL]
      ...

    function fib(fib.n) -> (fib.__ret0):
      fib.entry:
        fib.t0 = <lambda>(fib.n)
        branch fib.t0 then fib.then1 else fib.else1
      ...

Instruction forms:

* primitive: ``a, (b, c) = label(x, y)``; a lone name in a one-element tuple
  prints as ``(a,)``; a function written for one example adds
  `` [per_example]``. Outputs that push print as `` [push a, b]``: those not
  in ``skip_push_mask`` whose allocation is FULL, shown only once the program
  has allocations (or is lowered), since before allocation no write pushes.
* call: ``r0, r1 = call f(x) [saves a, b] [tail]``
* ``pop a, b`` ; ``branch c then L1 else L2`` ; ``goto L`` ; ``return`` ;
  ``push_goto L (return to R)`` ; ``indirect_goto`` ; ``halt``.

With ``with_locs=True`` each line that has a SourceLoc ends in
``  # file.py:12`` (base name only, so the text does not depend on checkouts),
and each block's label line shows the user line where the block's code starts.
``str(program)`` prints that way.
"""

from __future__ import annotations

import os
from typing import Any

from pcbatch.ir.nodes import (
    Block,
    BranchOp,
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
from pcbatch.ir.types import VariableAllocation, flatten, format_pattern, is_pattern_node

__all__ = ["format_block", "format_function", "format_instruction", "format_program"]

_INDENT = "  "


def _names(names) -> str:
    return ", ".join(names)


def _outputs(pattern: Any) -> str:
    # The top-level tuple loses its parentheses (``a, b = ...``) but must
    # stay distinguishable from a single name, hence ``(a,)``.
    if is_pattern_node(pattern) and len(pattern) >= 2:
        return ", ".join(format_pattern(p) for p in pattern)
    return format_pattern(pattern)


def _pushed(op: PrimOp, program: Program | None) -> list:
    if program is None or not (program.lowered or program.var_alloc):
        return []
    return [
        v
        for v in flatten(op.vars_out)
        if v not in op.skip_push_mask and program.alloc_of(v) == VariableAllocation.FULL
    ]


def _format_prim(op: PrimOp, program: Program | None) -> str:
    text = f"{_outputs(op.vars_out)} = {op.label}({_names(op.vars_in)})"
    # getattr: ``per_example`` is a later addition to PrimOp.
    if getattr(op, "per_example", False):
        text += " [per_example]"
    pushed = _pushed(op, program)
    if pushed:
        text += f" [push {_names(pushed)}]"
    return text


def _format_call(op: FunctionCallOp) -> str:
    text = f"call {op.function}({_names(op.vars_in)})"
    if op.vars_out:
        text = f"{_names(op.vars_out)} = {text}"
    if op.saves:
        text += f" [saves {_names(op.saves)}]"
    if op.tail:
        text += " [tail]"
    return text


def format_instruction(op: Any, program: Program | None = None) -> str:
    """One instruction or terminator, without indentation or location.

    Args:
      op: any IR instruction or terminator.
      program: the program it belongs to, needed only to mark pushing writes.
    """
    if isinstance(op, PrimOp):
        return _format_prim(op, program)
    if isinstance(op, FunctionCallOp):
        return _format_call(op)
    if isinstance(op, PopOp):
        return f"pop {_names(op.vars)}"
    if isinstance(op, BranchOp):
        return f"branch {op.cond_var} then {op.true_target} else {op.false_target}"
    if isinstance(op, GotoOp):
        return f"goto {op.target}"
    if isinstance(op, ReturnOp):
        return "return"
    if isinstance(op, PushGotoOp) and op.cond_var is not None:
        return (
            f"push_branch {op.cond_var} then {op.target} else {op.false_target} "
            f"(return to {op.return_target})"
        )
    if isinstance(op, PushGotoOp):
        return f"push_goto {op.target} (return to {op.return_target})"
    if isinstance(op, IndirectGotoOp):
        return "indirect_goto"
    if isinstance(op, HaltOp):
        return "halt"
    return f"<unknown {type(op).__name__}>"


def format_loc(loc: SourceLoc | None) -> str:
    """``file.py:12`` (base name only), or an empty string."""
    if loc is None:
        return ""
    return f"{os.path.basename(loc.file)}:{loc.line}"


def block_loc(block: Block) -> SourceLoc | None:
    """The first user source location in a block (where its code starts), or None."""
    return next(iter(_block_locs(block)), None)


def _block_locs(block: Block) -> list:
    ops = (*block.instructions, block.terminator)
    return [op.loc for op in ops if getattr(op, "loc", None) is not None and op.loc.line]


def source_lines(block: Block) -> tuple:
    """The distinct ``file.py:line`` of a block's code, in order of first appearance."""
    return tuple(dict.fromkeys(format_loc(loc) for loc in _block_locs(block)))


def _line(indent: str, text: str, loc: SourceLoc | None, with_locs: bool) -> str:
    if with_locs and loc is not None:
        text = f"{text}  # {format_loc(loc)}"
    return indent + text


def format_block(
    block: Block,
    *,
    program: Program | None = None,
    with_locs: bool = False,
    indent: str = "",
) -> str:
    """A block: its label, then one line per instruction and the terminator."""
    inner = indent + _INDENT
    lines = [_line(indent, f"{block.label}:", block_loc(block), with_locs)]
    for op in block.instructions:
        lines.append(_line(inner, format_instruction(op, program), op.loc, with_locs))
    terminator = block.terminator
    if terminator is None:
        lines.append(inner + "<no terminator>")
    else:
        lines.append(_line(inner, format_instruction(terminator), terminator.loc, with_locs))
    return "\n".join(lines)


def format_function(
    fn: Function, *, program: Program | None = None, with_locs: bool = False
) -> str:
    """A function header ``function f(params) -> (results):`` and its blocks."""
    header = f"function {fn.name}({_names(fn.vars_in)}) -> ({_names(fn.vars_out)}):"
    if fn.type_inference is not None:
        header += " [custom type inference]"
    lines = [_line("", header, fn.loc, with_locs)]
    for block in fn.graph:
        lines.append(format_block(block, program=program, with_locs=with_locs, indent=_INDENT))
    return "\n".join(lines)


def _format_vars(program: Program) -> list:
    names = sorted(set(program.var_types) | set(program.var_alloc))
    if not names:
        return []
    lines = ["vars:"]
    for name in names:
        text = f"{_INDENT}{name}"
        if name in program.var_types:
            text += f" : {program.var_types[name]!r}"
        if name in program.var_alloc:
            text += f" [{VariableAllocation(program.var_alloc[name]).name}]"
        lines.append(text)
    return lines


def format_program(program: Program, *, with_locs: bool = False) -> str:
    """The whole program: a header, its variables (types, allocations), its code.

    Args:
      program: a structured or lowered program.
      with_locs: append ``  # file:line`` to lines that carry a SourceLoc.

    Returns:
      The text, ending in a newline.
    """
    kind = "lowered program" if program.lowered else "program"
    lines = [
        f"{kind} main={program.main} in=({_names(program.vars_in)}) "
        f"out=({_names(program.vars_out)})"
    ]
    lines.extend(_format_vars(program))
    if program.lowered:
        lines.append("")
        lines.append("graph:")
        for block in program.graph:
            lines.append(format_block(block, program=program, with_locs=with_locs, indent=_INDENT))
    for fn in program.functions:
        lines.append("")
        lines.append(format_function(fn, program=program, with_locs=with_locs))
    return "\n".join(lines) + "\n"
