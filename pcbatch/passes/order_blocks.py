"""Block ordering for a scheduling policy: the program counter numbers the VM runs by.

Assumes: a lowered program (`lower_calls` has split blocks at calls), main's
entry first. Guarantees: the same blocks, renumbered for the policy; main's
entry stays block 0 (where every thread starts). The VM always runs the
lowest-numbered block holding a thread, so the numbering *is* the policy, and
every policy computes the same results.

Policies:
  ``lowest_pc``: the seed's: functions in order (main first), each function's
    blocks in reverse postorder (see `schedule`); a call's continuation block
    follows the call.
  ``returns_first``: every call continuation (the block a return lands in)
    comes before every other block, the innermost functions' first, and within
    a function the later call's continuation first. Threads coming back from
    calls finish unwinding before any thread starts a new call, so threads at
    different recursion depths meet at the same entry instead of trickling in;
    in a recursive tree builder this about halves the steps between two
    evaluations of the leaf. Later continuations first: in ``a = f(); b = f();
    return a + b`` a thread unwinding several levels lands at the second
    continuation again and again and at the first only once, at the end; run
    first, the first continuation would run once per level, each time for
    the few threads that had just arrived (NUTS: one step per leaf instead of
    three).
  ``most_threads`` (the default): dynamic (see ``vm/policy.py``): each step
    runs the block holding the most threads among those no thread can still
    arrive at, with a starvation bound; this pass keeps the ``lowest_pc``
    numbering, which breaks ties.

The lowered program records its policy (``Program.schedule``), so the VM
knows whether to choose blocks dynamically.

Example: blocks ``[main.entry, f.entry, f.call, f.call:1, f.call2:1]`` (``f.call:1``
and ``f.call2:1`` return landings) become ``[main.entry, f.call2:1, f.call:1, f.entry,
f.call]``.
"""

from __future__ import annotations

from pcbatch.ir.nodes import ControlFlowGraph, PushGotoOp

POLICIES = ("lowest_pc", "returns_first", "most_threads")
# The default does the least work over the benchmark corpus while never doing more than
# lowest_pc on any program of it (benchmarks/policies.py; figures in benchmarks/README.md).
DEFAULT = "most_threads"


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"unknown schedule {policy!r}; choose one of {', '.join(POLICIES)}")
    return policy


def _by_function(program) -> list:
    """(function, its blocks) in block order; a function's blocks are contiguous."""
    entry_of = {label: fn for fn, label in program.entries.items()}
    groups: list = []
    for block in program.graph.blocks:
        if block.label in entry_of or not groups:
            groups.append((entry_of.get(block.label, program.main), []))
        groups[-1][1].append(block)
    return groups


def returns_first(program):
    blocks = program.graph.blocks
    landings = {b.terminator.return_target for b in blocks if isinstance(b.terminator, PushGotoOp)}
    groups = _by_function(program)
    first = blocks[0]
    returns = [b for _, bs in reversed(groups) for b in reversed(bs) if b.label in landings]
    rest = [b for _, bs in groups for b in bs if b.label not in landings and b is not first]
    return program.replace(graph=ControlFlowGraph((first, *returns, *rest)))


def run(program, ctx=None):
    policy = check_policy(getattr(ctx, "schedule", DEFAULT))
    if policy == "returns_first":
        program = returns_first(program)
    return program.replace(schedule=policy)
