"""The staged machine: the whole VM as one ``while_loop`` whose body switches on the block.

For compiled backends (JAX, TensorFlow): the loop, the block dispatch and every
block are staged into one computation, so a VM step costs what its arrays cost,
not Python interpreter time. Every block runs full width under a mask (the
threads at that block); writes to registers are masked selects, and pushes and
pops touch only the active rows of a stack (a scatter that drops inactive rows),
never a copy of the whole stack.

The block a step runs is the lowest program counter, or for a dynamic policy
or a program with sync points the one `vm.policy.choose` picks (its per-block
wait counts ride in the loop state).

Under XLA the dispatch copies nothing it passes through: it is a tree of loops
that run at most once (`backends.base.guarded_switch`; a binary tree on JAX, one flat
row on TensorFlow), whose state XLA updates in place, so a step costs what its block
touches. TensorFlow without XLA dispatches with one ``tf.switch_case``.

Stack overflow cannot raise inside the staged loop. A row whose push overflows gets
the program counter ``halt + 1 + block`` (past every block and the halt), so that row
stops as a halted one would while the others run on to their end; the caller finds
those rows after the run (`lane_status`) and raises, or, inside a caller's trace,
fills their results with `poison` and reports them (docs/semantics/failures.md). (No
flag of its own: a flag costs a reduction per pushing block, and on CPU every
reduction is kernels for XLA to compile.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import operator
import os
from typing import Any

import numpy as np

from pcbatch import profiling
from pcbatch.backends import base, compaction
from pcbatch.backends.numpy import NumpyBackend
from pcbatch.errors import LaneStatus, StackOverflowError, where
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
    VariableAllocation,
    flatten,
    is_pattern_node,
    map_pattern,
    unflatten,
)
from pcbatch.vm import compact, policy
from pcbatch.vm.failures import block_owners, overflowing_function, step_limit_error
from pcbatch.vm.inputs import batch_size_of, leads_with_batch
from pcbatch.vm.machine import measure_depth
from pcbatch.vm.staged_refill import StagedRefill

PC = "__pc__"
#: where a block's pushes leave their overflowing rows (in its env: no variable's name)
OVERFLOWING = "__overflowing_rows__"


def overflowed_at(block: int, halt: int) -> int:
    """The program counter of a row whose push overflowed in ``block`` (``halt``: the
    program's block count): past the halt, so no block runs it and the other rows go on."""
    return halt + 1 + block


#: where a block's run-time checks leave their failing rows (`faulted_at`)
FAULTING = "__faulting_rows__"


def faulted_at(block: int, halt: int) -> int:
    """The program counter of a row that failed a run-time check (an op whose function has
    ``faulting``: range()'s zero step, a read of an unbound local) in ``block``: past
    every `overflowed_at`, so the row stops and the caller raises the op's error."""
    return 2 * halt + 1 + block


def faulting_block(pc: int, halt: int) -> int:
    """The block whose check failed, from the program counter `faulted_at` left."""
    return pc - 2 * halt - 1


def overflowing_block(pc: int, halt: int) -> int:
    """The block whose push overflowed, from the program counter `overflowed_at` left."""
    return pc - halt - 1


#: a lane's status (`lane_status`, `pcbatch.LaneStatus`): finished, its stack overflowed,
#: stopped by max_steps, failed a run-time check
OK, STACK_OVERFLOW, STEP_LIMIT, ERROR = (int(s) for s in LaneStatus)


def lane_status(ops, pc, halt: int):
    """Per lane, `OK`, `STACK_OVERFLOW`, `STEP_LIMIT` or `ERROR`, from its final program
    counter (``ops``: a staged backend, or ``np`` on the host)."""
    where = ops.where
    int_ = ops.scalar_int if hasattr(ops, "scalar_int") else np.int32
    failed = where(pc > 2 * halt, int_(ERROR), int_(STACK_OVERFLOW))
    return where(ops.equal(pc, halt), int_(OK), where(pc > halt, failed, int_(STEP_LIMIT)))


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each variable's leaves live in the loop state, fixed at trace time."""

    program: Program
    batch_size: int
    max_stack_depth: int
    leaves: dict  # var -> list of (key, TensorType)
    full: frozenset  # keys with stacks

    @classmethod
    def of(cls, program: Program, batch_size: int, max_stack_depth: int) -> Layout:
        leaves, full = {}, set()
        for name, type_ in program.var_types.items():
            alloc = program.alloc_of(name)
            if alloc in (VariableAllocation.NULL, VariableAllocation.TEMPORARY):
                continue
            keys = [(f"{name}#{i}", t) for i, t in enumerate(flatten(type_.tensors))]
            leaves[name] = keys
            if alloc == VariableAllocation.FULL:
                full.update(k for k, _ in keys)
        return cls(program, batch_size, max_stack_depth, leaves, frozenset(full))


class _Registers:
    """The part of the loop state a block can read or change (`backends.base.Part`): all
    of it but the registers the block never names, which a dispatch that carries parts
    lets bypass the block's loop."""

    def __init__(self, keys):
        self.keys = frozenset(keys)

    def of(self, state: dict) -> dict:
        return dict(state, vars={k: v for k, v in state["vars"].items() if k in self.keys})

    def widen(self, state: dict, part: dict) -> dict:
        return dict(part, vars={**state["vars"], **part["vars"]})


class _Block:
    """Traces one lowered block as a function of the loop state."""

    def __init__(self, machine: StagedMachine, index: int):
        self.m = machine
        self.index = index
        self.block = machine.program.graph.blocks[index]
        self.functions = [
            op.batched_function(machine.ops) if isinstance(op, PrimOp) and not op.is_copy else None
            for op in self.block.instructions
        ]
        self.faults = [_fault_rows(op, machine.ops) for op in self.block.instructions]
        self.part = _Registers(compact.touched(machine, self.block))

    def __call__(self, state: dict) -> dict:
        """The state after the block."""
        m = self.m
        before = state["vars"]
        state = dict(state)
        state["vars"] = dict(before)
        # The block runs when the step chose it: comparing with that choice rather than
        # with this block's index makes the masked updates alike across blocks, and XLA
        # compiles alike kernels once (Fibonacci x100 on TF-XLA: 30 -> 25 kernels).
        # (ops.equal, not ==: in a TF1-style graph == on tensors is object identity.)
        mask = m.ops.equal(state["pc"]["top"], state.get("block", self.index))
        env: dict = {}
        first_active = None  # found once per block, for every input `fill_inactive` shows
        for op, function, fault in zip(self.block.instructions, self.functions, self.faults):
            if isinstance(op, PopOp):
                for name in op.vars:
                    env.pop(name, None)
                    for key, _ in m.layout.leaves[name]:
                        state["vars"][key] = m.pop(state["vars"][key], mask)
                continue
            if setitem.is_in_place(op, m.program):
                if fault is not None:
                    inputs = [self.read(state, env, v) for v in op.vars_in]
                    env.setdefault(FAULTING, []).append(mask & fault(*inputs))
                self.set_items(state, env, op, mask)
                continue
            inputs = [self.read(state, env, v) for v in op.vars_in]
            if m.sanitize and not op.is_copy:
                # Inactive rows hold junk (say, a zero divisor that makes TensorFlow's
                # integer division raise): show the primitive an active row there instead.
                if first_active is None:
                    first_active = m.ops.first_active(mask)
                fill = lambda v: m.ops.fill_inactive(v, mask, first_active)  # noqa: B023
                inputs = [map_pattern(fill, x) for x in inputs]
            if op.is_copy:
                outputs = inputs[0] if len(inputs) == 1 else tuple(inputs)
            elif _calls_host(op):
                outputs = function(*inputs, mask=mask)
            else:
                outputs = function(*inputs)
            if fault is not None:
                env.setdefault(FAULTING, []).append(mask & fault(*inputs))
            self.bind(state, env, op, op.vars_out, outputs, mask)
        state = m.terminate(state, self.index, env, mask, self.read)
        state = m.flag_overflow(state, env.get(OVERFLOWING, []), self.index)
        state = m.flag_rows(state, env.get(FAULTING, []), faulted_at(self.index, m.halt))
        self.check_part(before, state["vars"])
        return state

    def check_part(self, before: dict, after: dict) -> None:
        """At trace time: the block changed no register outside its part (a dispatch
        that carries parts would drop the change)."""
        stray = [k for k, v in after.items() if k not in self.part.keys and v is not before[k]]
        if stray:
            raise AssertionError(f"block {self.block.label!r} changed {stray} outside its part")

    def set_items(self, state, env, op, mask) -> None:
        """Item assignment into the target's storage: a scatter of the active threads' items."""
        value, *indices = (self.read(state, env, v) for v in op.vars_in[1:])
        (key, _), = self.m.layout.leaves[op.vars_out]
        leaf = state["vars"][key]
        top = self.m.ops.set_items(op.function, leaf["top"], value, indices, mask)
        state["vars"][key] = dict(leaf, top=top)
        env[op.vars_out] = top

    def read(self, state, env, name):
        if name in env:
            return env[name]
        keys = self.m.layout.leaves[name]
        values = [state["vars"][key]["top"] for key, _ in keys]
        return unflatten(self.m.program.var_types[name].tensors, values)

    def bind(self, state, env, op, names, values, mask):
        if is_pattern_node(names):
            for n, v in zip(names, values):
                self.bind(state, env, op, n, v, mask)
            return
        alloc = self.m.program.alloc_of(names)
        if alloc == VariableAllocation.NULL:
            return
        var_type = self.m.program.var_types[names]
        per_example = isinstance(op, PrimOp) and op.per_example
        placed_leaves = [
            self.m.ops.place(v, self.m.layout.batch_size, t, per_example)
            for v, t in zip(flatten(values), flatten(var_type.tensors))
        ]
        env[names] = unflatten(var_type.tensors, placed_leaves)
        if alloc == VariableAllocation.TEMPORARY:
            return
        push = names not in op.skip_push_mask and alloc == VariableAllocation.FULL
        for (key, _), value in zip(self.m.layout.leaves[names], placed_leaves):
            leaf = state["vars"][key]
            if push:
                state["vars"][key], overflowing = self.m.push(leaf, value, mask)
                env.setdefault(OVERFLOWING, []).append(overflowing)
            else:
                state["vars"][key] = dict(leaf, top=self.m.ops.where(mask, value, leaf["top"]))


#: the loop state's counters that `StagedMachine.tally` updates
PROFILE_COUNTS = ("block_counts", "block_lanes", "live_sum")


class StagedMachine:
    """Builds the staged run of one lowered program for one batch size."""

    def __init__(
        self,
        program: Program,
        ops,
        batch_size: int,
        max_stack_depth: int,
        profiling: bool,
        max_steps: int | None,
        refill_plan: tuple | None = None,
        labels_counted: frozenset | None = None,
    ):
        self.program = program
        self.ops = ops
        self.layout = Layout.of(program, batch_size, max_stack_depth)
        self.halt = len(program.graph)
        # Without calls the only return is main's, to the halt: the program counter needs
        # no stack (a stack to carry, and a gather per return, for XLA to compile).
        self.calls = any(isinstance(b.terminator, PushGotoOp) for b in program.graph.blocks)
        self.profiling = profiling
        # The blocks a sweep counts (None: all): those that run a primitive labelled in
        # the profile's `labels_counted` (and, with max_steps, all for the step count).
        self.tallied = None
        if profiling and labels_counted is not None:
            self.tallied = {
                i for i, b in enumerate(program.graph.blocks)
                if any(getattr(op, "label", None) in labels_counted for op in b.instructions)
            }
        self.max_steps = max_steps
        self.blocks = [_Block(self, i) for i in range(self.halt)]
        # blocks that call the host (`pcbatch.host_callback`): a sweep enters them only
        # when some thread is at them
        self.calls_host = {
            i for i, b in enumerate(program.graph.blocks) if any(map(_calls_host, b.instructions))
        }
        widths = compaction.buckets(getattr(ops, "compaction", None), batch_size)
        self.compaction = compact.Compaction(self, widths, _Block) if widths else None
        if self.compaction is not None:
            self.blocks = [self.compaction.wrap(i, b) for i, b in enumerate(self.blocks)]
        # None: the lowest program counter runs
        self.plan = policy.plan_for(program, refill=refill_plan is not None)
        self.rows = None
        # With refill, `inputs` hold every pending input and the lanes are refilled
        # after each step (`pcbatch.vm.refill`).
        self.refill = None
        if refill_plan is not None:
            self.refill = StagedRefill(self, *refill_plan)
        # Main's entry, when no block leads back to it, runs once before the loop (the
        # first step, as the loop would run it): the dispatch has one branch fewer to
        # compile and to test every step. Not with refill (threads start later too), a
        # plan (whose choice would skip a step's bookkeeping) or a step limit of 0.
        self.prologue = (
            self.halt > 1
            and self.plan is None
            and self.refill is None
            and (max_steps is None or max_steps > 0)
            and policy.entry_runs_once(program)
        )

    @property
    def sanitize(self) -> bool:
        # Read at every trace: a TensorFlow backend needs it when it runs op by op.
        return getattr(self.ops, "sanitize_inactive", False)

    # -- stacks -----------------------------------------------------------------
    def push(self, leaf: dict, value, mask):
        """(new leaf, the rows that overflow): the old top saved in the active rows of
        the stack."""
        ops = self.ops
        depth = leaf["depth"]
        capacity = leaf["stack"].shape[0]
        overflowing = mask & (depth >= capacity)
        target = ops.where(mask, depth, capacity)  # out of range: the row is not written
        stack = ops.scatter_rows(leaf["stack"], target, leaf["top"], leaf.get("rows"))
        new_depth = ops.where(mask, ops.minimum(depth + 1, capacity), depth)
        top = ops.where(mask, value, leaf["top"])
        return dict(leaf, top=top, stack=stack, depth=new_depth), overflowing

    def pop(self, leaf: dict, mask) -> dict:
        """(A leaf of a compacted block, `pcbatch.vm.compact`, names its stack's rows.)"""
        ops = self.ops
        depth = ops.where(mask, ops.maximum(leaf["depth"] - 1, 0), leaf["depth"])
        saved = ops.gather_rows(leaf["stack"], depth, leaf.get("rows"))
        return dict(leaf, top=ops.where(mask, saved, leaf["top"]), depth=depth)

    def flag_overflow(self, state: dict, overflowing: list, block: int) -> dict:
        """``state`` with the rows in ``overflowing`` (a block's pushes) at the program
        counter `overflowed_at` ``block``: they stop, the others go on.

        Elementwise, so XLA fuses it into the block's own update of the program
        counters: no reduction, no kernel of its own."""
        return self.flag_rows(state, overflowing, overflowed_at(block, self.halt))

    def flag_rows(self, state: dict, rows: list, pc_value: int) -> dict:
        """``state`` with the rows in any of ``rows`` at the program counter ``pc_value``."""
        if not rows:
            return state
        ops = self.ops
        rows = functools.reduce(operator.or_, rows)
        pc = state["pc"]
        top = ops.where(rows, ops.scalar_int(pc_value), pc["top"])
        return dict(state, pc=dict(pc, top=top))

    # -- control ------------------------------------------------------------------
    def terminate(self, state, block: int, env, mask, read) -> dict:
        ops, index = self.ops, self.program.graph.index
        term = self.program.graph.blocks[block].terminator
        pc = state["pc"]
        # A scalar target: `where` broadcasts it (a [batch] constant is an op of its own
        # per use, which TensorFlow builds slowly and XLA may compile as a kernel).
        const = ops.scalar_int
        choose = lambda cond_var, if_true, if_false: ops.where(
            ops.truth(read(state, env, cond_var)), const(index(if_true)), const(index(if_false))
        )
        if isinstance(term, BranchOp):
            target = choose(term.cond_var, term.true_target, term.false_target)
            pc = dict(pc, top=ops.where(mask, target, pc["top"]))
        elif isinstance(term, GotoOp):
            pc = dict(pc, top=ops.where(mask, const(index(term.target)), pc["top"]))
        elif isinstance(term, PushGotoOp):
            target = const(index(term.target))
            if term.cond_var is not None:
                target = choose(term.cond_var, term.target, term.false_target)
            pc = dict(pc, top=ops.where(mask, const(index(term.return_target)), pc["top"]))
            pc, overflowing = self.push(pc, target, mask)
            # Flagged with the block's other pushes, as the calling block: `_check` names
            # its callee.
            env.setdefault(OVERFLOWING, []).append(overflowing)
        elif isinstance(term, IndirectGotoOp) and self.calls:
            pc = self.pop(pc, mask)
        elif isinstance(term, (HaltOp, IndirectGotoOp)):  # a return from no call: main's
            pc = dict(pc, top=ops.where(mask, const(self.halt), pc["top"]))
        state = dict(state)
        state["pc"] = pc
        return state

    def tally(self, s: dict, block) -> dict:
        """``s`` with a profile's counters (`_record`) counting one step of ``block`` (the
        step's chosen block: a traced scalar, or main's entry, 0, in the prologue): its
        execution, its active threads, the live threads.

        Once per step, outside the dispatch: counted inside each block, the same counts
        cost every block kernels of its own for XLA to compile (NUTS: about 150 of its
        700). The primitives a block ran are counted on the host, from these counts."""
        ops = self.ops
        pc = s["pc"]["top"]
        active = ops.count(ops.equal(pc, block))
        chosen = ops.equal(ops.arange(self.halt), block)
        zero = ops.scalar_int(0)
        return dict(
            s,
            block_counts=s["block_counts"] + ops.where(chosen, ops.scalar_int(1), zero),
            block_lanes=s["block_lanes"] + ops.where(chosen, active, zero),
            live_sum=s["live_sum"] + ops.float(ops.count(pc < self.halt)),
        )

    # -- the loop -------------------------------------------------------------------
    def blank_state(self, ops=None) -> dict:
        """The part of the state before the first step that no input or padding decides:
        zeroed registers and stacks, the program-counter stacks with the exit at their
        bottom, every thread at main's entry, and the counters; made with ``ops`` (the
        backend's by default, `_HostOps` for NumPy arrays)."""
        ops, layout = self.ops if ops is None else ops, self.layout
        b, depth = layout.batch_size, layout.max_stack_depth
        variables = {}
        for keys in layout.leaves.values():
            for key, t in keys:
                leaf = {"top": ops.zeros((b, *t.shape), t.dtype)}
                if key in layout.full:
                    leaf["stack"] = ops.zeros((depth, b, *t.shape), t.dtype)
                    leaf["depth"] = ops.zeros((b,), ops.index_dtype)
                variables[key] = leaf
        pc = {"top": ops.full_pc(b, 0)}
        if self.calls:
            pc["stack"] = ops.zeros((depth + 1, b), ops.index_dtype)
            pc["depth"] = ops.full_pc(b, 1) if b else ops.zeros((b,), ops.index_dtype)
            # The bottom of every program-counter stack is the exit: main's return halts.
            pc["stack"] = ops.scatter_rows(
                pc["stack"], ops.zeros((b,), ops.index_dtype), ops.full_pc(b, self.halt)
            )
        state = {"pc": pc, "vars": variables}
        if self.counts_steps:
            state["steps"] = ops.scalar_int(0)
        if self.plan is not None:
            state["wait"] = policy.initial_wait(ops, self.plan)
        if self.profiling:
            state["block_counts"] = ops.zeros((self.halt,), ops.index_dtype)
            state["block_lanes"] = ops.zeros((self.halt,), ops.index_dtype)
            state["live_sum"] = ops.scalar_float(0.0)
            if self.compaction is not None:  # block executions per bucket
                state["compacted"] = ops.zeros((len(self.compaction.widths),), ops.index_dtype)
        return state

    def blank_bytes(self) -> int:
        """The bytes of `blank_state`'s registers and stacks (what dominates it)."""
        layout, b = self.layout, self.layout.batch_size
        pc_rows = layout.max_stack_depth + 3 if self.calls else 1
        total = pc_rows * b * np.dtype(self.ops.index_dtype).itemsize
        for keys in layout.leaves.values():
            for key, t in keys:
                rows = 1 + (layout.max_stack_depth if key in layout.full else 0)
                total += rows * b * int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize
        return total

    def initial_state(self, inputs: list, live=None, blank: dict | None = None) -> dict:
        """The state before the first step: ``blank`` (`blank_state`, made here if not
        given) with the inputs in their registers; threads not in ``live`` (padding)
        start halted."""
        ops, b = self.ops, self.layout.batch_size
        state = self.blank_state() if blank is None else blank
        variables = dict(state["vars"])
        pending = inputs
        if self.refill is not None:
            inputs = self.refill.first_inputs(inputs)
        for name, value in zip(self.program.vars_in, inputs):
            if name not in self.layout.leaves:
                continue
            for (key, t), leaf in zip(self.layout.leaves[name], flatten(value)):
                variables[key] = dict(variables[key], top=ops.place(leaf, b, t, True))
        pc = state["pc"]
        if live is not None:
            pc = dict(pc, top=ops.where(live, pc["top"], ops.full_pc(b, self.halt)))
        state = dict(state, pc=pc, vars=variables)
        if self.refill is not None:
            state["refill"] = self.refill.initial(pending)
        return state

    def advance(self, s: dict, run_block, block, sweep: bool = False) -> dict:
        """One step: ``run_block`` (which runs ``block``) on ``s``, and the step's
        bookkeeping around it. A ``sweep`` counts each block it runs itself."""
        if self.profiling and not sweep:
            s = self.tally(s, block)
        s = run_block(s)
        if self.refill is not None:
            s = self.refill.after_step(s)
        return dict(s, steps=s["steps"] + 1) if self.counts_steps and not sweep else s

    @property
    def counts_steps(self) -> bool:
        """Whether the loop state counts steps: for a step limit or a profile only (on
        CPU the count is a kernel for XLA to compile)."""
        return self.max_steps is not None or self.profiling

    def first_block(self, live):
        """The first step's block, without running the policy: every thread starts at
        main's entry (the policy picks it, and its wait counts stay zero), unless none is
        ``live``."""
        ops = self.ops
        if live is None:
            return ops.scalar_int(0)
        return ops.where(ops.any(live), ops.scalar_int(0), ops.scalar_int(self.halt))

    def choose_next(self, s: dict) -> dict:
        """``s`` with ``block``: the block the next step runs; `halt` when every thread
        has halted or overflowed its stack.

        Chosen at the end of a step, not the start of the next, so that the loop's
        condition reads it rather than reducing the program counters again."""
        ops, pc = self.ops, s["pc"]["top"]
        if self.plan is None or self.sweeps:  # a sweep runs every block: no choice
            return dict(s, block=ops.reduce_min(pc))
        block, wait = policy.choose(ops, self.plan, pc, s["wait"])
        return dict(s, block=block, wait=wait)

    @property
    def sweeps(self) -> bool:
        """Whether a step runs every block in turn (``JaxBackend(block_choice="sweep")``)
        rather than the one it chose."""
        return getattr(self.ops, "step_choice", None) == "sweep"

    def sweep(self, s: dict, first: int) -> dict:
        """Every block from ``first`` on, in order, each on the threads at it when its
        turn comes: a thread may run several blocks in one step, and a block no thread
        is at changes nothing. No choice is made on the device, so a GPU reads nothing
        back on the host within a step (the tree of loops reads about 2 log2(blocks)
        predicates); the price is every block's work, masked, at every step."""
        chosen, ops = s["block"], self.ops
        every_block = self.max_steps is not None or self.tallied is None
        for index in range(first, self.halt):
            block = ops.scalar_int(index)
            counted_here = self.counts_steps and (every_block or index in self.tallied)
            if counted_here or index in self.calls_host:
                ran = ops.any(ops.equal(s["pc"]["top"], block))  # some thread is here
            if counted_here:
                # A step is a block that some thread ran, as under the other choices
                # (so max_steps keeps its scale, and profiles their meaning).
                if self.profiling:
                    counted = self.tally(s, block)
                    s = dict(s, **{k: ops.where(ran, counted[k], s[k]) for k in PROFILE_COUNTS})
                s = dict(s, steps=s["steps"] + ops.as_index(ran))
            s = dict(s, block=block)
            if index in self.calls_host:
                # Only when some thread is there: a host callback is a transfer to the
                # host and a Python call, dearer than the loop's predicate (a NUTS
                # progress bar at every step).
                s = ops.switch(ops.as_index(ran), [lambda s: s, self.blocks[index]], s)
            else:
                s = self.blocks[index](s)
        return dict(s, block=chosen)

    def run(self, inputs: list, live=None, blank: dict | None = None):
        """The staged computation: inputs -> (outputs, final state)."""
        ops = self.ops
        state = self.initial_state(inputs, live, blank)

        def keep_going(s):
            going = s["block"] < self.halt
            if self.max_steps is not None:
                going = going & (s["steps"] < self.max_steps)
            return going

        # Not where some lanes are padding (``live``, a sharded batch's): a shard of
        # padding alone must run no step at all, and the prologue would count one.
        prologue = self.prologue and live is None
        first = 1 if prologue else 0

        def step(s):
            if self.sweeps:
                sweep = lambda s: self.sweep(s, first)
                return self.choose_next(self.advance(s, sweep, s["block"], sweep=True))
            # The branches start at block ``first``: the dispatch's constants are offset
            # by it rather than the block by a subtraction (a kernel for XLA).
            dispatch = lambda s: ops.switch(s["block"], self.blocks[first:], s, offset=first)
            return self.choose_next(self.advance(s, dispatch, s["block"]))

        # An empty batch has no block to run (and no minimum to take): its outputs
        # are the initial, empty values.
        empty = self.layout.batch_size == 0
        if prologue and not empty:
            state = self.choose_next(self.advance(state, self.blocks[0], ops.scalar_int(0)))
        elif not empty:
            state = dict(state, block=self.first_block(live))
        final = state if empty else ops.while_loop(keep_going, step, state)
        if self.refill is not None:
            return tuple(self.refill.outputs(final)), final
        outputs = []
        for name in self.program.vars_out:
            keys = self.layout.leaves[name]
            values = [final["vars"][key]["top"] for key, _ in keys]
            outputs.append(unflatten(self.program.var_types[name].tensors, values))
        return tuple(outputs), final


# ---------------------------------------------------------------------------
# Running: compile once per signature, check flags on the host afterwards


def _with_batch_dims(program: Program, args) -> list:
    """Each argument leaf with a leading batch dimension (size 1 for per-example values)."""
    inputs = []
    for name, arg in zip(program.vars_in, args):
        types = flatten(program.var_types[name].tensors)
        leaves = [
            leaf if leads_with_batch(leaf, t) else _with_leading_one(leaf)
            for leaf, t in zip(flatten(arg), types)
        ]
        inputs.append(unflatten(program.var_types[name].tensors, leaves))
    return inputs


def _with_leading_one(leaf):
    """``leaf`` with a leading dimension of size 1; a library's own array stays one (a
    symbolic tensor or a tracer, in a caller's graph or jit, has no NumPy value)."""
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype") and not isinstance(leaf, np.ndarray):
        return leaf[None]
    return np.asarray(leaf)[None]


def execute(
    program: Program,
    args,
    *,
    backend,
    max_stack_depth: int,
    max_steps=None,
    cache: dict | None = None,
    refill: tuple | None = None,
    return_status: bool = False,
):
    """Runs a lowered program on a staged backend; raises on overflow after the run.

    With ``refill`` (lanes, group), the leading dimension of ``args`` counts inputs
    that run through at most that many lanes (`pcbatch.vm.refill`). With
    ``return_status``: (results, `lane_status`) and no error for a failed lane.
    Inside a caller's trace nothing can raise now: failed lanes' results are `poison`,
    and the backend raises when the run executes (`fail_on_read`), unless
    ``return_status`` hands the status to the caller (docs/semantics/failures.md).
    """
    count = batch_size_of(program, args)
    inputs = _with_batch_dims(program, args)
    prof = profiling.current()
    signature = tuple((_static_shape(x), _dtype_name(x)) for x in flatten(inputs))
    profiled = prof is not None
    labels_counted = profiling.labels_counted(prof) if profiled else None
    sharding = getattr(backend, "sharding", None) if count else None
    key = (
        id(program), count, signature, max_stack_depth, max_steps, profiled, labels_counted,
        refill,
    )
    key += () if sharding is None else sharding.key()
    cache = backend.compile_cache if cache is None else cache
    entry = cache.get(key)
    fresh = entry is None or entry.program is not program
    if fresh:
        # Sharded, every device runs the machine on its share of the threads (or, with
        # refill, of the pending inputs, through its share of the lanes).
        share = count if sharding is None else sharding.shard_size(count)
        lanes = share if refill is None else min(_per_device(refill[0], sharding), share)
        refill_plan = None if refill is None else (share, min(refill[1], lanes))
        # Renumbered where the policy's choice is a fixed order: no plan, no per-step cost.
        ordered = program if refill is not None else policy.in_fixed_order(program)
        staged = StagedMachine(
            ordered, backend, lanes, max_stack_depth, profiled, max_steps, refill_plan,
            labels_counted,
        )
        check_memory(staged, backend)
        if sharding is None:
            compiled = backend.jit(_traced(staged, backend))
        else:
            compiled = sharding.build(
                _traced(staged, backend), count, share, refill=refill is not None
            )
        blank = _blank_argument(staged, backend, sharding)
        entry = Compiled(program, compiled, staged, blank)
        cache[key] = entry
    staged = entry.machine
    program = staged.program  # its blocks numbered as the run numbers them
    with collector_paused() if fresh else contextlib.nullcontext(), _naming_depth(staged):
        outputs, info = entry.function(*entry.arguments(inputs))
    tracing = backend.is_tracing((outputs, info))  # inside the user's jit or tf.function
    if (tracing or return_status) and refill is None and can_fail(staged):
        # Not in the compiled run itself: an eager call that is not asked for a status
        # raises instead, and its compiled program stays as it was.
        outputs = poison(backend, outputs, backend.equal(info["pc"], staged.halt))
    result = outputs[0] if len(outputs) == 1 else outputs
    checked = getattr(backend, "safety_checks", True)
    if tracing:
        if return_status:
            return result, lane_status(backend, info["pc"], staged.halt)
        if not checked or not can_fail(staged):
            return result
        failures = functools.partial(
            _raise_failures, program, staged, max_stack_depth=max_stack_depth,
            max_steps=max_steps, lanes_are_members=refill is None,
        )
        return backend.fail_on_read(result, info["pc"], failures, _named(program))
    if checked and not return_status:
        pcs = backend.to_host(info["pc"])
        _raise_failures(
            program, staged, pcs, max_stack_depth, max_steps, args, backend,
            lanes_are_members=refill is None,
        )
    if prof is not None:
        _record(prof, program, staged, info, backend)
    if return_status:
        return result, lane_status(backend, info["pc"], staged.halt)
    return result


def _named(program: Program) -> str:
    """``main`` and where its body starts in the user's file (``main (at file:line)``)."""
    entry = program.graph.blocks[0]
    loc = next((op.loc for op in entry.instructions if op.loc), entry.terminator.loc)
    return f"{program.main}{where(loc)}" if loc is not None else program.main


def can_fail(staged: StagedMachine) -> bool:
    """Whether a lane of this run may end other than halted: a stack may overflow (the
    program calls), a step limit is set, or a run-time check may fail."""
    blocks = staged.program.graph.blocks
    calls = any(isinstance(b.terminator, PushGotoOp) for b in blocks)
    checks = any(_has_check(op) for b in blocks for op in b.instructions)
    return calls or checks or bool(staged.layout.full) or staged.max_steps is not None


def poison(ops, outputs, ok):
    """``outputs`` with the rows not ``ok`` filled with a value no one mistakes for a
    result: NaN for floats, the smallest value for signed ints (the largest for unsigned),
    False for bools."""

    def fill(value):
        dtype = np.dtype(getattr(value.dtype, "as_numpy_dtype", value.dtype))
        if dtype.kind in "fc":
            bad = np.nan
        elif dtype.kind == "i":
            bad = np.iinfo(dtype).min
        elif dtype.kind == "u":
            bad = np.iinfo(dtype).max
        else:
            bad = False
        return ops.where(ok, value, np.asarray(bad, dtype))

    return map_pattern(fill, outputs)


def check_memory(staged: StagedMachine, backend) -> None:
    """Raises a ValueError naming ``max_stack_depth`` where the machine's registers and
    stacks, allocated whole up front, would not fit in memory."""
    needed, limit = staged.blank_bytes(), _memory_limit(backend)
    if limit is not None and needed > limit:
        raise ValueError(
            f"{_depth_advice(staged)}: that is {needed / 2**30:.1f} GiB, more than the "
            f"{limit / 2**30:.1f} GiB of memory here; pass a smaller max_stack_depth (a "
            "StackOverflowError suggests one that suffices) or run fewer lanes"
        )


def _depth_advice(staged: StagedMachine) -> str:
    layout = staged.layout
    return (
        f"{staged.program.main}(): max_stack_depth={layout.max_stack_depth} for "
        f"{layout.batch_size} lanes needs stacks of that depth for each of "
        f"{len(layout.full)} stacked value(s) and the program counter, allocated whole "
        "before the run"
    )


def _memory_limit(backend) -> int | None:
    """The bytes of memory a staged machine may use: the host's, or the accelerator's
    where JAX reports it (None where neither is known)."""
    limits = []
    with contextlib.suppress(AttributeError, ValueError, OSError):  # not on every platform
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    if type(backend).__module__.startswith("pcbatch.backends.jax"):
        import jax

        stats = {}
        with contextlib.suppress(Exception):  # an optional probe: not every platform has it
            stats = jax.local_devices()[0].memory_stats() or {}  # None on CPU
        if "bytes_limit" in stats:
            limits = [stats["bytes_limit"]]
    return min(limits) if limits else None


_OUT_OF_MEMORY = ("RESOURCE_EXHAUSTED", "ResourceExhausted", "Out of memory", "OOM")


@contextlib.contextmanager
def _naming_depth(staged: StagedMachine):
    """An allocation failure during the run, re-raised naming ``max_stack_depth``."""
    try:
        yield
    except Exception as error:
        text = f"{type(error).__name__}: {error}"
        if isinstance(error, MemoryError) or any(m in text for m in _OUT_OF_MEMORY):
            raise ValueError(
                f"{_depth_advice(staged)} ({staged.blank_bytes() / 2**30:.1f} GiB), and "
                f"allocating failed ({text[:300]}); pass a smaller max_stack_depth or run "
                "fewer lanes"
            ) from error
        raise


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for the first call of a new signature: the
    trace, the compile, and (as the backends start it in the same call) that first run.

    Tracing allocates many small objects, each allocation can start a collection, and
    a collection walks every object the process holds, TensorFlow's graphs included:
    the collector took 0.17 s of the first Fibonacci call on TF-XLA (0.92-1.01 s ->
    0.74-0.81 s without it) and about 1 s of a NUTS compile (13.1 -> 12.0 s). A run
    allocates little Python (host callbacks only), and reference counting still frees
    what is not in a cycle. The collector is restored after, as it was (off stays off).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _static_shape(value) -> tuple:
    """The shape as ints (None where unknown): with TensorFlow's v1 behaviour
    (``tf.compat.v1.disable_v2_behavior()``) a tensor's dimensions are ``Dimension``
    objects, which do not hash."""
    return tuple(getattr(d, "value", d) for d in np.shape(value))


def _dtype_name(value) -> str:
    """The dtype's NumPy name, whatever kind of array holds it (a tf.Tensor's dtype
    prints differently from the same NumPy dtype, and must not key a new compile)."""
    dtype = getattr(value, "dtype", None)
    return "" if dtype is None else np.dtype(getattr(dtype, "as_numpy_dtype", dtype)).name


@dataclasses.dataclass(frozen=True)
class Compiled:
    """A backend's compile cache entry: the program, its compiled run, the machine that
    traced it, and the blank state it takes as an argument (None: made in the trace)."""

    program: Program
    function: Any
    machine: StagedMachine
    blank: dict | None

    def arguments(self, inputs) -> tuple:
        """The arguments of ``function`` for ``inputs`` (batched, `_with_batch_dims`)."""
        return (inputs,) if self.blank is None else (inputs, None, self.blank)


def _blank_argument(staged: StagedMachine, backend, sharding) -> dict | None:
    """`StagedMachine.blank_state`, made once, outside any trace, for a small program to
    take as an argument; None for a large or sharded one, which makes it in its trace.

    Made in the trace, the zeroed registers and stacks are filled by kernels for XLA to
    compile, one per shape and dtype (about 8 ms each on CPU); passed in, they are copied
    into the loop's buffers.
    The copy costs a little each call and the cache holds the arrays, hence the bound
    (`pcbatch.backends.base.BLANK_ARGUMENT_MAX`)."""
    if sharding is not None or staged.blank_bytes() > base.BLANK_ARGUMENT_MAX:
        return None
    return backend.from_host(staged.blank_state(_HostOps(backend.index_dtype)))


class _HostOps:
    """The operations of `StagedMachine.blank_state`, on NumPy arrays: a backend's own
    arrays made op by op outside a trace cost more (JAX compiles each op: the first
    Fibonacci call took 0.63 s against 0.45 s)."""

    def __init__(self, index_dtype):
        self.index_dtype = np.dtype(index_dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    def full_pc(self, size: int, value: int):
        return np.full((size,), value, self.index_dtype)

    def scalar_int(self, value: int):
        return np.asarray(value, self.index_dtype)

    def scalar_float(self, value: float):
        return np.asarray(value, np.float32)

    def scatter_rows(self, stack, depth, values):
        stack = stack.copy()
        stack[depth, np.arange(stack.shape[1])] = values
        return stack


def _per_device(width: int, sharding) -> int:
    """Lanes per device: the width split over the devices (all of it without a mesh)."""
    return width if sharding is None else -(-width // sharding.devices)


def _traced(staged: StagedMachine, backend):
    def run(inputs, live=None, blank=None):
        backend.traces += 1  # runs only while tracing: counts compilations
        outputs, final = staged.run(inputs, live, blank)
        info = {k: v for k, v in final.items() if k not in ("vars", "pc", "refill", "block")}
        info["pc"] = final["pc"]["top"]
        return outputs, info

    return run


def _calls_host(op) -> bool:
    """Whether ``op`` is a `pcbatch.host_callback` (its function takes the block's mask)."""
    return getattr(getattr(op, "function", None), "wants_mask", False)


def _fault_rows(op, backend):
    """The batched form of ``op``'s run-time check (its rows that fail), or None: a
    batched ``faulting``, or a per-example ``faulting_per_example`` (a weak int's
    overflow probe, `backends.weak.overflow_probe`) mapped over the batch."""
    if not _has_check(op):
        return None
    faulting = getattr(op.function, "faulting", None)
    if faulting is None:
        return backend.vectorize(op.function.faulting_per_example)
    adapt = getattr(backend, "adapt", None)
    return adapt(faulting) if adapt is not None else faulting


def _has_check(op) -> bool:
    function = getattr(op, "function", None) if isinstance(op, PrimOp) else None
    return hasattr(function, "faulting") or hasattr(function, "faulting_per_example")


def _fault_error(block) -> Exception:
    """The error of the run-time check that failed in ``block``; of a block with several
    (the machine records the block, not the check), one naming them all."""
    errors = []
    for op in block.instructions:
        error = op.function.error() if _has_check(op) else None
        if error is not None and str(error) not in map(str, errors):
            errors.append(error)
    if len(errors) == 1:
        return errors[0]
    from pcbatch.backends import weak

    return weak.one_of(errors, "one of these checks failed")


def _raise_failures(
    program, staged, pcs, max_stack_depth, max_steps, args=None, backend=None,
    lanes_are_members=True,
) -> None:
    """Raises `StackOverflowError` or `StepLimitError` if a lane of the run ended with
    its program counter in ``pcs`` (host values) other than halted. With ``args`` (the
    call's arguments) the overflow's error says what depth suffices, measured on NumPy;
    with ``lanes_are_members`` (not with refill, whose lanes take turns) it names the
    batch members that overflowed.
    Called after an eager run, or on the host from inside a traced one (`fail_on_read`)."""
    pcs = np.asarray(pcs).reshape(-1)
    faulted = np.flatnonzero(pcs > 2 * staged.halt)
    if faulted.size:
        block = faulting_block(int(pcs[faulted[0]]), staged.halt)
        raise _fault_error(program.graph.blocks[block])
    overflowed = np.flatnonzero(pcs > staged.halt)
    if overflowed.size:
        block = program.graph.blocks[overflowing_block(int(pcs[overflowed[0]]), staged.halt)]
        function = overflowing_function(program, block, block_owners(program))
        suggested = None
        advice = f"try a larger max_stack_depth (at least {2 * max_stack_depth})"
        if args is not None:
            host_args = [backend.to_host(a) if not is_pattern_node(a) else a for a in args]
            rows = np.arange(batch_size_of(program, host_args))
            suggested, advice = measure_depth(
                program, host_args, rows, max_stack_depth, NumpyBackend()
            )
        members = ", ".join(str(int(r)) for r in overflowed[:5])
        members = f" (batch member(s) {members})" if lanes_are_members else ""
        raise StackOverflowError(
            f"recursion in {function!r} exceeded max_stack_depth={max_stack_depth}"
            f"{members}; {advice}.",
            function=function,
            max_stack_depth=max_stack_depth,
            suggested_depth=suggested,
        )
    if max_steps is not None and (pcs < staged.halt).any():
        raise step_limit_error(program, pcs, max_steps)


def _record(prof, program, staged, info, backend) -> None:
    batch = staged.layout.batch_size  # lanes per device when the batch is sharded
    counts = backend.to_host(info["block_counts"])
    lanes = backend.to_host(info["block_lanes"])
    steps = int(backend.to_host(info["steps"]))
    prof.start_run(program)
    prof.block_executions += steps  # summed over devices when the batch is sharded
    shard_steps = backend.to_host(info["shard_steps"]) if "shard_steps" in info else [steps]
    for shard, n in enumerate(shard_steps):
        prof.shard_block_executions[shard] += int(n)
    for block, n, active in zip(program.graph.blocks, counts, lanes):
        if n:
            prof.record_block_totals(block.label, int(n), int(active), batch)
            for op in block.instructions:
                if isinstance(op, PrimOp) and not op.is_copy:
                    prof.primitive_counts[op.label] += int(n)
                    prof.primitive_lanes[op.label] += int(active)
    if "compacted" in info:
        for width, n in zip(staged.compaction.widths, backend.to_host(info["compacted"])):
            prof.compacted_block_executions[width] += int(n)
    prims = np.array([_primitives_in(block) for block in program.graph.blocks])
    prof.primitive_executions += int(np.dot(counts.astype(np.int64), prims))
    if batch:
        prof.active_lane_sum += float(np.dot(lanes.astype(np.float64), prims)) / batch
        prof.live_lane_sum += float(backend.to_host(info["live_sum"])) / batch


def _primitives_in(block) -> int:
    """The primitives one execution of ``block`` runs (copies are not primitives)."""
    return sum(1 for op in block.instructions if isinstance(op, PrimOp) and not op.is_copy)
