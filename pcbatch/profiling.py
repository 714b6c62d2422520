"""Counting what a batched run does: ``with pcbatch.profile() as prof: ...``.

Inside the context every VM run adds to the yielded `Profile`:
``block_executions`` (VM steps), ``primitive_executions`` (batched calls of
user primitives; compiler-inserted copies are not counted),
``lane_utilization`` (mean over primitive executions of the fraction of lanes
whose thread is at that block) and ``occupancy`` (mean over VM steps of the
fraction of lanes whose thread has not halted), plus per-primitive counts and
the threads each primitive ran for.
With no profile active the VM checks one module global per run and records
nothing.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses


@dataclasses.dataclass
class Profile:
    """Counters accumulated over every batched run inside ``profile()``."""

    runs: int = 0
    block_executions: int = 0
    primitive_executions: int = 0
    active_lane_sum: float = 0.0
    live_lane_sum: float = 0.0
    primitive_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    block_counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    #: per primitive: threads that ran it, summed over its executions
    primitive_lanes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    #: compiled backends: VM steps per device (its position along the mesh axis of a
    #: sharded JAX run; 0 without a mesh)
    shard_block_executions: collections.Counter = dataclasses.field(
        default_factory=collections.Counter
    )

    @property
    def lane_utilization(self) -> float:
        """Mean fraction of lanes active per primitive execution (1.0 when none ran)."""
        if not self.primitive_executions:
            return 1.0
        return self.active_lane_sum / self.primitive_executions

    @property
    def occupancy(self) -> float:
        """Mean fraction of lanes holding a live thread per VM step (1.0 when none ran)."""
        if not self.block_executions:
            return 1.0
        return self.live_lane_sum / self.block_executions

    def record_step(self, label: str, live: int, batch_size: int) -> None:
        self.block_executions += 1
        self.block_counts[label] += 1
        self.live_lane_sum += live / batch_size

    def record_primitive(self, name: str, active: int, batch_size: int) -> None:
        self.primitive_executions += 1
        self.primitive_counts[name] += 1
        self.primitive_lanes[name] += active
        self.active_lane_sum += active / batch_size

    def absorb(self, other: Profile) -> None:
        """Adds ``other``'s counts to these."""
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, collections.Counter):
                mine.update(theirs)
            else:
                setattr(self, field.name, mine + theirs)

    def as_dict(self) -> dict:
        return {
            "runs": self.runs,
            "block_executions": self.block_executions,
            "primitive_executions": self.primitive_executions,
            "lane_utilization": self.lane_utilization,
            "occupancy": self.occupancy,
            "primitive_counts": dict(self.primitive_counts),
            "primitive_lanes": dict(self.primitive_lanes),
        }

    def __str__(self) -> str:
        return (
            f"runs={self.runs} block_executions={self.block_executions} "
            f"primitive_executions={self.primitive_executions} "
            f"lane_utilization={self.lane_utilization:.3f} occupancy={self.occupancy:.3f}"
        )


_active: list = []


def current() -> Profile | None:
    """The innermost active profile, or None."""
    return _active[-1] if _active else None


@contextlib.contextmanager
def profile():
    """Counts the work of every batched run inside the ``with`` block."""
    prof = Profile()
    _active.append(prof)
    try:
        yield prof
    finally:
        _active.remove(prof)
        if _active:  # an enclosing profile sees the inner one's work too
            _active[-1].absorb(prof)
