"""The program fuzzer: random batchable programs, checked batched against per example.

- `pcbatch.fuzz.programs`: random programs in the batchable subset, as Python source
  (`generate`, `load`, `compare`, `mismatch`; its names are re-exported here);
- `pcbatch.fuzz.pack`: several programs of one event shape packed into one, checked in
  one compilation, a mismatch isolated and shrunk;
- `pcbatch.fuzz.eager`: a compiled backend's staged machine run op by op (no compile).

``benchmarks/fuzz.py`` runs long campaigns; ``tests/reliability/test_fuzz.py`` the CI ones.
"""

from pcbatch.fuzz.programs import (
    EVENT_SHAPES,
    FuzzProgram,
    RandomChooser,
    ReplayChooser,
    compare,
    generate,
    load,
    mismatch,
)

__all__ = [
    "EVENT_SHAPES",
    "FuzzProgram",
    "RandomChooser",
    "ReplayChooser",
    "compare",
    "generate",
    "load",
    "mismatch",
]
