"""``Profile.plot(path)``: utilization over VM steps and lane use per source line.

Needs matplotlib (``pip install pcbatch[plot]``); draws on a `Figure` directly
(no pyplot), so it touches no global plotting state and needs no display.
Top panel: the fraction of lanes active at each VM step (NumPy runs record the
series; a profile of staged runs only has totals, and says so). Bottom panel:
per user source line, lane-executions used (active threads) and idle (lanes
whose thread was elsewhere), most executed lines first.
"""

from __future__ import annotations

MAX_LINES = 25  # bars in the per-line chart


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            "Profile.plot needs matplotlib; install it with the 'plot' extra: "
            "pip install 'pcbatch[plot]' (or pip install matplotlib)"
        ) from None
    return Figure


def save(prof, path) -> None:
    Figure = _figure_class()
    lines = prof.line_table()[:MAX_LINES]
    fig = Figure(figsize=(9, 4 + 0.25 * len(lines)), layout="constrained")
    over_steps, per_line = fig.subplots(2, 1, height_ratios=[1, 1 + 0.08 * len(lines)])
    _draw_series(over_steps, prof)
    _draw_lines(per_line, lines)
    fig.savefig(path)


def _draw_series(ax, prof) -> None:
    series = prof.utilization_series
    ax.set_title(
        f"lane utilization over VM steps (mean {prof.lane_utilization:.3f}, "
        f"occupancy {prof.occupancy:.3f})"
    )
    averaged = f" (each point averages {series.stride})" if series.stride > 1 else ""
    ax.set_xlabel("VM step" + averaged)
    ax.set_ylabel("active lanes / lanes")
    ax.set_ylim(0, 1.05)
    if len(series):
        ax.plot(series.steps(), series.points, linewidth=0.8)
    else:
        ax.text(0.5, 0.5, "no per-step series (staged backends record totals only)",
                ha="center", va="center", transform=ax.transAxes)


def _draw_lines(ax, lines: list) -> None:
    ax.set_title("lane-executions per source line")
    if not lines:
        ax.text(0.5, 0.5, "no source lines recorded", ha="center", va="center",
                transform=ax.transAxes)
        return
    names = [row["line"] for row in reversed(lines)]
    used = [row["active_lanes"] for row in reversed(lines)]
    idle = [row["lanes"] - row["active_lanes"] for row in reversed(lines)]
    ax.barh(names, used, label="active")
    ax.barh(names, idle, left=used, label="idle", alpha=0.5)
    ax.set_xlabel("lanes x executions")
    ax.legend(loc="lower right")
