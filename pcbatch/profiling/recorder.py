"""Counting what a batched run does: ``with pcbatch.profile() as prof: ...``.

Inside the context every VM run adds to the yielded `Profile`:
``block_executions`` (VM steps), ``primitive_executions`` (batched calls of
user primitives; compiler-inserted copies are not counted),
``lane_utilization`` (mean over primitive executions of the fraction of lanes
whose thread is at that block) and ``occupancy`` (mean over VM steps of the
fraction of lanes whose thread has not halted), plus per-primitive counts and
the threads each primitive ran for.

Per block and per user source line (`block_table`, `line_table`): executions,
mean active lanes, utilization (active lanes over lanes) and, on NumPy, wall
time. A block's source line is the first user line its instructions come from;
a line's row adds up the blocks that hold code of that line (the time of a
block spanning several lines is split evenly among them). On NumPy each step's
utilization is also kept, as a series bounded in memory (`Series`).

``print(prof)`` shows the summary line, then both tables; ``prof.as_dict()``
gives the same for programs; ``prof.plot(path)`` draws utilization over VM
steps and a per-line bar chart (needs matplotlib: ``pip install pcbatch[plot]``).

With no profile active the VM checks one module global per run and records
nothing (and times nothing).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses

from pcbatch.ir import printer

__all__ = ["MAX_SERIES_POINTS", "Profile", "Series", "current", "profile"]

MAX_SERIES_POINTS = 2048


class Series:
    """Per-step values, at most `MAX_SERIES_POINTS` of them: when full, neighbouring
    points are averaged in pairs and each later point averages twice as many steps."""

    def __init__(self):
        self.points: list = []
        self.stride = 1  # steps per point
        self._pending_sum = 0.0
        self._pending = 0

    def add(self, value: float) -> None:
        self._pending_sum += value
        self._pending += 1
        if self._pending == self.stride:
            self.points.append(self._pending_sum / self.stride)
            self._pending_sum, self._pending = 0.0, 0
            if len(self.points) >= MAX_SERIES_POINTS:
                pairs = zip(self.points[0::2], self.points[1::2])
                self.points = [(a + b) / 2 for a, b in pairs]
                self.stride *= 2

    def extend(self, other: Series) -> None:
        for value in other.points:
            for _ in range(other.stride):
                self.add(value)

    def steps(self) -> list:
        """The VM step at the middle of each point."""
        return [(i + 0.5) * self.stride for i in range(len(self.points))]

    def __len__(self) -> int:
        return len(self.points)


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
    #: per block: threads that ran it, and lanes (batch sizes), summed over its executions
    block_lanes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    block_capacity: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    #: per block: wall seconds (NumPy only; blocks run by staged backends have none)
    block_seconds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    #: per block: the user source lines (``file.py:12``) its code comes from, first first
    block_lines: dict = dataclasses.field(default_factory=dict)
    #: the fraction of lanes active at each VM step (NumPy only), decimated
    utilization_series: Series = dataclasses.field(default_factory=Series)
    #: compiled backends: VM steps per device (its position along the mesh axis of a
    #: sharded JAX run; 0 without a mesh)
    shard_block_executions: collections.Counter = dataclasses.field(
        default_factory=collections.Counter
    )
    #: compiled backends with compaction (`pcbatch.vm.compact`): block executions that
    #: ran on a bucket of lanes, per bucket width (the rest ran full width)
    compacted_block_executions: collections.Counter = dataclasses.field(
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

    # -- recording (called by the VMs) -------------------------------------------------
    def start_run(self, program) -> None:
        """Counts a run and notes the source lines of the program's blocks."""
        self.runs += 1
        for block in program.graph:
            if block.label not in self.block_lines:
                self.block_lines[block.label] = printer.source_lines(block)

    def record_step(
        self, label: str, live: int, batch_size: int, active: int | None = None, seconds=None
    ) -> None:
        self.block_executions += 1
        self.block_counts[label] += 1
        self.live_lane_sum += live / batch_size
        if active is not None:
            self.block_lanes[label] += active
            self.block_capacity[label] += batch_size
            self.utilization_series.add(active / batch_size)
        if seconds is not None:
            self.block_seconds[label] += seconds

    def record_block_totals(self, label: str, executions: int, active: int, batch_size: int):
        """A staged run's totals for one block (no per-step series, no time)."""
        self.block_counts[label] += executions
        self.block_lanes[label] += active
        self.block_capacity[label] += executions * batch_size

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
            elif isinstance(mine, Series):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                mine.update({k: v for k, v in theirs.items() if k not in mine})
            else:
                setattr(self, field.name, mine + theirs)

    # -- reporting -----------------------------------------------------------------------
    def block_table(self) -> list:
        """One dict per executed block, most executed first."""
        rows = []
        for label, executions in self.block_counts.most_common():
            lines = self.block_lines.get(label, ())
            rows.append(
                _row(
                    block=label,
                    line=lines[0] if lines else "",
                    executions=executions,
                    lanes=self.block_lanes[label],
                    capacity=self.block_capacity[label],
                    seconds=self.block_seconds.get(label),
                )
            )
        return rows

    def line_table(self) -> list:
        """One dict per user source line that executed code, most executed first."""
        totals: dict = {}
        for label, executions in self.block_counts.items():
            lines = self.block_lines.get(label, ())
            seconds = self.block_seconds.get(label)
            for line in lines:
                t = totals.setdefault(line, {"executions": 0, "lanes": 0, "capacity": 0})
                t["executions"] += executions
                t["lanes"] += self.block_lanes[label]
                t["capacity"] += self.block_capacity[label]
                if seconds is not None:
                    t["seconds"] = t.get("seconds", 0.0) + seconds / len(lines)
        rows = [
            _row(line=line, seconds=t.pop("seconds", None), **t) for line, t in totals.items()
        ]
        return sorted(rows, key=lambda r: (-r["executions"], r["line"]))

    def as_dict(self) -> dict:
        return {
            "runs": self.runs,
            "block_executions": self.block_executions,
            "primitive_executions": self.primitive_executions,
            "lane_utilization": self.lane_utilization,
            "occupancy": self.occupancy,
            "primitive_counts": dict(self.primitive_counts),
            "primitive_lanes": dict(self.primitive_lanes),
            "compacted_block_executions": dict(self.compacted_block_executions),
            "blocks": self.block_table(),
            "lines": self.line_table(),
            "utilization_series": {
                "steps": self.utilization_series.steps(),
                "utilization": list(self.utilization_series.points),
            },
        }

    def summary(self) -> str:
        return (
            f"runs={self.runs} block_executions={self.block_executions} "
            f"primitive_executions={self.primitive_executions} "
            f"lane_utilization={self.lane_utilization:.3f} occupancy={self.occupancy:.3f}"
        )

    def __str__(self) -> str:
        parts = [self.summary()]
        if self.block_counts:
            parts += ["", "per block:", _format_table(self.block_table(), "block")]
            parts += ["", "per source line:", _format_table(self.line_table(), "line")]
        return "\n".join(parts)

    def plot(self, path) -> None:
        """Saves a figure: utilization over VM steps, and lane use per source line."""
        from pcbatch.profiling import plot  # imports matplotlib: only when asked

        plot.save(self, path)


