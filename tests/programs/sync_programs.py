"""Programs with ``pcbatch.sync()`` points, for ``tests/test_scheduling.py``.

``gathered`` and ``ungathered`` differ only by the sync point: threads leave the
loop after different numbers of calls, and under ``lowest_pc`` the code after
the loop (numbered below the helper's blocks) runs for each group of threads
that has left, while the sync point holds it until every thread is there.
"""

from __future__ import annotations

import pcbatch
from pcbatch import sync

ctx = pcbatch.Context()


@ctx.batch
def halvings(x):
    n = 0
    while x > 1:
        x = x // 2
        n += 1
    return n


@ctx.batch
def gathered(x, k):
    acc = 0
    for i in range(k):
        acc += halvings(x + i)
    pcbatch.sync()
    y = acc * 3
    return y + 1


@ctx.batch
def ungathered(x, k):
    acc = 0
    for i in range(k):
        acc += halvings(x + i)
    y = acc * 3
    return y + 1


@ctx.batch
def syncs_in_a_loop(x, k):
    """Two sync points that reach each other: only they may hold threads (no deadlock)."""
    acc = 0
    for i in range(k):
        sync()
        if (x + i) % 3 == 0:
            acc += halvings(x * i + 1)
        sync()
    return acc


# Its own context: an error in one function stops the whole context from compiling.
ctx_bad = pcbatch.Context()


@ctx_bad.batch
def bad_sync(x):
    pcbatch.sync(x)  # ERROR
    return x
