"""Consistent renaming of variables inside a function."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from pcbatch.ir.nodes import (
    Block,
    BranchOp,
    ControlFlowGraph,
    Function,
    FunctionCallOp,
    PopOp,
    PrimOp,
    PushGotoOp,
)
from pcbatch.ir.types import map_pattern


def _rename_op(op, mapping: Mapping):
    name = lambda v: mapping.get(v, v)
    if isinstance(op, PrimOp):
        return dataclasses.replace(
            op,
            vars_in=tuple(name(v) for v in op.vars_in),
            vars_out=map_pattern(name, op.vars_out),
            skip_push_mask=frozenset(name(v) for v in op.skip_push_mask),
        )
    if isinstance(op, FunctionCallOp):
        return dataclasses.replace(
            op,
            vars_in=tuple(name(v) for v in op.vars_in),
            vars_out=map_pattern(name, op.vars_out),
            saves=tuple(name(v) for v in op.saves),
        )
    if isinstance(op, PopOp):
        return dataclasses.replace(op, vars=tuple(name(v) for v in op.vars))
    if isinstance(op, (BranchOp, PushGotoOp)) and op.cond_var is not None:
        return dataclasses.replace(op, cond_var=name(op.cond_var))
    return op


def rename_block(block: Block, mapping: Mapping) -> Block:
    return Block(
        block.label,
        tuple(_rename_op(op, mapping) for op in block.instructions),
        _rename_op(block.terminator, mapping),
    )


def rename_function(function: Function, mapping: Mapping) -> Function:
    """``function`` with every variable ``v`` replaced by ``mapping.get(v, v)``."""
    if not mapping:
        return function
    blocks = tuple(rename_block(b, mapping) for b in function.graph)
    return dataclasses.replace(
        function,
        vars_in=tuple(mapping.get(v, v) for v in function.vars_in),
        vars_out=tuple(mapping.get(v, v) for v in function.vars_out),
        graph=ControlFlowGraph(blocks),
    )
