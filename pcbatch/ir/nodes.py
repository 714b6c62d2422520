"""The IR: immutable instructions, basic blocks, functions and programs.

Two levels share these nodes.

*Structured* programs (what the DSL and the frontend build) are a tuple of
`Function`s, each a control-flow graph of `Block`s. Straight-line instructions
are `PrimOp` and `FunctionCallOp`; blocks end in `BranchOp`, `GotoOp` or
`ReturnOp`. A function returns the current values of its ``vars_out``.

*Lowered* programs (what the VM runs) have ``functions == ()`` and one flat
``graph``: calls became `PushGotoOp`, returns `IndirectGotoOp`, and saving a
variable around a call is a pushing identity `PrimOp` matched by a `PopOp`.

Variable names are global to a program. The DSL and the frontend qualify each
function's locals with its name, so recursion only has to protect the
variables that a callee may really overwrite.

Nodes are frozen; change them with ``dataclasses.replace``. Blocks refer to
each other by label, never by object, so no pass has to mutate a graph in
place to tie a knot.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable, Mapping
from typing import Any

from pcbatch.ir.types import Type, VariableAllocation, flatten


@dataclasses.dataclass(frozen=True, slots=True)
class SourceLoc:
    """Where an instruction came from in the user's source."""

    file: str
    function: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


_SYNC_LABEL = re.compile(r"\.sync\d+$")


def sync_label(function: str, number: int) -> str:
    """The label of the block that starts at a ``pcbatch.sync()`` point."""
    return f"{function}.sync{number}"


def is_sync_label(label: str) -> bool:
    """Whether a block starts at a ``pcbatch.sync()`` point (the scheduler gathers there)."""
    return _SYNC_LABEL.search(label) is not None


def _identity_copy(*values):
    return values[0] if len(values) == 1 else tuple(values)


# ---------------------------------------------------------------------------
# Straight-line instructions


@dataclasses.dataclass(frozen=True, slots=True)
class PrimOp:
    """An already-batched primitive computation.

    ``function`` is called with positional arguments parallel to ``vars_in``;
    each is a pattern of arrays with a leading batch dimension. It returns a
    pattern matching ``vars_out``; results are broadcast into place, batch
    dimension included (so a constant fills every active thread). Exceptions
    propagate and abort the run.

    Writing a FULL variable in ``vars_out`` pushes: the current value is saved
    on its stack and the result becomes the new top; variables named in
    ``skip_push_mask`` are updated in place instead.

    With ``per_example=True`` the function is written for ONE example instead
    (the frontend compiles the user's expressions so); each backend vectorizes
    it (`NumpyBackend.vectorize`, ``jax.vmap``) and the contract above holds
    for the vectorized function. (In structured programs
    there are no stacks yet and a write is a plain assignment; lowering marks
    every write of the program's own ops as in place, so only the compiler's
    saves push.)
    """

    vars_in: tuple
    vars_out: Any
    function: Callable
    skip_push_mask: frozenset = frozenset()
    loc: SourceLoc | None = None
    name: str = ""
    per_example: bool = False

    def replace(self, vars_out=None) -> PrimOp:
        """A copy of this op with ``vars_out`` replaced."""
        if vars_out is None:
            return self
        return dataclasses.replace(self, vars_out=vars_out)

    # The seed's PrimOp is a namedtuple of its first four fields: index, unpack and
    # ``_replace`` them as there (pcbatch's extra fields follow, by name only).
    _fields = ("vars_in", "vars_out", "function", "skip_push_mask")

    def _seed_tuple(self) -> tuple:
        return (self.vars_in, self.vars_out, self.function, self.skip_push_mask)

    def __iter__(self):
        return iter(self._seed_tuple())

    def __len__(self) -> int:
        return len(self._fields)

    def __getitem__(self, index):
        return self._seed_tuple()[index]

    def _replace(self, **changes) -> PrimOp:
        return dataclasses.replace(self, **changes)

    def batched_function(self, backend) -> Callable:
        """The function with the batched contract on ``backend``."""
        for_backend = getattr(self.function, "for_backend", None)
        special = for_backend(backend) if for_backend is not None else None
        if special is not None:
            return special
        if self.per_example:
            return backend.vectorize(self.function)
        adapt = getattr(backend, "adapt", None)  # e.g. NumPy calls onto jax.numpy
        return adapt(self.function) if adapt is not None else self.function

    @property
    def is_copy(self) -> bool:
        """True for the moves the compiler inserts (argument passing, saves)."""
        return self.function is COPY

    @property
    def label(self) -> str:
        return self.name or getattr(self.function, "__name__", "prim")


