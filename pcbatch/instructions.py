"""Seed-compatible name for the IR: ``pcbatch.instructions``.

The real home is ``pcbatch.ir``; this module re-exports it for users of the
``tfp.experimental.auto_batching.instructions`` API.
"""

from pcbatch.ir.nodes import (
    COPY,
    Block,
    BranchOp,
    ControlFlowGraph,
    Function,
    FunctionCallOp,
    GotoOp,
    HaltOp,
    IndirectGotoOp,
    Module,
    PopOp,
    PrimOp,
    Program,
    PushGotoOp,
    ReturnOp,
    SourceLoc,
    copy_op,
)
from pcbatch.ir.types import TensorType, Type, VariableAllocation

__all__ = [
    "COPY",
    "FULL",
    "NULL",
    "REGISTER",
    "TEMPORARY",
    "Block",
    "BranchOp",
    "ControlFlowGraph",
    "Function",
    "FunctionCallOp",
    "GotoOp",
    "HaltOp",
    "IndirectGotoOp",
    "Module",
    "PopOp",
    "PrimOp",
    "Program",
    "PushGotoOp",
    "ReturnOp",
    "SourceLoc",
    "TensorType",
    "Type",
    "VariableAllocation",
    "copy_op",
]

NULL = VariableAllocation.NULL
TEMPORARY = VariableAllocation.TEMPORARY
REGISTER = VariableAllocation.REGISTER
FULL = VariableAllocation.FULL
