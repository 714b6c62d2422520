"""Seed-compatible name for the IR: ``pcbatch.instructions``.

The real home is ``pcbatch.ir``; this module re-exports it for users of the
``tfp.experimental.auto_batching.instructions`` API.
"""

from pcbatch.ir.nodes import (  # noqa: F401
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
from pcbatch.ir.types import TensorType, Type, VariableAllocation  # noqa: F401

NULL = VariableAllocation.NULL
TEMPORARY = VariableAllocation.TEMPORARY
REGISTER = VariableAllocation.REGISTER
FULL = VariableAllocation.FULL