def _row(*, executions, lanes, capacity, seconds, **key) -> dict:
    return {
        **key,
        "executions": executions,
        "mean_active_lanes": lanes / executions if executions else 0.0,
        "utilization": lanes / capacity if capacity else 0.0,
        "active_lanes": lanes,
        "lanes": capacity,
        "seconds": seconds,
    }


_COLUMNS = (
    ("executions", "executions", "{:d}"),
    ("mean_active_lanes", "mean lanes", "{:.1f}"),
    ("utilization", "utilization", "{:.3f}"),
    ("seconds", "time (ms)", "{:.2f}"),
)


def _format_table(rows: list, key: str) -> str:
    first = [key] + (["line"] if key == "block" else [])
    header = first + [title for _, title, _ in _COLUMNS]
    body = []
    for row in rows:
        cells = [str(row[k]) for k in first]
        for name, _, fmt in _COLUMNS:
            value = row[name]
            if name == "seconds":
                value = None if value is None else value * 1000
            cells.append("" if value is None else fmt.format(value))
        body.append(cells)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    text_columns = len(first)

    def line(cells):
        return "  ".join(
            c.ljust(w) if i < text_columns else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return "\n".join(line(cells) for cells in [header, *body])


_active: list = []


def current() -> Profile | None:
    """The innermost active profile, or None."""
    return _active[-1] if _active else None


def labels_counted(prof: Profile | None) -> frozenset | None:
    """The primitive labels whose blocks ``prof`` counts (`counting`); None: every block."""
    return getattr(prof, "labels_counted", None)


@contextlib.contextmanager
def counting(labels):
    """`profile`, for pcbatch's own use, counting only the blocks that run a primitive
    labelled in ``labels`` (NUTS's gradient): a run may then skip the counts of the other
    blocks, which cost JAX's sweep on a GPU a quarter of NUTS's time. Inside a user's
    `profile`, every block is counted, so that theirs misses nothing."""
    with profile() as prof:
        if len(_active) == 1:
            prof.labels_counted = frozenset(labels)
        yield prof


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