#: The function of compiler-inserted copies: ``vars_out`` receives ``vars_in``.
COPY = _identity_copy


def copy_op(vars_in, vars_out, *, push=False, loc=None) -> PrimOp:
    """A parallel move: reads every input before writing any output."""
    vars_in, vars_out = tuple(vars_in), tuple(vars_out)
    skip = frozenset() if push else frozenset(flatten(vars_out))
    if len(vars_out) == 1:
        return PrimOp(vars_in, vars_out[0], COPY, skip, loc, "copy")
    return PrimOp(vars_in, vars_out, COPY, skip, loc, "copy")


@dataclasses.dataclass(frozen=True, slots=True)
class FunctionCallOp:
    """Calls ``function`` (a name) on ``vars_in``, binding its results to ``vars_out``.

    ``saves`` (set by allocation) are the caller's variables that are live
    across this call and that the callee may overwrite; ``tail`` (set by the
    tail-call pass) marks a call whose results are returned at once.
    """

    function: str
    vars_in: tuple
    vars_out: tuple
    loc: SourceLoc | None = None
    saves: tuple = ()
    tail: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class PopOp:
    """Restores each named FULL variable from its stack (the inverse of a push)."""

    vars: tuple
    loc: SourceLoc | None = None


# ---------------------------------------------------------------------------
# Terminators


@dataclasses.dataclass(frozen=True, slots=True)
class BranchOp:
    """Goes to ``true_target`` where ``cond_var`` is true, else ``false_target``."""

    cond_var: str
    true_target: str
    false_target: str
    loc: SourceLoc | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class GotoOp:
    target: str
    loc: SourceLoc | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ReturnOp:
    """Structured IR only: returns the function's ``vars_out`` to the caller."""

    loc: SourceLoc | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class PushGotoOp:
    """Lowered IR: pushes ``return_target`` on the program-counter stack, goes to ``target``.

    With ``cond_var`` (a call whose callee starts by branching, threaded by
    `pcbatch.passes.thread_jumps`): goes to ``target`` where ``cond_var`` is true and
    to ``false_target`` elsewhere.
    """

    return_target: str
    target: str
    loc: SourceLoc | None = None
    cond_var: str | None = None
    false_target: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class IndirectGotoOp:
    """Lowered IR: pops the program-counter stack and goes there (a return)."""

    loc: SourceLoc | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class HaltOp:
    """Lowered IR: the thread stops."""

    loc: SourceLoc | None = None


STRAIGHT_LINE = (PrimOp, FunctionCallOp, PopOp)
TERMINATORS = (BranchOp, GotoOp, ReturnOp, PushGotoOp, IndirectGotoOp, HaltOp)


def successors(terminator) -> tuple:
    """Labels a terminator may transfer to inside its own graph."""
    if isinstance(terminator, BranchOp):
        return (terminator.true_target, terminator.false_target)
    if isinstance(terminator, GotoOp):
        return (terminator.target,)
    if isinstance(terminator, PushGotoOp):
        targets = (terminator.target, terminator.false_target, terminator.return_target)
        return tuple(t for t in targets if t is not None)
    return ()


def reads(op) -> tuple:
    """Variable names an instruction or terminator reads."""
    if isinstance(op, (PrimOp, FunctionCallOp)):
        return tuple(op.vars_in)
    if isinstance(op, BranchOp):
        return (op.cond_var,)
    if isinstance(op, PushGotoOp) and op.cond_var is not None:
        return (op.cond_var,)
    return ()


def writes(op) -> tuple:
    """Variable names an instruction writes."""
    if isinstance(op, (PrimOp, FunctionCallOp)):
        return tuple(flatten(op.vars_out))
    return ()


# ---------------------------------------------------------------------------
# Blocks, graphs, functions, programs


@dataclasses.dataclass(frozen=True, slots=True)
class Block:
    label: str
    instructions: tuple
    terminator: Any

    @property
    def successors(self) -> tuple:
        return successors(self.terminator)


