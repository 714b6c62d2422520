"""A module that does ``from numpy import *``, as some users' scripts do: its globals
``min``, ``max``, ``round``, ``abs``, ``sum``, ``all`` and ``any`` are NumPy's. The loops
pcbatch rewrites (tests/semantics/test_control_flow.py) must not call them where the user
did not."""

from __future__ import annotations

from numpy import *  # noqa: F403

import pcbatch

ctx = pcbatch.Context()


@ctx.batch
def dot_over_zip(v, w):
    s = 0.0
    for a, b in zip(v, w):
        s = s + a * b
    return s


@ctx.batch
def weighted_reversed(v):
    s = 0.0
    for i, a in enumerate(reversed(v)):
        s = s + a * i + min(v, 0)  # the user's min: NumPy's, over axis 0
    return s
