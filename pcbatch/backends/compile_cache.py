"""A compiled backend's cache of compiled runs, which never keeps a program alive.

A backend (one per process when named by a string, `pcbatch.api`) outlives the
programs it runs: a Context made in a loop, a notebook cell run again, a NUTS model
rebuilt per data set each leave programs behind. Held by the backend, each one's
compiled run (XLA executables, TensorFlow graphs: megabytes each) would stay for the
life of the process; a test suite grew past 12 GB per worker so.

So the entries live on the program they were compiled from, and the cache holds each
program weakly: an entry goes when its program goes (its Context, or the lowered
program cached by it, is collected). An entry holds its program (the run needs it), so
program and entries form a cycle that the garbage collector frees.

Contract: a mutable mapping whose keys are tuples starting with ``id(program)`` and
whose values have a ``program`` attribute, that program (`pcbatch.vm.staged.Compiled`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, MutableMapping
from typing import Any

__all__ = ["ProgramCache"]

#: the attribute of a program holding its entries, by the cache that made them
_ENTRIES = "_compiled_runs"


class ProgramCache(MutableMapping):
    """Compiled runs by ``(id(program), ...)`` keys, kept only while the program lives."""

    def __init__(self) -> None:
        self._programs: dict[int, weakref.ref] = {}
        self._token = object()  # this cache's key on a program (a program may run on many)
        self._dead: list[tuple[int, weakref.ref]] = []  # collected: (id, its reference)
        self._lock = threading.RLock()

    def _entries_of(self, program_id: int) -> dict | None:
        ref = self._programs.get(program_id)
        program = None if ref is None else ref()
        if program is None:
            return None
        return program.__dict__.get(_ENTRIES, {}).get(self._token)

    def __getitem__(self, key: tuple) -> Any:
        entries = self._entries_of(key[0])
        if entries is None or key not in entries:
            raise KeyError(key)
        return entries[key]

    def __setitem__(self, key: tuple, entry: Any) -> None:
        program = entry.program
        if key[0] != id(program):
            raise ValueError("a compile cache key starts with id() of its entry's program")
        self._live_ids()  # first, so that a collected program's id is free for this one
        with self._lock:
            ref = self._programs.get(key[0])
            if ref is None or ref() is not program:
                self._programs[key[0]] = weakref.ref(program, self._forget(key[0]))
            by_cache = program.__dict__.get(_ENTRIES)
            if by_cache is None:
                by_cache = {}
                object.__setattr__(program, _ENTRIES, by_cache)  # a cache, not a field
            by_cache.setdefault(self._token, {})[key] = entry

    def _forget(self, program_id: int):
        """The weak reference's callback: notes the id of a collected program, dropped at
        the next use (a callback runs inside the garbage collector, which may interrupt
        an iteration over ``_programs``)."""
        cache = weakref.ref(self)

        def forget(ref: weakref.ref) -> None:
            live = cache()
            if live is not None:
                live._dead.append((program_id, ref))

        return forget

    def _live_ids(self) -> list[int]:
        """The ids of the programs with entries, after dropping the collected ones (unless
        a new program with the same id has taken a collected one's place)."""
        with self._lock:
            while self._dead:
                program_id, ref = self._dead.pop()
                if self._programs.get(program_id) is ref:
                    del self._programs[program_id]
            return list(self._programs)

    def __delitem__(self, key: tuple) -> None:
        entries = self._entries_of(key[0])
        if entries is None or key not in entries:
            raise KeyError(key)
        del entries[key]

    def __iter__(self) -> Iterator[tuple]:
        for program_id in self._live_ids():
            yield from list(self._entries_of(program_id) or ())

    def __len__(self) -> int:
        return sum(len(self._entries_of(i) or ()) for i in self._live_ids())

    def clear(self) -> None:
        for program_id in self._live_ids():
            entries = self._entries_of(program_id)
            if entries is not None:
                entries.clear()
        with self._lock:
            self._programs.clear()
