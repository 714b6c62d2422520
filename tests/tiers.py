"""The two test tiers: fast (the default) and slow (``python -m pytest --slow``).

The fast tier runs every test on every backend, with small samples where a test
samples (fuzzed programs, NUTS draws, batch sizes on the compiled backends); it is
the README's test command. ``--slow`` adds the slow tier: the long fuzz samples, the
long NUTS runs and the larger parametrizations. ``tests/conftest.py`` sets `SLOW`
from the flag before any test module is collected, so a module may size its
parameters with `pick`; a test (or parameter) that only belongs to the slow tier is
marked with `slow`, and is deselected without the flag.
"""

from __future__ import annotations

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
