"""Many fuzz programs in one batched module, so that one compile checks them all.

JAX and TensorFlow compile every new program (about a second each); checking
hundreds of `pcbatch.fuzz` programs one by one would take minutes per backend.
Packing them costs one compile per pack, and its batch runs different programs
side by side, which also tests divergence across programs.

Contract: `pack(programs)` takes `FuzzProgram`s of one event shape and returns a
`Pack` whose module holds every program's functions, renamed ``p<i>_f<j>``, and
``main(k, n, x, d)``, which returns program ``k``'s ``f0(n, x, d)``.
`Pack.make_args(seeds, members)` gives program ``i`` the rows
``make_args(RandomState(seeds[i]), members)``, shuffled among the other programs'
rows. `check` runs ``main`` batched and per example and names the programs whose
rows differ; `isolate` re-runs one of them alone, to tell a bug of that program
from one of the pack; `shrink` minimizes a failing program's decisions (the
offsets a `RandomChooser` drew, replayed by `ReplayChooser`) so that a failure
is reported as one small program.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pcbatch.fuzz import programs as fuzz

__all__ = ["Pack", "check", "isolate", "pack", "shrink"]

_CALL = re.compile(r"\bf(\d+)\(")


@dataclasses.dataclass(frozen=True)
class Pack:
    """A packed module's source, as a `FuzzProgram` whose entry is ``main``, and its parts."""

    program: fuzz.FuzzProgram
    members: tuple  # the packed programs, in the order ``k`` numbers them

    def make_args(self, seeds: Sequence[int], members: int) -> list:
        """``[k, n, x, d]``: ``members`` rows per program, shuffled together."""
        parts = [
            p.make_args(np.random.RandomState(s), members) for p, s in zip(self.members, seeds)
        ]
        k = np.repeat(np.arange(len(parts), dtype=np.int64), members)
        order = np.random.RandomState(seeds[0]).permutation(len(k))
        columns = [np.concatenate(column) for column in zip(*parts)]
        return [k[order], *(column[order] for column in columns)]


def pack(programs: Sequence[fuzz.FuzzProgram]) -> Pack:
    """One module calling each of ``programs`` (all of one event shape) by its index."""
    shapes = {p.event_shape for p in programs}
    if len(shapes) != 1:
        raise ValueError(f"programs of one event shape pack together, not {sorted(shapes)}")
    bodies = [_rename(p.source, i) for i, p in enumerate(programs)]
    source = "\n\n".join([fuzz.HEADER, *bodies, _dispatch(len(programs))]) + "\n"
    functions = sum(p.n_functions for p in programs) + 1
    return Pack(fuzz.FuzzProgram(source, shapes.pop(), functions), tuple(programs))


def _rename(source: str, index: int) -> str:
    """A program's functions (without the shared header), ``f<j>`` renamed ``p<index>_f<j>``."""
    assert source.startswith(fuzz.HEADER)
    return _CALL.sub(rf"p{index}_f\1(", source[len(fuzz.HEADER):]).strip("\n")


def _dispatch(count: int) -> str:
    lines = ["@ctx.batch", "def main(k, n, x, d):"]
    for i in range(count - 1):
        lines += [f"    {'if' if i == 0 else 'elif'} k == {i}:", f"        return p{i}_f0(n, x, d)"]
    last = f"return p{count - 1}_f0(n, x, d)"
    lines += ["    else:", f"        {last}"] if count > 1 else [f"    {last}"]
    return "\n".join(lines)


def check(pack_: Pack, module: Any, args: list, **options) -> tuple:
    """``(problem, culprits)``: how ``main``'s batched run differs from the per-example
    run (None if not) and the sorted indices of the programs whose rows differ."""
    problem, rows = fuzz.compare(module.main, args, **options)
    return problem, sorted({int(k) for k in args[0][rows]})


def isolate(pack_: Pack, index: int, args: list, directory: str, **options) -> str | None:
    """Re-runs program ``index`` alone on its rows of the packed batch; its own problem,
    or None when it passes alone (then the pack, not the program, triggers the bug)."""
    program = pack_.members[index]
    rows = args[0] == index
    module = fuzz.load(program, directory)
    return fuzz.mismatch(program, module, [a[rows] for a in args[1:]], **options)


def shrink(offsets: Sequence[int], fails: Callable[[list], bool], budget: int = 400) -> list:
    """The smallest decision list found (greedily, at most ``budget`` tries) for which
    ``fails(offsets)`` still holds: drops the tail, then zeroes, then lowers each decision."""
    best, tries = list(offsets), 0

    def attempt(candidate: list) -> bool:
        nonlocal best, tries
        if tries >= budget or candidate == best:
            return False
        tries += 1
        if fails(candidate):
            best = candidate
            return True
        return False

    changed = True
    while changed and tries < budget:
        changed = False
        cut = len(best) // 2
        while cut:
            if attempt(best[: len(best) - cut]):
                changed = True
            else:
                cut //= 2
        for i in range(len(best)):
            if i < len(best) and best[i]:
                changed |= attempt(best[:i] + [0] + best[i + 1:]) or (
                    best[i] > 1 and attempt(best[:i] + [best[i] - 1] + best[i + 1:])
                )
    return best
