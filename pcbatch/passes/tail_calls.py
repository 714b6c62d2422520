"""Tail calls: a call whose results are returned at once pushes nothing.

Assumes: a typed structured program. Guarantees: every call that is
immediately returned, to a callee whose result types equal the caller's, is
marked ``tail=True`` and writes straight into the caller's results; the
caller and callee then share their result variables (grouped by union-find
over tail-call edges, so mutual recursion works), and lowering turns the call
into a plain jump: no return address and no saved variables.

Example::

    sum.loop:  t = sum(n1, acc1); sum.__ret0 = copy(t); return
  becomes
    sum.loop:  sum.__ret0 = sum(n1, acc1) [tail]; return
"""

from __future__ import annotations

import dataclasses

from pcbatch.ir.nodes import Block, ControlFlowGraph, FunctionCallOp, PrimOp, Program, ReturnOp
from pcbatch.ir.rename import rename_function
from pcbatch.ir.types import flatten


def _tail_call_site(block: Block, vars_out: tuple):
    """The index of a call returned at once by ``block``, and how many ops follow it."""
    if not isinstance(block.terminator, ReturnOp) or not block.instructions:
        return None
    ops = block.instructions
    last = ops[-1]
    if isinstance(last, FunctionCallOp) and tuple(last.vars_out) == vars_out:
        return len(ops) - 1, 0
    if len(ops) >= 2 and isinstance(last, PrimOp) and last.is_copy:
        call = ops[-2]
        if (
            isinstance(call, FunctionCallOp)
            and tuple(flatten(last.vars_out)) == vars_out
            and tuple(last.vars_in) == tuple(call.vars_out)
            and set(call.vars_out).isdisjoint(call.vars_in)
        ):
            return len(ops) - 2, 1
    return None


class _UnionFind:
    def __init__(self, items):
        self.parent = {x: x for x in items}

    def find(self, x):
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _same_result_types(program: Program, caller, callee) -> bool:
    if len(caller.vars_out) != len(callee.vars_out):
        return False
    types = program.var_types
    return all(types.get(a) == types.get(b) for a, b in zip(caller.vars_out, callee.vars_out))


def run(program: Program, ctx=None) -> Program:
    """Marks tail calls and merges the result variables of tail-call groups."""
    order = [fn.name for fn in program.functions]
    groups = _UnionFind(order)
    sites = {}
    for fn in program.functions:
        for block in fn.graph:
            site = _tail_call_site(block, tuple(fn.vars_out))
            if site is None:
                continue
            callee = program.function(block.instructions[site[0]].function)
            if _same_result_types(program, fn, callee):
                sites[(fn.name, block.label)] = site
                groups.union(fn.name, callee.name)
    if not sites:
        return program
    canonical = {}
    for name in order:  # the first function of each group names the shared results
        canonical.setdefault(groups.find(name), program.function(name).vars_out)
    functions = []
    for fn in program.functions:
        shared = canonical[groups.find(fn.name)]
        fn = rename_function(fn, dict(zip(fn.vars_out, shared)) if fn.vars_out != shared else {})
        functions.append(_rewrite_tail_blocks(fn, sites))
    main = next(f for f in functions if f.name == program.main)
    return program.replace(functions=tuple(functions), vars_out=main.vars_out)


def _rewrite_tail_blocks(fn, sites):
    blocks = []
    for block in fn.graph:
        site = sites.get((fn.name, block.label))
        if site is None:
            blocks.append(block)
            continue
        index, _ = site
        call = dataclasses.replace(block.instructions[index], vars_out=fn.vars_out, tail=True)
        ops = block.instructions[:index] + (call,)
        blocks.append(dataclasses.replace(block, instructions=ops))
    return dataclasses.replace(fn, graph=ControlFlowGraph(tuple(blocks)))
