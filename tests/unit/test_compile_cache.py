"""A compiled backend's cache (`pcbatch.backends.compile_cache`) keeps a compiled run as
long as its program lives, and no longer: a Context that is dropped takes its compiled
code with it, even from a backend that lives on."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import pcbatch
from pcbatch.backends.compile_cache import ProgramCache
from tests.backends import COMPILED_NAMES, make_backend


def halvings(x):
    n = 0
    while x > 1:
        x = x // 2
        n += 1
    return n


@pytest.mark.parametrize("name", COMPILED_NAMES)
def test_a_dropped_context_takes_its_compiled_runs_with_it(name):
    backend = make_backend(name)
    kept = pcbatch.Context().batch(halvings)
    np.testing.assert_array_equal(kept(np.array([1, 8, 9]), backend=backend), [0, 3, 3])
    for _ in range(3):
        dropped = pcbatch.Context().batch(halvings)
        np.testing.assert_array_equal(dropped(np.array([2, 5]), backend=backend), [1, 2])
        del dropped
    gc.collect()
    assert len(backend.compile_cache) == 1  # only the live Context's program
    traces = backend.traces
    np.testing.assert_array_equal(kept(np.array([4, 16, 3]), backend=backend), [2, 4, 1])
    assert backend.traces == traces  # and its run is still compiled


class _Program:
    """Stands for a lowered program: any object with a ``__dict__``."""


class _Entry:
    def __init__(self, program):
        self.program = program


def test_the_cache_is_a_mapping_that_holds_programs_weakly():
    cache = ProgramCache()
    first, second = _Program(), _Program()
    entries = {(id(p), size): _Entry(p) for p in (first, second) for size in (1, 2)}
    cache.update(entries)
    assert len(cache) == 4 and set(cache) == set(entries)
    assert cache[(id(first), 2)] is entries[(id(first), 2)]
    del cache[(id(first), 2)]
    assert (id(first), 2) not in cache and len(cache) == 3
    with pytest.raises(KeyError):
        del cache[(id(first), 2)]
    gone = weakref.ref(second)
    key = (id(second), 1)
    del second, entries
    gc.collect()
    assert gone() is None and key not in cache and len(cache) == 1
    cache.clear()
    assert len(cache) == 0 and cache.get((id(first), 1)) is None


def test_a_key_must_name_its_entrys_program():
    cache = ProgramCache()
    with pytest.raises(ValueError, match="id"):
        cache[(12345, 1)] = _Entry(_Program())


def test_one_program_in_two_caches_keeps_both_entries():
    program = _Program()
    one, two = ProgramCache(), ProgramCache()
    one[(id(program), 1)] = _Entry(program)
    two[(id(program), 1)] = entry = _Entry(program)
    one.clear()
    assert two[(id(program), 1)] is entry and len(one) == 0
