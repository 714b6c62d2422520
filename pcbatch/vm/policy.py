"""Dynamic scheduling: which block a VM step runs, chosen from the live program counters.

The static policies (``lowest_pc``, ``returns_first``; see
``passes/order_blocks.py``) number the blocks so that "run the lowest program
counter" is the policy; a run under one of them with no `sync` point never
comes here (no plan, no cost). A *plan* exists when the program's policy is
dynamic or the program has sync blocks; each step then calls `choose` with the
program counters of every thread and a per-block wait count, on NumPy or inside
the staged loop (the same code: ``ops`` supplies the few array operations).

Contract of `choose`: it returns a block that holds at least one thread (or the
halt index when none does), so every thread is eventually run whatever the
policy: results never depend on the policy, only the number of steps does.

* ``most_threads``: the block holding the most threads (ties: the lowest
  program counter), among blocks no thread can still arrive at: neither from
  strictly upstream (a block it can reach that can never reach it back) nor
  along the forward edges of the current loop iteration. So threads at an
  ``if`` still join, while threads that stay in one arm of a loop go round
  without waiting for the others. Inside a recursion (a cycle through a call)
  the lowest program counter runs, as under ``lowest_pc`` (a program that is
  all recursion, but for the main entry its threads start at, gets no plan, so no
  per-step cost). Starvation bound: a block that has held threads without running
  for `starvation_bound` steps runs next (the longest-waiting first).
* sync blocks (``pcbatch.sync()``, labels ``f.syncN``): held back while any
  thread sits at a block from which the sync block is reachable, so threads
  gather there; never held back when only held-back blocks hold threads (no
  deadlock), nor after `SYNC_WAIT_BOUND` steps of waiting.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pcbatch.ir.nodes import ControlFlowGraph, IndirectGotoOp, PushGotoOp, is_sync_label

DYNAMIC = ("most_threads",)
#: steps a sync block with threads may be held back before it runs anyway
SYNC_WAIT_BOUND = 10_000


@dataclasses.dataclass(frozen=True)
class Plan:
    """What `choose` needs, fixed per lowered program."""

    halt: int
    greedy: bool
    starvation_bound: int
    sync_blocks: tuple  # block indices
    sync_blockers: tuple  # per sync block: bool[halt], blocks that can still reach it
    sync_onehots: tuple  # per sync block: bool[halt], the block itself
    #: [a, b]: threads at a may still arrive at b: b can run after a but a never after b,
    #: or b follows a within one loop iteration (a path of forward edges)
    arrivals: np.ndarray
    recursive: np.ndarray  # blocks on a cycle through a call
    #: blocks where threads return from main, run first when lanes are refilled: a thread
    #: waiting there holds a lane another input could use
    exits: np.ndarray


def plan_for(program, refill: bool = False) -> Plan | None:
    """The plan for a lowered program, or None when plain lowest-pc-first suffices.

    With ``refill`` (`pcbatch.vm.refill`), threads returning from main never wait for
    others: their lanes take new inputs at once. Made once per program (kept on it: an
    eager run of few steps would pay the reachability analysis on every call).
    """
    plans = program.__dict__.get(_PLANS)
    if plans is None:
        plans = {}
        object.__setattr__(program, _PLANS, plans)  # a cache, not a field
    if refill not in plans:
        plans[refill] = _plan(program, refill)
    return plans[refill]


_PLANS = "_schedule_plans"


def _plan(program, refill: bool) -> Plan | None:
    blocks = program.graph.blocks
    sync = tuple(i for i, b in enumerate(blocks) if is_sync_label(b.label))
    greedy = getattr(program, "schedule", "lowest_pc") in DYNAMIC
    if not greedy and not sync:
        return None
    halt = len(blocks)
    reach = _reachability(program)
    blockers, onehots = [], []
    for s in sync:
        onehot = np.arange(halt) == s
        blockers.append(reach[:, s] & ~onehot)
        onehots.append(onehot)
    arrivals = (reach & ~reach.T) | _reachability(program, forward_only=True)
    calls = np.array([isinstance(b.terminator, PushGotoOp) for b in blocks])
    recursive = (reach & reach.T & calls[None, :]).any(axis=1)
    # Refilling, a plan also runs threads leaving main first (`exits`): kept.
    settled = recursive | (_start_only(reach) & (not refill))
    if settled.all() and not sync:
        return None  # most_threads keeps the lowest-pc order everywhere: no per-step cost
    if not sync and not refill and _chained(arrivals, _start_only(reach), range(halt)):
        return None  # most_threads runs the lowest pc (see `in_fixed_order`)
    exits = np.array(
        [
            refill
            and b.label.startswith(f"{program.main}.")
            and isinstance(b.terminator, IndirectGotoOp)
            for b in blocks
        ]
    )
    return Plan(
        halt,
        greedy,
        max(64, 8 * halt),
        sync,
        tuple(blockers),
        tuple(onehots),
        arrivals,
        recursive,
        exits,
    )


def in_fixed_order(program):
    """``program`` with its blocks renumbered so that `most_threads` always runs the lowest
    program counter, where it runs the blocks in one fixed order; else ``program``.

    The order is fixed when threads at each block may still arrive at every later block
    of the order, and never at an earlier one (a loop whose body is one block: threads
    in the body may still arrive at the exit, so the body runs while it holds threads).
    Of the blocks holding threads only the first in that order is then one no thread
    can still arrive at, and `most_threads` runs it. Renumbered that way, the program
    needs no plan (`plan_for`): a staged step takes the smallest program counter
    instead of the policy's reductions, and runs the same blocks in the same order.
    Main's entry stays block 0 (threads start there)."""
    if getattr(program, "schedule", "lowest_pc") not in DYNAMIC:
        return program
    blocks = program.graph.blocks
    if any(is_sync_label(b.label) for b in blocks):
        return program
    reach = _reachability(program)
    arrivals = (reach & ~reach.T) | _reachability(program, forward_only=True)
    start_only = _start_only(reach)
    # In a fixed order, each block arrives at every block after it: sort by how many.
    order = sorted(
        range(len(blocks)), key=lambda b: (b != 0, not start_only[b], -arrivals[b].sum(), b)
    )
    if order == list(range(len(blocks))):
        return program
    if not _chained(arrivals[np.ix_(order, order)], start_only[order], range(len(blocks))):
        return program
    return program.replace(graph=ControlFlowGraph(tuple(blocks[b] for b in order)))


