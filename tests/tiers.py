"""The two test tiers: fast (the default) and slow (``python -m pytest --slow``).

The fast tier runs every test on every backend, with small samples where a test
samples (fuzzed programs, NUTS draws, batch sizes on the compiled backends); it is
the README's test command. ``--slow`` adds the slow tier: the long fuzz samples, the
long NUTS runs and the larger parametrizations. ``tests/conftest.py`` sets `SLOW`
from the flag before any test module is collected, so a module may size its
parameters with `pick`; a test (or parameter) that only belongs to the slow tier is
marked with `slow`, and is deselected without the flag. The slow tier is the fast
tier and more: nothing the fast tier runs is left out under ``--slow``.

JAX and TensorFlow compile each program (XLA, TensorFlow's graph), seconds each; most
of the fast tier's time went there. So a test parametrized over backends
(`tests.backends.backend_param`, or `in_turn` for a grid of cases) runs on them by
one rule, `backend_runs`: in the fast tier, one test or case in `COMPILED_EVERY` of
each file (the first among them) runs compiled, and the others run the same staged
machine op by op, without compiling (ids ``jax_eager``, ``tensorflow_eager``);
``--slow`` adds every compiled run.
"""

from __future__ import annotations

import sys
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


#: in the fast tier, the first backend-parametrized test (or case) of each test file, and
#: then every COMPILED_EVERY-th, runs compiled on JAX and TensorFlow; the others run there
#: as the staged machine op by op (see `backend_runs`)
COMPILED_EVERY = 4

_RUNS_SO_FAR: dict = {}  # test module -> how many tests or cases `backend_runs` has given


def backend_runs(
    module: str, case: tuple = (), case_id: str | None = None, eager: bool = True
) -> list:
    """The runs of one test (or one case of a test's grid) of ``module`` on every backend,
    as ``pytest.param(*case, backend_name)``; the rule of the two tiers for backends:

    - NumPy and Torch (eager backends: nothing to compile): one run, in both tiers.
    - JAX and TensorFlow: the compiled run (id ``jax``, ``tensorflow``) in the slow tier,
      and in the fast tier too for the first test or case of each file and then every
      `COMPILED_EVERY`-th, so each file's fast tier compiles some of its programs on each
      (a bug only the compiler shows still fails there). Every other test or case also
      has an eager run (id ``jax_eager``, ``tensorflow_eager``), in both tiers: the same
      staged machine run op by op (`tests.backends.staged_eagerly`), which tests all but
      the compiler for a fraction of the CPU.

    So the fast tier runs every test on every backend, and ``--slow`` adds every compiled
    run it leaves out. The k-th call for a module counts as its k-th test or case (test
    modules decorate in file order, so the choice is fixed by the file). ``eager=False``
    (a case marked `compiled_only`): compiled runs in both tiers, no eager run."""
    from tests import backends

    k = _RUNS_SO_FAR.get(module, 0)
    _RUNS_SO_FAR[module] = k + 1
    compiled_in_fast = k % COMPILED_EVERY == 0 or not eager
    prefix = f"{case_id}-" if case_id else ""
    params = []
    for name in backends.BACKEND_NAMES:
        if name in backends.EAGER_NAMES:
            params.append(pytest.param(*case, name, id=prefix + name))
            continue
        marks = () if compiled_in_fast else slow
        params.append(pytest.param(*case, name, id=prefix + name, marks=marks))
        if not compiled_in_fast:
            params.append(
                pytest.param(*case, name, id=f"{prefix}{name}_eager", marks=staged_eagerly)
            )
    return params


#: marks a run of a JAX or TensorFlow test as the staged machine run eagerly
staged_eagerly = pytest.mark.staged_eagerly

#: marks a case of `in_turn` whose program the eager runs cannot run (say, on TensorFlow,
#: ``np.array`` of a list: ``tf.switch_case`` run eagerly raises "unhashable type:
#: 'list'"): compiled in both tiers instead
compiled_only = pytest.mark.compiled_only


def in_turn(cases: list, backend_names: list | None = None) -> list:
    """`backend_runs` of each case of a grid (a ``pytest.param`` or a tuple), for a test
    parametrized over ``(*case, backend_name)``: every case on every backend in the fast
    tier, the compiled backends compiling one case in `COMPILED_EVERY` there.
    ``backend_names``: only these backends (say, the compiled ones)."""
    module = sys._getframe(1).f_globals["__name__"]
    params = []
    for case in cases:
        values, case_id, marks = (
            (tuple(case.values), case.id, list(case.marks))
            if hasattr(case, "values") else (tuple(case), None, [])
        )
        case_id = case_id or "-".join(str(v) for v in values)
        eager = not any(m.name == "compiled_only" for m in marks)
        for run in backend_runs(module, values, case_id, eager):
            if backend_names is None or run.values[-1] in backend_names:
                params.append(pytest.param(*run.values, id=run.id, marks=[*marks, *run.marks]))
    return params


def numpy_fast(backend_names: list) -> list:
    """Every backend, the compiled ones in the slow tier only: for a test whose every
    compiled run is a long compilation of its own (a NUTS program), where another test
    already compiles that program in the fast tier."""
    return [pytest.param(b, marks=() if b == "numpy" else slow) for b in backend_names]
