"""The batched stack machine: runs a lowered program over a whole batch.

Every batch member is a thread with its own program counter. Each step picks
the lowest program counter held by any live thread (or, for a dynamic policy or
a program with ``pcbatch.sync()`` points, the block `vm.policy` chooses), and
runs that block for exactly the threads there (the backend's `Lanes`); all other threads wait.
Calls push a return address on the program-counter stack and returns pop it;
variables that a call must save have stacks of their own (see
``passes/allocate.py``). The loop is the backend's ``while_loop`` and the
block dispatch its ``switch_case``; on NumPy both are plain Python.

Stack overflow raises `StackOverflowError` naming the function whose
recursion overflowed, with a depth measured to suffice.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from pcbatch import profiling
from pcbatch.backends.numpy import NumpyBackend, StackFull
from pcbatch.errors import (
    BatchSizeError,
    PcbatchError,
    StackOverflowError,
    add_note,
    where,
)
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
    flatten,
    format_pattern,
    is_pattern_node,
    map_pattern,
)
from pcbatch.vm import policy

DEFAULT_MAX_STACK_DEPTH = 15
PC_TYPE = TensorType(np.dtype(np.int32), ())
_PC = "__pc__"
_MEASURE_STEPS = 200_000  # bounds the rerun that measures a sufficient stack depth


class StepLimitError(PcbatchError, RuntimeError):
    """A run took more VM steps than ``max_steps`` (probably a loop that never ends)."""


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


def _writer(program: Program, op, names) -> Any:
    """``write(run, value, lanes, env)`` for ``op``'s results into the variables ``names``,
    with every per-instruction decision (allocation, type, push) taken once, here: the
    interpreter pays per execution only for the work itself."""
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
        return lambda run, value, lanes, env: _write_pattern(
            run, names, _place(run, names, value, lanes, op), lanes, env, temporary, push
        )

    def write(run, value, lanes, env) -> None:
        try:
            placed = run.backend.place(value, lanes, tensors, batched)
        except (TypeError, ValueError):
            placed = _place(run, names, value, lanes, op)  # raises, naming the primitive
        env[names] = placed
        if temporary:
            return
        storage = run.variables[names]
        if push:
            run.variables[names] = storage.push(placed, lanes)
        else:
            run.variables[names] = storage.update(placed, lanes)

    return write


def _write_pattern(run: _Run, name: str, placed, lanes, env: dict, temporary, push) -> None:
    env[name] = placed
    if temporary:
        return
    method = "push" if push else "update"
    run.variables[name] = map_pattern(
        lambda var, v: getattr(var, method)(v, lanes), run.variables[name], placed
    )


# ---------------------------------------------------------------------------
# Instructions, each compiled once per run into a closure


def _prim_step(program: Program, op: PrimOp, backend) -> Any:
    """``step(run, lanes, env)`` running one primitive instruction."""
    if setitem.is_in_place(op, program):
        return lambda run, lanes, env: _set_items_in_place(run, op, lanes, env)
    write = _writer(program, op, op.vars_out)
    names = op.vars_in
    if op.is_copy and len(names) == 1:
        (name,) = names
        return lambda run, lanes, env: write(run, _read(run, name, lanes, env), lanes, env)
    if op.is_copy:
        return lambda run, lanes, env: write(
            run, tuple([_read(run, v, lanes, env) for v in names]), lanes, env
        )
    function = op.batched_function(backend)

    def step(run, lanes, env) -> None:
        inputs = [_read(run, v, lanes, env) for v in names]
        if run.profile is not None:
            run.profile.record_primitive(op.label, lanes.count, run.batch_size)
        try:
            outputs = function(*inputs)
        except Exception as e:
            add_note(e, f"in pcbatch primitive {op.label!r}{where(op.loc)}")
            raise
        write(run, outputs, lanes, env)

    return step


def _set_items_in_place(run: _Run, op: PrimOp, lanes, env: dict) -> None:
    """``target[index] = value`` written into the storage for the active threads only."""
    target, value, *indices = op.vars_in
    storage = run.variables[target]
    value = np.asarray(_read(run, value, lanes, env))
    dims = storage.top.shape[1:]
    wrap = lambda i, axis: np.where(i < 0, i + dims[axis], i)
    indices = [np.asarray(_read(run, i, lanes, env)) for i in indices]
    if run.profile is not None:
        run.profile.record_primitive(op.label, lanes.count, run.batch_size)
    key = op.function.key(lanes.rows(), indices, wrap)
    try:
        storage.top[key] = setitem.align(value, op.function.rest_rank(storage.top.ndim))
    except (IndexError, ValueError) as e:
        add_note(e, f"in pcbatch item assignment{where(op.loc)}")
        raise
    env.pop(target, None)


def _pop_step(op: PopOp) -> Any:
    def step(run, lanes, env) -> None:
        for name in op.vars:
            env.pop(name, None)
            run.variables[name] = map_pattern(lambda var: var.pop(lanes), run.variables[name])

    return step


def _chooser(cond_var: str, if_true: int, if_false: int) -> Any:
    """``choose(run, lanes, env)``: each lane's next block, ``if_true`` where ``cond_var``
    holds, else ``if_false``."""

    def choose(run, lanes, env):
        cond = _read(run, cond_var, lanes, env)
        if getattr(cond, "dtype", None) != np.bool_:
            cond = cond != 0
        return run.backend.select(cond, if_true, if_false)

    return choose


def _terminator_step(program: Program, term) -> Any:
    """``step(run, lanes, env)`` moving the lanes' program counters (NumPy assignment
    broadcasts and casts them itself)."""
    index = program.graph.index
    if isinstance(term, BranchOp):
        choose = _chooser(term.cond_var, index(term.true_target), index(term.false_target))

        def branch(run, lanes, env) -> None:
            run.pc = run.pc.update(choose(run, lanes, env), lanes)

        return branch
    if isinstance(term, GotoOp):
        return _set_pc(index(term.target))
    if isinstance(term, PushGotoOp):
        return _call(program, term)
    if isinstance(term, IndirectGotoOp):

        def ret(run, lanes, env) -> None:
            run.pc = run.pc.pop(lanes)

        return ret
    if isinstance(term, HaltOp):
        return _set_pc(len(program.graph))
    raise PcbatchError(f"{type(term).__name__} cannot end a lowered block")


def _set_pc(target: int) -> Any:
    def goto(run, lanes, env) -> None:
        run.pc = run.pc.update(target, lanes)

    return goto


def _call(program: Program, term: PushGotoOp) -> Any:
    index = program.graph.index
    target, back = index(term.target), index(term.return_target)
    choose = None
    if term.cond_var is not None:
        choose = _chooser(term.cond_var, target, index(term.false_target))

    def call(run, lanes, env) -> None:
        callee = target if choose is None else choose(run, lanes, env)
        run.pc = run.pc.update(back, lanes)
        run.pc = run.pc.push(callee, lanes)

    return call


def _instruction_step(program: Program, op, backend) -> Any:
    if isinstance(op, PrimOp):
        return _prim_step(program, op, backend)
    if isinstance(op, PopOp):
        return _pop_step(op)
    raise PcbatchError(f"{type(op).__name__} in a lowered block (a compiler bug)")


def _block_runner(program: Program, block, backend):
    """``run_block(run, lanes)``: the block compiled into one closure per instruction
    (per-example primitives vectorized once per run, not once per step)."""
    steps = [_instruction_step(program, op, backend) for op in block.instructions]
    steps.append(_terminator_step(program, block.terminator))

    def run_block(run: _Run, lanes) -> None:
        env: dict = {}
        for step in steps:
            step(run, lanes, env)

    return run_block


# ---------------------------------------------------------------------------
# Inputs and outputs


def _local(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def leads_with_batch(leaf, type_) -> bool:
    """Whether an argument ``leaf`` has a batch dimension before its per-example shape."""
    return len(np.shape(leaf)) > len(type_.shape)


def batch_size_of(program: Program, args: Sequence) -> int:
    """The common batch size; arguments without a batch dimension (or size 1) broadcast."""
    size, first = 1, None
    for name, arg in zip(program.vars_in, args):
        type_ = program.var_types[name]
        for leaf, t in zip(flatten(arg), flatten(type_.tensors)):
            if not leads_with_batch(leaf, t):
                continue  # a per-example value: broadcast to every thread
            n = int(np.shape(leaf)[0])
            if n == 1 or n == size:
                continue
            if size != 1:
                raise BatchSizeError(
                    f"{program.main}(): argument {_local(first)!r} has batch size {size} but "
                    f"argument {_local(name)!r} has batch size {n}; give every argument the "
                    "same batch size, or size 1 to broadcast"
                )
            size, first = n, name
        first = first or name
    return size


def broadcast_inputs(program: Program, args: Sequence) -> list:
    """Each argument as arrays with a leading batch dimension of the common size."""
    size = batch_size_of(program, args)

    def fit(t, leaf):
        leaf = np.asarray(leaf, dtype=t.dtype)
        if len(leaf.shape) == len(t.shape):
            leaf = leaf[None]
        return np.broadcast_to(leaf, (size, *t.shape))

    return [
        map_pattern(fit, program.var_types[name].tensors, arg)
        for name, arg in zip(program.vars_in, args)
    ]


def _owners(program: Program) -> dict:
    """Block label -> the function it belongs to (blocks are contiguous per function)."""
    entry_of = {label: fn for fn, label in program.entries.items()}
    owners, current = {}, program.main
    for block in program.graph:
        current = entry_of.get(block.label, current)
        owners[block.label] = current
    return owners


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
    lanes = run.backend.all_lanes(run.batch_size)
    results = tuple(
        map_pattern(lambda v: np.array(v.read(lanes)), run.variables[name])
        for name in run.program.vars_out
    )
    return results[0] if len(results) == 1 else results


# ---------------------------------------------------------------------------
# The loop


def execute(
    program: Program,
    args: Sequence,
    *,
    backend=None,
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
    max_steps: int | None = None,
    block_code_cache: dict | None = None,
    _measure_on_overflow: bool = True,
    return_status: bool = False,
):
    """Runs a lowered program over a batch.

    Args:
      program: a lowered, typed, allocated program (``pipeline.compile_program``).
      args: one value per parameter of ``main``: arrays with a leading batch
        dimension, or per-example values (no batch dimension) to broadcast.
      backend: the array backend (default NumPy).
      max_stack_depth: how deep any recursion may go.
      max_steps: stop with `StepLimitError` after this many VM steps (None: no bound).
      block_code_cache: where a staged backend keeps compiled code across calls
        (default: the backend's own cache); unused on NumPy.

    Returns:
      main's result (a tuple when it returns several), with a batch dimension.
    """
    backend = backend or NumpyBackend()
    if getattr(backend, "staged", False):
        from pcbatch.vm import staged

        return staged.execute(
            program,
            args,
            backend=backend,
            max_stack_depth=max_stack_depth,
            max_steps=max_steps,
            cache=block_code_cache,
            return_status=return_status,
        )
    if len(args) != len(program.vars_in):
        raise TypeError(f"{program.main}() takes {len(program.vars_in)} arguments, got {len(args)}")
    run = start(program, args, backend, batch_size_of(program, args), max_stack_depth)
    if run.batch_size == 0:
        return _outputs(run)
    try:
        _loop(run, [_block_runner(program, b, backend) for b in program.graph], max_steps)
    except StackFull as full:
        raise _overflow_error(run, full, args, max_stack_depth, _measure_on_overflow) from None
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
        owners=_owners(program),
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


def _loop(run: _Run, runners: list, max_steps: int | None, after_block=None) -> None:
    """Steps until every thread halts; ``after_block(index)`` (if given) runs after each
    block execution and may start new threads (`pcbatch.vm.refill`)."""
    backend, everyone = run.backend, run.backend.all_lanes(run.batch_size)
    plan = policy.plan_for(run.program, refill=after_block is not None)
    # Static policies without sync points: the lowest program counter, as the seed.
    next_block = backend.next_block if plan is None else policy.Scheduler(plan).next_block
    halt = len(run.program.graph)
    steps = 0
    while True:
        pc = run.pc.read(everyone)
        block = next_block(pc)
        if block >= halt:
            return
        if max_steps is not None and steps >= max_steps:
            raise step_limit_error(run.program, pc, max_steps)
        lanes = backend.lanes_at(pc, block)
        if run.profile is None:
            runners[block](run, lanes)
        else:
            _profiled_step(run, runners[block], block, lanes, pc, halt)
        if after_block is not None:
            after_block(block)
        steps += 1


def _profiled_step(run: _Run, runner, block: int, lanes, pc, halt: int) -> None:
    """Runs one block and records it, with its wall time (only while a profile is active)."""
    live = int(np.count_nonzero(np.asarray(pc) < halt))
    start = time.perf_counter()
    runner(run, lanes)
    seconds = time.perf_counter() - start
    run.profile.record_step(
        run.labels[block], live, run.batch_size, active=lanes.count, seconds=seconds
    )


def step_limit_error(program: Program, pc, max_steps: int) -> StepLimitError:
    """The error for a run stopped by ``max_steps``, naming where threads still are."""
    pcs = np.asarray(pc)
    halt = len(program.graph)
    waiting = sorted(set(int(p) for p in pcs[pcs < halt]))
    places = []
    for index in waiting[:5]:
        block = program.graph.blocks[index]
        loc = next((op.loc for op in block.instructions if op.loc), block.terminator.loc)
        places.append(f"{block.label}{where(loc)}")
    live = int(np.count_nonzero(pcs < halt))
    return StepLimitError(
        f"{program.main}() did not finish in max_steps={max_steps} VM steps; {live} "
        f"thread(s) still running, waiting at: {'; '.join(places)}. If the program is "
        "meant to run this long, pass a larger max_steps."
    )


# ---------------------------------------------------------------------------
# Stack overflow


def _overflow_error(
    run, full: StackFull, args, max_stack_depth, measure, members=None
) -> StackOverflowError:
    """The user's error for a full stack; ``members``: the rows of ``args`` that the
    overflowing threads run (default: the threads' own rows, as in a plain call)."""
    members = full.rows if members is None else members
    pcs = np.asarray(run.pc.read(run.backend.all_lanes(run.batch_size)))
    block = run.program.graph.blocks[int(pcs[full.rows[0]])] if len(full.rows) else None
    function = overflowing_function(run.program, block, run.owners)
    suggested, advice = None, f"try a larger max_stack_depth (at least {2 * max_stack_depth})"
    if measure and isinstance(run.backend, NumpyBackend):
        suggested, advice = _measure_depth(run.program, args, members, max_stack_depth)
    rows = ", ".join(str(int(r)) for r in members[:5])
    return StackOverflowError(
        f"recursion in {function!r} exceeded max_stack_depth={max_stack_depth} "
        f"(batch member(s) {rows}); {advice}.",
        function=function,
        max_stack_depth=max_stack_depth,
        suggested_depth=suggested,
    )


def overflowing_function(program: Program, block, owners: dict) -> str:
    """The function whose recursion filled a stack in ``block``: the callee of a block
    that ends in a call (its own pushes and the program counter's are for that call)."""
    if block is None:
        return program.main
    term = block.terminator
    label = term.target if isinstance(term, PushGotoOp) else block.label
    return owners.get(label, program.main)


def _measure_depth(program, args, rows, max_stack_depth) -> tuple:
    """Reruns the overflowing threads with deep stacks to find a depth that suffices."""
    rows = np.asarray(rows)
    subset = []
    for name, arg in zip(program.vars_in, args):
        type_ = program.var_types[name]

        def take(t, leaf):
            leaf = np.asarray(leaf)
            if len(leaf.shape) == len(t.shape) or leaf.shape[0] == 1:
                return leaf
            return leaf[rows]

        subset.append(map_pattern(take, type_.tensors, arg))
    cap = 64 * max(max_stack_depth, 16)
    probe = _DepthProbe()
    try:
        execute(
            program,
            subset,
            backend=probe,
            max_stack_depth=cap,
            max_steps=_MEASURE_STEPS,
            _measure_on_overflow=False,
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


class _DepthProbe(NumpyBackend):
    """A NumPy backend that remembers its variables, to read their high-water marks."""

    def __init__(self):
        self.created = []

    def create_variable(self, name, alloc, type_, max_stack_depth, batch_size):
        var = super().create_variable(name, alloc, type_, max_stack_depth, batch_size)
        self.created.append(var)
        return var

    def deepest(self) -> int:
        depth = 1
        for var in self.created:
            used = var.high_water - (1 if var.name == _PC else 0)
            depth = max(depth, used)
        return depth
