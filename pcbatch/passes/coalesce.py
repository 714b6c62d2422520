"""Copy coalescing: a variable copied into another whose value it never has to outlive
shares that variable's register.

Assumes: a typed structured program (tail calls marked, blocks scheduled). Guarantees:
the same results with fewer moves. In a function ``f``, a copy ``d = copy(s)``, or a
recursive call ``d = f(...)`` (which lowering turns into ``d = copy(f.__ret0)`` after
the return), names ``d`` and ``s`` one variable when

- both are ``f``'s own, of the same type (weak or not), neither a parameter of ``f``;
- neither is live where ``f`` starts (a read before any write, which may see zeros:
  ``maybe_unbound``), nor live across any call (so merging needs no save that the
  program did not need before, and no callee's write can reach a live value);
- they do not interfere: no instruction writes one while the other is live after it,
  except a copy of one into the other that writes nothing else of the two.

In the staged machine every register a block writes is a masked select, a kernel for
XLA to compile (and a pass over the register each step); a move the pass removes is
one fewer. The surviving name is the function's result where one of the two is
(``f.__ret0``: the calls' result moves, ``y = copy(f.__ret0)``, then vanish), else the
source. Copies of a variable into itself are dropped.

Example (NUTS's tree, ``first`` a tuple of 15 arrays)::

    first = build_tree(...); if first.turning: return first
  becomes, with ``first`` renamed ``build_tree.__ret0``,
    build_tree.__ret0 = build_tree(...); if ...: return
  and lowering moves nothing after the call (30 array moves fewer).
"""

from __future__ import annotations

import dataclasses

from pcbatch.analysis.assignment import all_variables
from pcbatch.analysis.liveness import block_liveness, live_after_instructions
from pcbatch.ir.nodes import ControlFlowGraph, FunctionCallOp, PrimOp, Program, writes
from pcbatch.ir.rename import rename_function
from pcbatch.ir.types import flatten


def run(program: Program, ctx=None) -> Program:
    """Merges non-interfering copy-related variables of every function."""
    functions, merged = [], {}
    for fn in program.functions:
        mapping = _merges(program, fn)
        merged.update(mapping)
        functions.append(_without_self_copies(rename_function(fn, mapping)))
    if not merged:
        return program.replace(functions=tuple(functions))
    types = {k: v for k, v in program.var_types.items() if k not in merged}
    return program.replace(functions=tuple(functions), var_types=types)


def _merges(program: Program, fn) -> dict:
    """Variable -> the variable it merges into (none for itself)."""
    own = set(all_variables(fn)) - set(fn.vars_in)
    excluded = _live_at_entry(fn) | _live_across_calls(fn) | set(fn.maybe_unbound)
    candidates = [
        (d, s)
        for d, s in _copy_pairs(fn)
        if d != s and {d, s} <= own and not {d, s} & excluded and _same_type(program, d, s)
    ]
    if not candidates:
        return {}
    interference = _interference(fn)
    leader = {}
    find = lambda v: v if leader.get(v, v) == v else find(leader[v])
    results = set(fn.vars_out)
    for d, s in candidates:
        a, b = find(d), find(s)
        if a == b or b in interference.get(a, ()) or {a, b} <= results:
            continue  # (results keep their names: callers and tail calls name them)
        keep, gone = (a, b) if a in results else (b, a)
        leader[gone] = keep
        joined = interference.get(keep, set()) | interference.pop(gone, set())
        interference[keep] = joined
        for other in joined:
            interference.setdefault(other, set()).discard(gone)
            interference[other].add(keep)
    return {v: find(v) for v in leader}


def _copy_pairs(fn) -> list:
    """(destination, source) of every one-to-one move in ``fn``, in program order: the
    copies, and the results of ``fn``'s calls of itself."""
    pairs = []
    for block in fn.graph:
        for op in block.instructions:
            if isinstance(op, PrimOp) and op.is_copy:
                sources, targets = list(op.vars_in), list(flatten(op.vars_out))
            elif isinstance(op, FunctionCallOp) and op.function == fn.name and not op.tail:
                sources, targets = list(fn.vars_out), list(flatten(op.vars_out))
            else:
                continue
            if len(sources) == len(targets):
                pairs.extend(zip(targets, sources))
    return pairs


def _same_type(program: Program, a: str, b: str) -> bool:
    ta, tb = program.var_types.get(a), program.var_types.get(b)
    if ta is None or tb is None or ta != tb:
        return False
    kinds = lambda t: [type(leaf) for leaf in flatten(t.tensors)]
    return type(ta) is type(tb) and kinds(ta) == kinds(tb)


def _live_at_entry(fn) -> set:
    live_in, _ = block_liveness(fn)
    return set(live_in[fn.graph.entry])


def _live_across_calls(fn) -> set:
    after = live_after_instructions(fn)
    across = set()
    for block in fn.graph:
        for i, op in enumerate(block.instructions):
            if isinstance(op, FunctionCallOp):
                across |= set(after[block.label][i]) - set(writes(op))
    return across


def _interference(fn) -> dict:
    """Variable -> the variables it may not share a register with: those live after an
    instruction that writes it (and the other way round), but for the source of a copy
    into it that the same copy leaves as it was."""
    after = live_after_instructions(fn)
    edges: dict = {}
    for block in fn.graph:
        for i, op in enumerate(block.instructions):
            written = set(writes(op))
            moved = {}
            if isinstance(op, PrimOp) and op.is_copy:
                targets = list(flatten(op.vars_out))
                if len(targets) == len(op.vars_in):
                    moved = dict(zip(targets, op.vars_in))
            for w in written:
                for v in after[block.label][i]:
                    if v == w or (moved.get(w) == v and v not in written):
                        continue
                    edges.setdefault(w, set()).add(v)
                    edges.setdefault(v, set()).add(w)
    return edges


def _without_self_copies(fn):
    """``fn`` without the moves of a variable into itself (merging leaves some)."""
    blocks = []
    for block in fn.graph:
        ops = [_drop_self_moves(op) for op in block.instructions]
        ops = tuple(op for op in ops if op is not None)
        blocks.append(dataclasses.replace(block, instructions=ops))
    return dataclasses.replace(fn, graph=ControlFlowGraph(tuple(blocks)))


def _drop_self_moves(op):
    """``op`` without its moves of a variable into itself (None if nothing is left).
    Before lowering a copy pushes nothing (lowering adds the saves), so none is needed."""
    if not (isinstance(op, PrimOp) and op.is_copy):
        return op
    targets = list(flatten(op.vars_out))
    if len(targets) != len(op.vars_in) or all(t != s for t, s in zip(targets, op.vars_in)):
        return op
    kept = [(s, t) for s, t in zip(op.vars_in, targets) if s != t]
    if not kept:
        return None
    vars_out = kept[0][1] if len(kept) == 1 else tuple(t for _, t in kept)
    return dataclasses.replace(
        op,
        vars_in=tuple(s for s, _ in kept),
        vars_out=vars_out,
        skip_push_mask=op.skip_push_mask & {t for _, t in kept},
    )