def _chained(arrivals: np.ndarray, start_only: np.ndarray, blocks) -> bool:
    """Whether, among the ``blocks`` (in order) that threads can reach after the start,
    threads at each may still arrive at every later one and at no earlier one."""
    held = [b for b in blocks if not start_only[b]]
    for i, a in enumerate(held):
        for b in held[i + 1 :]:
            if not arrivals[a, b] or arrivals[b, a]:
                return False
    return True


def entry_runs_once(program) -> bool:
    """Whether no block leads to main's entry (block 0): threads are there only at the
    start, all of them together, so it can run once before the loop (`vm.staged`)."""
    return bool(_start_only(_reachability(program))[0])


def _start_only(reach: np.ndarray) -> np.ndarray:
    """Blocks no block leads to: only main's entry, where threads start (jump threading
    often leaves a recursive main's entry so, its test copied into every call).

    Such a block never changes `most_threads`'s choice from the lowest program counter's:
    every thread sits there at the first step and none after, so it is never one of two
    blocks to choose between."""
    return ~reach.any(axis=0)


def _reachability(program, forward_only: bool = False) -> np.ndarray:
    """``reach[a, b]``: block b can run after block a for the same thread (a transitive
    closure; a return may land at any call's continuation, so it reaches them all)."""
    graph = program.graph
    n = len(graph)
    landings = [
        graph.index(b.terminator.return_target)
        for b in graph
        if isinstance(b.terminator, PushGotoOp)
    ]
    reach = np.zeros((n, n), bool)
    for a, block in enumerate(graph):
        term = block.terminator
        targets = [graph.index(t) for t in block.successors if t in graph]
        if isinstance(term, IndirectGotoOp):
            targets = landings
        if forward_only:
            targets = [t for t in targets if t > a]
        reach[a, targets] = True
    for k in range(n):  # Warshall: fine for the few hundred blocks of a program
        reach |= reach[:, k : k + 1] & reach[k : k + 1, :]
    return reach


def choose(ops, plan: Plan, pc, wait):
    """(the block to run, the new wait counts) for one VM step.

    Args:
      ops: array operations (`NUMPY_OPS`, or a staged backend).
      plan: from `plan_for`.
      pc: every thread's program counter (``plan.halt`` for halted threads; past it
        for a thread whose push overflowed its stack, which stops that thread only).
      wait: per block, the steps it has held threads without running.
    """
    # Overflowed threads share the halted threads' bin (their counters lie past it).
    counts = ops.bincount(ops.minimum(pc, plan.halt), plan.halt + 1)
    counts = counts[: plan.halt]
    holding = counts > 0
    eligible = holding
    for s, blockers, onehot in zip(plan.sync_blocks, plan.sync_blockers, plan.sync_onehots):
        held_back = ops.any(holding & blockers) & (wait[s] < SYNC_WAIT_BOUND)
        eligible = eligible & ~(held_back & onehot)
    eligible = ops.where(ops.any(eligible), eligible, holding)  # never a deadlock
    if plan.greedy:
        block = _most_threads(ops, plan, counts, holding, eligible, wait)
    else:
        block = ops.argmax(eligible)  # the first eligible: the lowest program counter
    if plan.exits.any():  # decided when the plan is made: no cost per step otherwise
        exiting = holding & plan.exits
        block = ops.where(ops.any(exiting), ops.argmax(exiting), block)
    block = ops.where(ops.any(holding), block, plan.halt)
    waited = holding & ops.not_equal(ops.arange(plan.halt), block)
    return block, ops.where(waited, wait + 1, 0)