@dataclasses.dataclass(frozen=True)
class ControlFlowGraph:
    """Blocks in order; the first is the entry. Looked up by label."""

    blocks: tuple

    def __post_init__(self):
        index = {}
        for i, block in enumerate(self.blocks):
            if block.label in index:
                raise ValueError(f"duplicate block label {block.label!r}")
            index[block.label] = i
        object.__setattr__(self, "_index", types.MappingProxyType(index))

    @property
    def entry(self) -> str:
        return self.blocks[0].label

    def block(self, label: str) -> Block:
        return self.blocks[self._index[label]]

    def index(self, label: str) -> int:
        return self._index[label]

    def __contains__(self, label: str) -> bool:
        return label in self._index

    def __iter__(self):
        return iter(self.blocks)

    def __len__(self) -> int:
        return len(self.blocks)

    def predecessors(self) -> dict:
        preds = {b.label: [] for b in self.blocks}
        for b in self.blocks:
            for s in b.successors:
                preds[s].append(b.label)
        return preds


@dataclasses.dataclass(frozen=True, slots=True)
class Function:
    """A function: parameters, returned variables and a body graph.

    ``type_inference`` optionally maps the list of argument `Type`s to the
    list of returned `Type`s, overriding inference from the body.
    ``maybe_unbound`` names variables that, as in Python, may be read on a
    path where they were never assigned (e.g. first assigned in a loop); such
    a read sees zeros instead of being rejected by the verifier.
    """

    name: str
    vars_in: tuple
    vars_out: tuple
    graph: ControlFlowGraph
    type_inference: Callable | None = None
    loc: SourceLoc | None = None
    maybe_unbound: frozenset = frozenset()


def _frozen_map(mapping) -> Mapping:
    return types.MappingProxyType(dict(mapping or {}))


@dataclasses.dataclass(frozen=True)
class Program:
    """A whole program: structured (``functions``) or lowered (``graph``).

    ``var_types`` and ``var_alloc`` map variable names to their `Type` and
    `VariableAllocation`, once the passes that compute them have run.
    ``vars_in``/``vars_out`` are the entry function's parameters and results.
    A lowered program's ``entries`` maps each function name to its entry label,
    and ``schedule`` names the scheduling policy it was ordered for.
    """

    functions: tuple
    main: str
    vars_in: tuple
    vars_out: tuple
    var_types: Mapping = dataclasses.field(default_factory=dict)
    var_alloc: Mapping = dataclasses.field(default_factory=dict)
    graph: ControlFlowGraph | None = None
    entries: Mapping = dataclasses.field(default_factory=dict)
    schedule: str = "lowest_pc"  # what an unordered program means: lowest pc first

    def __post_init__(self):
        object.__setattr__(self, "var_types", _frozen_map(self.var_types))
        object.__setattr__(self, "var_alloc", _frozen_map(self.var_alloc))
        object.__setattr__(self, "entries", _frozen_map(self.entries))

    @property
    def lowered(self) -> bool:
        return self.graph is not None

    def __str__(self) -> str:
        """The IR text with the user's file:line beside every block and instruction."""
        from pcbatch.ir import printer

        return printer.format_program(self, with_locs=True)

    def function(self, name: str) -> Function:
        for fn in self.functions:
            if fn.name == name:
                return fn
        raise KeyError(f"no function named {name!r} in this program")

    def replace(self, **changes) -> Program:
        return dataclasses.replace(self, **changes)

    def type_of(self, var: str) -> Type:
        return self.var_types[var]

    def alloc_of(self, var: str) -> VariableAllocation:
        return self.var_alloc.get(var, VariableAllocation.FULL)


@dataclasses.dataclass(frozen=True)
class Module:
    """Functions without a chosen entry point."""

    functions: tuple

    def function_names(self) -> tuple:
        return tuple(fn.name for fn in self.functions)

    def program(self, main: str) -> Program:
        """The program whose entry point is the function named ``main``."""
        for fn in self.functions:
            if fn.name == main:
                return Program(self.functions, main, fn.vars_in, fn.vars_out)
        names = ", ".join(self.function_names()) or "none"
        raise ValueError(f"no function named {main!r} to use as main (known: {names})")
