"""The two test tiers: fast (the default) and slow (``python -m pytest --slow``).

The fast tier runs every test on NumPy and Torch and on one compiled backend, JAX and
TensorFlow in turn (`compiled_in_turn`), with small samples where a test samples
(fuzzed programs, NUTS draws, batch sizes on the compiled backends); it is the README's
test command. ``--slow`` adds the slow tier: every test on both compiled backends, the
long fuzz samples, the long NUTS runs and the larger parametrizations.
``tests/conftest.py`` sets `SLOW` from the flag before any test module is collected, so
a module may size its parameters with `pick`; a test (or parameter) that only belongs
to the slow tier is marked with `slow`, and is deselected without the flag.

Not done, measured: running the semantic tests' JAX and TensorFlow runs as the staged
machine op by op (`pcbatch.fuzz.eager`, which saves the fuzzer's compilations) instead
of compiling them. Their programs are small (about 0.1 CPU-s to compile on JAX, 0.25 s
in TensorFlow's graph mode) and op by op cost as much or more, far more where a program
runs hundreds of steps: ``tests/semantics`` took 248 CPU-s that way (one test in four
still compiled, every grid case on every backend) against 185 (``-n 0``, side by side
under the same load; commit 602e945 on branch fasttier3 has it).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

#: True under ``--slow`` (set by ``tests/conftest.py``)
SLOW = False

#: marks a test, or one parameter of a test, as slow-tier only
slow = pytest.mark.slow


def pick(fast: T, slow: T) -> T:
    """``fast`` in the fast tier, ``slow`` under ``--slow``."""
    return slow if SLOW else fast


def in_turn(cases: list, backend_names: list) -> list:
    """``pytest.param(*case, backend_name)`` for every case and backend: every case on
    NumPy and Torch (eager: nothing to compile); on JAX and TensorFlow, where each case is
    a compilation of its own, the fast tier takes the cases in turn, one compiled backend
    each (so each runs about half of them), and the slow tier runs all. A case is a
    ``pytest.param`` or a tuple."""
    eager = ("numpy", "torch")
    compiled = [b for b in backend_names if b not in eager]
    params = []
    for backend_name in backend_names:
        for k, case in enumerate(cases):
            values, case_id = (
                (tuple(case.values), case.id) if hasattr(case, "values") else (tuple(case), None)
            )
            fast = backend_name in eager or compiled[k % len(compiled)] == backend_name
            case_id = case_id or "-".join(str(v) for v in values)
            params.append(
                pytest.param(
                    *values, backend_name, id=f"{case_id}-{backend_name}",
                    marks=() if fast else slow,
                )
            )
    return params


#: True under ``--every-backend`` (set by ``tests/conftest.py``)
EVERY_BACKEND = False

#: marks a parameter that runs only under ``--every-backend``
every_backend = pytest.mark.every_backend

#: how many `one_compiled` tests each test module has declared so far
_declared: dict[str, int] = {}


def numpy_fast(backend_names: list) -> list:
    """Every backend, the compiled ones in the slow tier only: for a test whose every
    compiled run is a long compilation of its own (a NUTS program), where another test
    already compiles that program in the fast tier."""
    return [pytest.param(b, marks=() if b == "numpy" else slow) for b in backend_names]


def one_compiled(backend_names: list) -> list:
    """As `numpy_fast`, but the slow tier adds only one compiled backend, JAX and
    TensorFlow in turn down the module's tests (``--every-backend`` adds the other):
    for a NUTS feature whose own code is the sampler's host code, the same on every
    backend (thinning, resuming, warmup, a structured state), where the compiled NUTS
    programs are checked on both backends by the moments, posterior, kernel and input
    tests. Each such run compiles a NUTS program for itself alone (20-55 CPU-s): both
    backends for each feature cost CI about 400 CPU-s (2026-11-27)."""
    module = sys._getframe(1).f_globals.get("__name__", "")
    index = _declared[module] = _declared.get(module, -1) + 1
    compiled = [b for b in backend_names if b not in ("numpy", "torch")]
    chosen = compiled[index % len(compiled)] if compiled else None
    params = []
    for b in backend_names:
        if b == "numpy":
            marks: tuple = ()
        elif b in ("torch", chosen):
            marks = (slow,)
        else:
            marks = (slow, every_backend)
        params.append(pytest.param(b, marks=marks))
    return params


def compiled_in_turn(items: list, backend_of: Callable, compiled: list) -> list:
    """The fast tier's share of ``items`` (collected tests): a test parametrized over the
    backends runs on NumPy and Torch, and on one compiled backend (JAX or TensorFlow,
    chosen by a hash of the test's id without the backend, so every worker picks the
    same); the slow tier runs it on both. Each compiled run is a compilation of its own
    (JAX 0.2 CPU-s a test, TensorFlow's graph mode 0.35, NumPy 0.03): both for every
    test were about 250 CPU-s of the fast tier (2026-11-28). A test whose compiled
    runs `in_turn` (or a mark) already left to one backend keeps it. Returns the items
    to leave out."""
    siblings: dict = {}
    for item in items:
        name = backend_of(item)
        if name in compiled:
            siblings.setdefault(_case_key(item, name), []).append((name, item))
    left_out = []
    for key, runs in siblings.items():
        names = sorted({name for name, _ in runs})
        chosen = names[zlib.crc32(key.encode()) % len(names)]
        left_out.extend(item for name, item in runs if name != chosen)
    return left_out


def _case_key(item, backend_name: str) -> str:
    """``item``'s node id with its backend's part of the parameter id taken out (the
    last part that is the backend's name)."""
    parts = item.callspec.id.split("-")
    if backend_name not in parts:  # an id of its own: a group of one, kept
        return item.nodeid
    last = len(parts) - 1 - parts[::-1].index(backend_name)
    return f"{item.path}::{item.originalname}[{'-'.join(parts[:last] + parts[last + 1:])}]"
