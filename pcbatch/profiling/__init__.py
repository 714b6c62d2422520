"""Profiling batched runs: ``with pcbatch.profile() as prof: ...``.

- `pcbatch.profiling.recorder`: what a run records (`Profile`, `profile`, `current`;
  its names are re-exported here);
- `pcbatch.profiling.plot`: ``Profile.plot(path)``'s figure (needs matplotlib).
"""

from pcbatch.profiling.recorder import (
    MAX_SERIES_POINTS,
    Profile,
    Series,
    counting,
    current,
    labels_counted,
    profile,
)

__all__ = [
    "MAX_SERIES_POINTS", "Profile", "Series", "counting", "current", "labels_counted", "profile",
]
