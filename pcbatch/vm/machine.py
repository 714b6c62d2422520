"""The batched stack machine: runs a lowered program over a whole batch.

Every batch member is a thread with its own program counter. Each step picks
the lowest program counter held by any live thread (or, for a dynamic policy or
a program with ``pcbatch.sync()`` points, the block `vm.policy` chooses), and
runs that block for exactly the threads there (the backend's `Lanes`); all other threads wait.
Calls push a return address on the program-counter stack and returns pop it;
variables that a call must save have stacks of their own (see
``passes/allocate.py``). The loop is the backend's ``while_loop`` and the
block dispatch its ``switch_case``; on NumPy both are plain Python.

The machine is written against the backend protocol's core
(`pcbatch.backends.base.Backend`): any eager array library runs it. It runs
eager backends only; `pcbatch.vm.dispatch` chooses between it and the staged
machine (``pcbatch/vm/staged.py``).

Stack overflow raises `StackOverflowError` naming the function whose
recursion overflowed, with a depth measured to suffice (on backends that
count their stacks' depth: ``measures_stack_depth``).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pcbatch import profiling
from pcbatch.backends.base import StackFull
from pcbatch.errors import PcbatchError, StackOverflowError, add_note, where
from pcbatch.ir import setitem
from pcbatch.ir.nodes import (
    BranchOp,
    GotoOp,
    HaltOp,
    IndirectGotoOp,
    PopOp,
    PrimOp,
    Program,
    PushGotoOp,
)
from pcbatch.ir.types import (
    TensorType,
    VariableAllocation,
    format_pattern,
    is_pattern_node,
    map_pattern,
)
from pcbatch.vm import policy
from pcbatch.vm.failures import (
    DEFAULT_MAX_STACK_DEPTH,
    StepLimitError,
    block_owners,
    overflowing_function,
    step_limit_error,
)
from pcbatch.vm.inputs import batch_size_of

__all__ = [
    "DEFAULT_MAX_STACK_DEPTH",
    "PC_TYPE",
    "StepLimitError",
    "block_runner",
    "execute",
    "loop",
    "measure_depth",
    "overflow_error",
    "recount",
    "start",
]

PC_TYPE = TensorType(np.dtype(np.int32), ())
_PC = "__pc__"
_MEASURE_STEPS = 200_000  # bounds the rerun that measures a sufficient stack depth


@dataclasses.dataclass
class _Run:
    """Everything one run needs: the program, the backend and the storage."""

    program: Program
    backend: Any
    batch_size: int
    variables: dict
    pc: Any
    profile: Any
    labels: tuple
    owners: dict
    #: threads per block (the last entry: halted), kept as they move while a `policy`
    #: plan chooses the blocks; None otherwise (the lowest program counter runs)
    counts: Any = None


# ---------------------------------------------------------------------------
# Reading and writing variables inside one block execution


def _read(run: _Run, name: str, lanes, env: dict):
    if name in env:
        return env[name]
    try:
        storage = run.variables[name]
    except KeyError:
        raise PcbatchError(
            f"variable {name!r} is read but has no storage (a compiler bug)"
        ) from None
    if is_pattern_node(storage):
        value = map_pattern(lambda v: v.read(lanes), storage)
    else:
        value = storage.read(lanes)
    env[name] = value
    return value


def _reader(program: Program, name: str) -> Any:
    """``read(run, lanes, env)``: `_read` of ``name``, its structure looked at once, here."""
    type_ = program.var_types.get(name)
    if type_ is None or not _is_stored(program, name):
        return lambda run, lanes, env: _read(run, name, lanes, env)
    if is_pattern_node(type_.tensors):
        each = _leafwise(type_.tensors)

        def read_pattern(run, lanes, env):
            value = env.get(name)
            if value is None:
                value = env[name] = each(lambda var: var.read(lanes), run.variables[name])
            return value

        return read_pattern

    def read(run, lanes, env):
        value = env.get(name)
        if value is None:
            value = env[name] = run.variables[name].read(lanes)
        return value

    return read


def _is_stored(program: Program, name: str) -> bool:
    """Whether the machine stores ``name`` (a register or a stack)."""
    return program.alloc_of(name) in (VariableAllocation.REGISTER, VariableAllocation.FULL)


def _leafwise(pattern) -> Any:
    """``apply(fn, *nodes)``: `map_pattern` specialized to ``pattern``'s structure, for
    nodes the machine made to match it (no checks, no type tests per call)."""
    if not is_pattern_node(pattern):
        return lambda fn, *leaves: fn(*leaves)
    parts = [_leafwise(p) for p in pattern]
    kind, named = type(pattern), hasattr(pattern, "_fields")

    def apply(fn, *nodes):
        items = [part(fn, *leaves) for part, *leaves in zip(parts, *nodes)]
        return kind(*items) if named else kind(items)

    return apply


def _leafwise_checked(pattern) -> Any:
    """``apply(fn, node)``: `_leafwise` for a node made elsewhere (a primitive's result),
    checked to have ``pattern``'s structure (a ValueError if not, as `map_pattern`)."""
    if not is_pattern_node(pattern):
        return lambda fn, value: fn(pattern, value)
    parts = [_leafwise_checked(p) for p in pattern]
    kind, named = type(pattern), hasattr(pattern, "_fields")

    def apply(fn, value):
        if not is_pattern_node(value) or len(value) != len(parts):
            raise ValueError(f"pattern structures differ: {pattern!r} vs {value!r}")
        items = [part(fn, v) for part, v in zip(parts, value)]
        return kind(*items) if named else kind(items)

    return apply


def _place(run: _Run, name: str, value, lanes, op) -> Any:
    var_type = run.program.var_types[name]
    try:
        batched = isinstance(op, PrimOp) and op.per_example
        return map_pattern(
            lambda t, v: run.backend.place(v, lanes, t, batched), var_type.tensors, value
        )
    except (TypeError, ValueError) as e:
        what = f"primitive {op.label!r}" if isinstance(op, PrimOp) else "an instruction"
        shape = format_pattern(value, lambda v: str(getattr(v, "shape", type(v).__name__)))
        raise PcbatchError(
            f"{what}{where(op.loc)} produced {shape} for variable {name!r} of type "
            f"{var_type!r} over {lanes.count} active threads: {e}"
        ) from None


def _writer(program: Program, op, names, placed_already: bool = False) -> Any:
    """``write(run, value, lanes, env)`` for ``op``'s results into the variables ``names``,
    with every per-instruction decision (allocation, type, push) taken once, here: the
    interpreter pays per execution only for the work itself. ``placed_already``: the
    values come in place (a copy between variables of one type)."""
    if is_pattern_node(names):
        parts = [_writer(program, op, n) for n in names]

        def write_all(run, values, lanes, env) -> None:
            if not is_pattern_node(values) or len(values) != len(parts):
                raise PcbatchError(
                    f"primitive {op.label!r}{where(op.loc)} returned a value that does not "
                    f"unpack into {format_pattern(names)}"
                )
            for part, value in zip(parts, values):
                part(run, value, lanes, env)

        return write_all
    alloc = program.alloc_of(names)
    if alloc == VariableAllocation.NULL:
        return lambda run, value, lanes, env: None
    tensors = program.var_types[names].tensors
    batched = isinstance(op, PrimOp) and op.per_example
    push = names not in op.skip_push_mask and alloc == VariableAllocation.FULL
    temporary = alloc == VariableAllocation.TEMPORARY
    if is_pattern_node(tensors):
        method = "push" if push else "update"
        each, each_checked = _leafwise(tensors), _leafwise_checked(tensors)

        def write_pattern(run, value, lanes, env) -> None:
            try:
                placed = each_checked(
                    lambda t, v: run.backend.place(v, lanes, t, batched), value
                )
            except (TypeError, ValueError):
                placed = _place(run, names, value, lanes, op)  # raises, naming the primitive
            env[names] = placed
            if not temporary:
                store = lambda var, v: getattr(var, method)(v, lanes)  # noqa: E731
                run.variables[names] = each(store, run.variables[names], placed)

        return write_pattern

    def place(run, value, lanes):
        if placed_already:
            return value
        try:
            return run.backend.place(value, lanes, tensors, batched)
        except (TypeError, ValueError):
            return _place(run, names, value, lanes, op)  # raises, naming the primitive

    if temporary:

        def write_temporary(run, value, lanes, env) -> None:
            env[names] = place(run, value, lanes)

        return write_temporary

    def write(run, value, lanes, env, unshared: bool = False) -> None:
        placed = env[names] = place(run, value, lanes)
        storage = run.variables[names]
        if push:
            run.variables[names] = storage.push(placed, lanes)
        elif unshared and placed is value:
            run.variables[names] = storage.adopt(placed, lanes)
        else:
            run.variables[names] = storage.update(placed, lanes)

    write.adopts = not push  # takes ``unshared``: see `_unshared`
    return write


def _refcount_of_a_fresh_local() -> int:
    value = np.empty(1)
    return sys.getrefcount(value)


#: what `sys.getrefcount` says of an array held by one local variable only (measured, not
#: assumed: interpreters differ in the references they count)
_FRESH_LOCAL = _refcount_of_a_fresh_local()


def _unshared(value: Any, references: int) -> bool:
    """Whether ``value``, a primitive's result, is a NumPy array that nothing else holds or
    views (``references``: its `sys.getrefcount` in the caller, one local holding it), so
    that a register may take it as its storage rather than copy it: one the primitive made
    (not an input, not kept in a cache or a global, not a view of any of them)."""
    return (
        type(value) is np.ndarray
        and references == _FRESH_LOCAL
        and value.base is None
        and value.flags.owndata
        and value.flags.writeable
    )


# ---------------------------------------------------------------------------
# Instructions, each compiled once per run into a closure


def _prim_step(program: Program, op: PrimOp, backend) -> Any:
    """``step(run, lanes, env)`` running one primitive instruction."""
    if setitem.is_in_place(op, program):
        return lambda run, lanes, env: _set_items_in_place(run, op, lanes, env)
    names = op.vars_in
    if op.is_copy and len(names) == 1:
        return _copy_step(program, op)
    write = _writer(program, op, op.vars_out)
    if op.is_copy:
        return lambda run, lanes, env: write(
            run, tuple([_read(run, v, lanes, env) for v in names]), lanes, env
        )
    function = op.batched_function(backend)
    readers = [_reader(program, v) for v in names]
    adopts = getattr(write, "adopts", False)

    only = readers[0] if len(readers) == 1 else None

    def step(run, lanes, env) -> None:
        if only is not None:
            inputs = (only(run, lanes, env),)
        else:
            inputs = [read(run, lanes, env) for read in readers]
        if run.profile is not None:
            run.profile.record_primitive(op.label, lanes.count, run.batch_size)
        try:
            outputs = function(*inputs)
        except Exception as e:
            add_note(e, f"in pcbatch primitive {op.label!r}{where(op.loc)}")
            raise
        if adopts and lanes.index is None:
            references = sys.getrefcount(outputs)  # first: an argument list adds one
            if _unshared(outputs, references):
                write(run, outputs, lanes, env, True)  # every thread's new value, not copied
                return
        write(run, outputs, lanes, env)

    return step


def _copy_step(program: Program, op: PrimOp) -> Any:
    """``step(run, lanes, env)`` of a copy ``out = name``: a push of a variable's own value
    saves its top and leaves it (`Stack.save`); between variables of one type the value
    read is already in place."""
    (name,) = op.vars_in
    out, types = op.vars_out, program.var_types
    if (
        out == name
        and name not in op.skip_push_mask
        and program.alloc_of(name) == VariableAllocation.FULL
    ):
        each = _leafwise(types[name].tensors)

        def save(run, lanes, env) -> None:
            run.variables[name] = each(lambda var: var.save(lanes), run.variables[name])

        return save
    same = (
        isinstance(out, str)
        and name in types
        and types.get(out) == types[name]
        and not is_pattern_node(types[name].tensors)
    )
    write, read = _writer(program, op, out, placed_already=same), _reader(program, name)
    return lambda run, lanes, env: write(run, read(run, lanes, env), lanes, env)


def _set_items_in_place(run: _Run, op: PrimOp, lanes, env: dict) -> None:
    """``target[index] = value`` written into the storage for the active threads only."""
    target, value, *indices = op.vars_in
    value = _read(run, value, lanes, env)
    indices = [_read(run, i, lanes, env) for i in indices]
    if run.profile is not None:
        run.profile.record_primitive(op.label, lanes.count, run.batch_size)
    try:
        storage = run.variables[target].assign_items(op.function, value, indices, lanes)
    except (IndexError, ValueError) as e:
        add_note(e, f"in pcbatch item assignment{where(op.loc)}")
        raise
    run.variables[target] = storage
    env.pop(target, None)


def _pop_step(program: Program, op: PopOp) -> Any:
    pops = [(name, _leafwise(program.var_types[name].tensors)) for name in op.vars]

    def step(run, lanes, env) -> None:
        for name, each in pops:
            env.pop(name, None)
            run.variables[name] = each(lambda var: var.pop(lanes), run.variables[name])

    return step


def _move(run: _Run, block: int, count: int, target: int) -> None:
    """Counts ``count`` threads leaving ``block`` for ``target`` (where the run counts)."""
    counts = run.counts
    if counts is not None:
        counts[block] -= count
        counts[target] += count


def _terminator_step(program: Program, term, block: int) -> Any:
    """``step(run, lanes, env)`` moving the lanes' program counters (the variable's
    ``update`` and ``push`` broadcast and cast them)."""
    index = program.graph.index
    if isinstance(term, BranchOp):
        return _branch(term.cond_var, block, index(term.true_target), index(term.false_target))
    if isinstance(term, GotoOp):
        return _set_pc(block, index(term.target))
    if isinstance(term, PushGotoOp):
        return _call(program, term, block)
    if isinstance(term, IndirectGotoOp):
        return _return(block)
    if isinstance(term, HaltOp):
        return _set_pc(block, len(program.graph))
    raise PcbatchError(f"{type(term).__name__} cannot end a lowered block")


def _branch(cond_var: str, block: int, if_true: int, if_false: int) -> Any:
    def branch(run, lanes, env) -> None:
        backend = run.backend
        truth = backend.truth(_read(run, cond_var, lanes, env))
        taken = backend.count_true(truth)
        _move(run, block, taken, if_true)
        _move(run, block, lanes.count - taken, if_false)
        if taken == lanes.count or taken == 0:
            # every thread goes one way: no pass to find the movers (a loop's threads
            # all going round stay where they are)
            target = if_true if taken else if_false
            if target != block:
                run.pc = run.pc.update(target, lanes)
            return
        # A loop's threads going round stay at this block: only the others move.
        if if_true == block:
            run.pc = run.pc.update(if_false, backend.lanes_where(lanes, ~truth))
        elif if_false == block:
            run.pc = run.pc.update(if_true, backend.lanes_where(lanes, truth))
        else:
            run.pc = run.pc.update(backend.select(truth, if_true, if_false), lanes)

    return branch


def _set_pc(block: int, target: int) -> Any:
    def goto(run, lanes, env) -> None:
        _move(run, block, lanes.count, target)
        if target != block:
            run.pc = run.pc.update(target, lanes)

    return goto


def _return(block: int) -> Any:
    def ret(run, lanes, env) -> None:
        run.pc = run.pc.pop(lanes)
        if run.counts is not None:
            landed = run.backend.to_host(run.pc.read(lanes))
            run.counts[block] -= lanes.count
            run.counts += np.bincount(landed, minlength=len(run.counts))

    return ret


def _call(program: Program, term: PushGotoOp, block: int) -> Any:
    """Pushes the return address and jumps (both at once: `Variable.push`'s ``saved``)."""
    index = program.graph.index
    target, back = index(term.target), index(term.return_target)
    if term.cond_var is None:

        def call(run, lanes, env) -> None:
            _move(run, block, lanes.count, target)
            run.pc = run.pc.push(target, lanes, saved=back)

        return call
    otherwise = index(term.false_target)

    def call_either(run, lanes, env) -> None:
        backend = run.backend
        truth = backend.truth(_read(run, term.cond_var, lanes, env))
        taken = backend.count_true(truth)
        _move(run, block, taken, target)
        _move(run, block, lanes.count - taken, otherwise)
        if taken == lanes.count or taken == 0:
            callee = target if taken else otherwise  # all one way: no per-thread select
        else:
            callee = backend.select(truth, target, otherwise)
        run.pc = run.pc.push(callee, lanes, saved=back)

    return call_either


def _instruction_step(program: Program, op, backend) -> Any:
    if isinstance(op, PrimOp):
        return _prim_step(program, op, backend)
    if isinstance(op, PopOp):
        return _pop_step(program, op)
    raise PcbatchError(f"{type(op).__name__} in a lowered block (a compiler bug)")


def block_runner(program: Program, block, backend):
    """``run_block(run, lanes)``: the block compiled into one closure per instruction
    (per-example primitives vectorized once per run, not once per step)."""
    steps = [_instruction_step(program, op, backend) for op in block.instructions]
    steps.append(_terminator_step(program, block.terminator, program.graph.index(block.label)))

    def run_block(run: _Run, lanes) -> None:
        env: dict = {}
        for step in steps:
            step(run, lanes, env)

    return run_block


def runners_for(program: Program, backend) -> list:
    """Every block's `block_runner`, made once per program and backend class: a short run
    would otherwise pay a pass over every instruction on every call. Kept on the program
    (one class's at a time), for a backend whose compiled instructions depend on its class
    only and keep no state of a run (``reuses_block_runners``: each plain call makes a new
    `NumpyBackend`), never for the throwaway backend of `measure_depth`."""
    if isinstance(backend, _DepthProbe) or not getattr(backend, "reuses_block_runners", False):
        return [block_runner(program, b, backend) for b in program.graph]
    kept = program.__dict__.get(_RUNNERS)
    if kept is not None and kept[0] is type(backend):
        return kept[1]
    runners = [block_runner(program, b, backend) for b in program.graph]
    object.__setattr__(program, _RUNNERS, (type(backend), runners))  # a cache, not a field
    return runners


_RUNNERS = "_eager_block_runners"


# ---------------------------------------------------------------------------
# Inputs and outputs


def _create_storage(program: Program, backend, batch_size: int, max_stack_depth: int) -> dict:
    variables = {}
    for name, type_ in program.var_types.items():
        alloc = program.alloc_of(name)
        if alloc in (VariableAllocation.NULL, VariableAllocation.TEMPORARY):
            continue
        variables[name] = map_pattern(
            lambda t, n=name, a=alloc: backend.create_variable(
                n, a, t, max_stack_depth, batch_size
            ),
            type_.tensors,
        )
    return variables


def _load_inputs(run: _Run, args: Sequence) -> None:
    lanes = run.backend.all_lanes(run.batch_size)
    for name, arg in zip(run.program.vars_in, args):
        if run.program.alloc_of(name) == VariableAllocation.NULL:
            continue
        type_ = run.program.var_types[name]

        def fit(t, leaf):
            leaf = np.asarray(leaf) if not hasattr(leaf, "shape") else leaf
            if len(leaf.shape) == len(t.shape):
                leaf = leaf[None]
            return run.backend.place(leaf, lanes, t)

        placed = map_pattern(fit, type_.tensors, arg)
        run.variables[name] = map_pattern(
            lambda v, x: v.update(x, lanes), run.variables[name], placed
        )


def _outputs(run: _Run):
    lanes, copy_out = run.backend.all_lanes(run.batch_size), run.backend.copy_out
    results = tuple(
        map_pattern(lambda v: copy_out(v.read(lanes)), run.variables[name])
        for name in run.program.vars_out
    )
    return results[0] if len(results) == 1 else results


# ---------------------------------------------------------------------------
# The loop


def execute(
    program: Program,
    args: Sequence,
    *,
    backend,
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
    max_steps: int | None = None,
    measure_on_overflow: bool = True,
):
    """Runs a lowered program over a batch on an eager ``backend``.

    Args:
      program: a lowered, typed, allocated program (``pipeline.compile_program``).
      args: one value per parameter of ``main``: arrays with a leading batch
        dimension, or per-example values (no batch dimension) to broadcast.
      backend: the array backend (an eager one: `pcbatch.vm.dispatch.execute` takes
        any backend).
      max_stack_depth: how deep any recursion may go.
      max_steps: stop with `StepLimitError` after this many VM steps (None: no bound).
      measure_on_overflow: on a stack overflow, rerun the overflowing threads with deep
        stacks to say what depth suffices (where the backend ``measures_stack_depth``).

    Returns:
      main's result (a tuple when it returns several), with a batch dimension.
    """
    if len(args) != len(program.vars_in):
        raise TypeError(f"{program.main}() takes {len(program.vars_in)} arguments, got {len(args)}")
    run = start(program, args, backend, batch_size_of(program, args), max_stack_depth)
    if run.batch_size == 0:
        return _outputs(run)
    try:
        loop(run, runners_for(program, backend), max_steps)
    except StackFull as full:
        raise overflow_error(run, full, args, max_stack_depth, measure_on_overflow) from None
    return _outputs(run)


def start(program: Program, args: Sequence, backend, batch_size: int, max_stack_depth: int):
    """A `_Run` of ``batch_size`` threads with ``args`` loaded, every thread at main's entry."""
    run = _Run(
        program=program,
        backend=backend,
        batch_size=batch_size,
        variables=_create_storage(program, backend, batch_size, max_stack_depth),
        pc=backend.create_variable(
            _PC, VariableAllocation.FULL, PC_TYPE, max_stack_depth + 1, batch_size
        ),
        profile=profiling.current(),
        labels=tuple(b.label for b in program.graph),
        owners=block_owners(program),
    )
    if run.profile is not None:
        run.profile.start_run(program)
    _load_inputs(run, args)
    everyone = backend.all_lanes(batch_size)
    halt = len(program.graph)
    run.pc = run.pc.update(backend.place(halt, everyone, PC_TYPE), everyone)
    if batch_size:
        run.pc = run.pc.push(backend.place(0, everyone, PC_TYPE), everyone)
    return run


def loop(run: _Run, runners: list, max_steps: int | None, after_block=None) -> None:
    """Steps until every thread halts; ``runners``: each block's `block_runner`;
    ``after_block(index)`` (if given) runs after each block execution and may start
    new threads (`pcbatch.vm.refill`, which calls `recount` then)."""
    backend, size = run.backend, run.batch_size
    everyone = backend.all_lanes(size)
    plan = policy.plan_for(run.program, refill=after_block is not None)
    scheduler = None if plan is None else policy.Scheduler(plan, backend.to_host)
    if scheduler is not None:
        run.counts = _counted(run)
    halt = len(run.program.graph)
    steps = 0
    while True:
        if scheduler is None:
            # Static policies without sync points: the lowest program counter, as the seed.
            pc = run.pc.read(everyone)
            block = backend.next_block(pc)
        else:
            pc = None
            block = scheduler.choose(run.counts)
        if block >= halt:
            return
        if max_steps is not None and steps >= max_steps:
            pc = run.pc.read(everyone)
            raise step_limit_error(run.program, backend.to_host(pc), max_steps)
        if pc is None and run.counts[block] == size:
            lanes = everyone  # every thread is here: no pass to find them
        else:
            pc = run.pc.read(everyone) if pc is None else pc
            lanes = backend.lanes_at(pc, block)
        if run.profile is None:
            runners[block](run, lanes)
        else:
            _profiled_step(run, runners[block], block, lanes, halt)
        if after_block is not None:
            after_block(block)
        steps += 1


def recount(run: _Run) -> None:
    """Counts the threads at each block afresh, where the run counts them (after threads
    started outside the loop)."""
    if run.counts is not None:
        run.counts = _counted(run)


def _counted(run: _Run) -> np.ndarray:
    pc = run.backend.to_host(run.pc.read(run.backend.all_lanes(run.batch_size)))
    return np.bincount(pc, minlength=len(run.program.graph) + 1)


def _profiled_step(run: _Run, runner, block: int, lanes, halt: int) -> None:
    """Runs one block and records it, with its wall time (only while a profile is active)."""
    pc = run.pc.read(run.backend.all_lanes(run.batch_size))
    live = int(np.count_nonzero(run.backend.to_host(pc) < halt))
    start = time.perf_counter()
    runner(run, lanes)
    seconds = time.perf_counter() - start
    run.profile.record_step(
        run.labels[block], live, run.batch_size, active=lanes.count, seconds=seconds
    )


# ---------------------------------------------------------------------------
# Stack overflow


def overflow_error(
    run, full: StackFull, args, max_stack_depth, measure, members=None
) -> StackOverflowError:
    """The user's error for a full stack; ``members``: the rows of ``args`` that the
    overflowing threads run (default: the threads' own rows, as in a plain call)."""
    members = full.rows if members is None else members
    pcs = run.backend.to_host(run.pc.read(run.backend.all_lanes(run.batch_size)))
    block = run.program.graph.blocks[int(pcs[full.rows[0]])] if len(full.rows) else None
    function = overflowing_function(run.program, block, run.owners)
    suggested, advice = None, f"try a larger max_stack_depth (at least {2 * max_stack_depth})"
    if measure and getattr(run.backend, "measures_stack_depth", False):
        suggested, advice = measure_depth(
            run.program, args, members, max_stack_depth, run.backend
        )
    rows = ", ".join(str(int(r)) for r in members[:5])
    return StackOverflowError(
        f"recursion in {function!r} exceeded max_stack_depth={max_stack_depth} "
        f"(batch member(s) {rows}); {advice}.",
        function=function,
        max_stack_depth=max_stack_depth,
        suggested_depth=suggested,
    )


def measure_depth(program, args, rows, max_stack_depth, backend) -> tuple:
    """Reruns the overflowing threads ``rows`` of ``args`` with deep stacks, on the eager
    ``backend`` (one that ``measures_stack_depth``), to find a depth that suffices:
    (that depth or None, the advice for the error)."""
    rows = np.asarray(rows)
    subset = []
    for name, arg in zip(program.vars_in, args):
        type_ = program.var_types[name]

        def take(t, leaf):
            # On the host (a CUDA tensor has no np.asarray); Python numbers as NumPy's.
            leaf = backend.to_host(leaf) if hasattr(leaf, "shape") else np.asarray(leaf)
            if len(leaf.shape) == len(t.shape) or leaf.shape[0] == 1:
                return leaf
            return leaf[rows]

        subset.append(map_pattern(take, type_.tensors, arg))
    cap = 64 * max(max_stack_depth, 16)
    probe = _DepthProbe(backend)
    try:
        execute(
            program,
            subset,
            backend=probe,
            max_stack_depth=cap,
            max_steps=_MEASURE_STEPS,
            measure_on_overflow=False,
        )
    except StackOverflowError:
        return None, f"even max_stack_depth={cap} overflowed: the recursion may never end"
    except StepLimitError:
        return None, (
            f"try a larger max_stack_depth (at least {2 * max_stack_depth}; measuring the "
            f"depth needed stopped after {_MEASURE_STEPS:,} steps)"
        )
    depth = probe.deepest()
    return depth, f"max_stack_depth={depth} suffices for these inputs"


class _DepthProbe:
    """``backend``, remembering the variables it creates, to read their high-water marks."""

    def __init__(self, backend):
        self.backend = backend
        self.created = []

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    def create_variable(self, name, alloc, type_, max_stack_depth, batch_size):
        var = self.backend.create_variable(name, alloc, type_, max_stack_depth, batch_size)
        self.created.append(var)
        return var

    def deepest(self) -> int:
        depth = 1
        for var in self.created:
            used = var.high_water - (1 if var.name == _PC else 0)
            depth = max(depth, used)
        return depth