def _most_threads(ops, plan: Plan, counts, holding, eligible, wait):
    """The eligible block holding the most threads, waiting for threads still arriving,
    in lowest-program-counter order inside recursion (measured: greedy choices there
    split the threads of a recursion tree and cost more steps)."""
    gathered = eligible & ~ops.any_from(holding, plan.arrivals)
    eligible = ops.where(ops.any(gathered), gathered, eligible)
    lowest = ops.equal(ops.arange(plan.halt), ops.argmax(eligible))
    in_recursion = ops.any(lowest & plan.recursive)
    eligible = ops.where(in_recursion, lowest, eligible & ~plan.recursive)
    starving = eligible & (wait >= plan.starvation_bound)
    score = ops.where(eligible, counts, -1)
    score = ops.where(ops.any(starving), ops.where(starving, wait, -1), score)
    return ops.argmax(score)


def initial_wait(ops, plan: Plan):
    return ops.zeros((plan.halt,), ops.index_dtype)


class _NumpyOps:
    """The operations `choose` uses, on NumPy arrays (tests check `Scheduler` against it)."""

    index_dtype = np.dtype(np.int64)
    where = staticmethod(np.where)
    any = staticmethod(np.any)
    argmax = staticmethod(np.argmax)
    minimum = staticmethod(np.minimum)
    zeros = staticmethod(np.zeros)
    equal = staticmethod(np.equal)
    not_equal = staticmethod(np.not_equal)

    @staticmethod
    def bincount(x, length: int):
        return np.bincount(x, minlength=length)

    @staticmethod
    def any_from(mask, matrix):
        return matrix[mask].any(axis=0)  # few blocks hold threads: rows, not a product

    @staticmethod
    def arange(size: int):
        return np.arange(size)


NUMPY_OPS = _NumpyOps()


class Scheduler:
    """The eager machine's chooser for one run: `choose`'s rule, in plain Python over the
    few blocks that hold threads (array operations over every block would cost more than
    many a step). ``to_host``: the backend's, to read the program counters on the host."""

    def __init__(self, plan: Plan, to_host=np.asarray):
        self.plan = plan
        self.to_host = to_host
        self.wait: dict = {}  # block -> steps waited; blocks not here have waited 0
        self.sync = {s: _rows(b) for s, b in zip(plan.sync_blocks, plan.sync_blockers)}
        self.arrivals_from = [_rows(plan.arrivals[:, b]) for b in range(plan.halt)]
        self.recursive = plan.recursive.tolist()
        self.exits = frozenset(np.flatnonzero(plan.exits).tolist())

    def next_block(self, pc) -> int:
        return self.choose(np.bincount(self.to_host(pc), minlength=self.plan.halt + 1))

    def choose(self, counts) -> int:
        """The block to run, from ``counts``: how many threads sit at each block (at least
        ``plan.halt`` entries; the eager machine keeps them as threads move, so that a step
        needs no pass over every thread's program counter)."""
        holding = np.flatnonzero(counts[: self.plan.halt]).tolist()
        if not holding:
            self.wait = {}
            return self.plan.halt
        block = holding[0] if len(holding) == 1 else self._pick(counts, holding)
        self.wait = {b: self.wait.get(b, 0) + 1 for b in holding if b != block}
        return block

    def _pick(self, counts, holding: list) -> int:
        plan, wait, present = self.plan, self.wait, set(holding)
        if self.exits:
            exiting = [b for b in holding if b in self.exits]
            if exiting:
                return exiting[0]
        eligible = [b for b in holding if not self._held_back(b, present)] or holding
        if not plan.greedy:
            return eligible[0]
        eligible = [b for b in eligible if not self.arrivals_from[b] & present] or eligible
        if self.recursive[eligible[0]]:
            return eligible[0]
        eligible = [b for b in eligible if not self.recursive[b]]
        starving = [b for b in eligible if wait.get(b, 0) >= plan.starvation_bound]
        if starving:
            return max(starving, key=lambda b: (wait[b], -b))
        return max(eligible, key=lambda b: (counts[b], -b))

    def _held_back(self, block: int, present: set) -> bool:
        blockers = self.sync.get(block)
        if blockers is None or self.wait.get(block, 0) >= SYNC_WAIT_BOUND:
            return False
        return bool(blockers & present)

    def wait_array(self) -> np.ndarray:
        wait = np.zeros(self.plan.halt, np.int64)
        for block, steps in self.wait.items():
            wait[block] = steps
        return wait


def _rows(mask) -> frozenset:
    return frozenset(np.flatnonzero(mask).tolist())
