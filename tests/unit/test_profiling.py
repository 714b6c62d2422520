"""The profiler's per-block and per-line tables, its dict, its series and its plot."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import pcbatch
from pcbatch import examples, profiling
from tests import backends


def _profile_collatz(backend_name):
    x = np.array([3, 7, 1, 27, 6])
    with pcbatch.profile() as prof:
        result = examples.collatz(x, backend=backends.backend(backend_name))
    backends.assert_close(result, examples.collatz(x, dry_run=True), backend_name)
    return prof


@backends.backend_param
def test_per_block_and_per_line_tables(backend_name):
    prof = _profile_collatz(backend_name)
    blocks = prof.block_table()
    assert sum(row["executions"] for row in blocks) == prof.block_executions
    for row in blocks:
        assert row["line"].startswith("examples.py:")
        assert 0 < row["utilization"] <= 1
        assert row["mean_active_lanes"] == pytest.approx(row["utilization"] * 5)
        # Wall time is measured by the eager VM (NumPy, Torch) only.
        assert (row["seconds"] is not None) == (backend_name in backends.EAGER_NAMES)
    lines = prof.line_table()
    # The loop's test is code of the entry block (the first test) and of the body block
    # (the test of the back edge, threaded into it): its line adds up both.
    by_block = {r["block"]: r for r in blocks}
    body = next(r for r in blocks if r["block"].startswith("collatz.body"))
    loop_line = max(lines, key=lambda r: r["executions"])
    assert loop_line["executions"] == body["executions"] + by_block["collatz.entry"]["executions"]
    text = str(prof)
    assert text.splitlines()[0] == prof.summary()
    assert "per block:" in text and "per source line:" in text and loop_line["line"] in text


def test_the_dict_keeps_the_summary_keys_and_adds_the_tables():
    prof = _profile_collatz("numpy")
    d = prof.as_dict()
    for key in ("runs", "block_executions", "primitive_executions", "lane_utilization",
                "occupancy", "primitive_counts", "primitive_lanes"):
        assert key in d
    assert d["blocks"] == prof.block_table() and d["lines"] == prof.line_table()
    series = d["utilization_series"]
    assert len(series["steps"]) == len(series["utilization"]) == prof.block_executions
    assert np.mean(series["utilization"]) == pytest.approx(
        sum(r["active_lanes"] for r in d["blocks"]) / (5 * prof.block_executions)
    )


def test_nested_profiles_pass_blocks_and_series_outward():
    with pcbatch.profile() as outer, pcbatch.profile() as inner:
        examples.collatz(np.array([3, 7]))
    assert outer.block_table() == inner.block_table()
    assert outer.utilization_series.points == inner.utilization_series.points


def test_the_series_stays_bounded_and_keeps_its_mean():
    series = profiling.Series()
    values = np.random.RandomState(0).uniform(size=3 * profiling.MAX_SERIES_POINTS + 100)
    for v in values:
        series.add(float(v))
    assert len(series) < profiling.MAX_SERIES_POINTS and series.stride == 4
    covered = len(series) * series.stride
    assert np.mean(series.points) == pytest.approx(np.mean(values[:covered]))
    assert series.steps()[0] == series.stride / 2


def test_without_a_profile_nothing_is_timed(monkeypatch):
    from pcbatch.vm import machine

    def clock():
        raise AssertionError("the VM read the clock with no profile active")

    monkeypatch.setattr(machine.time, "perf_counter", clock)
    assert profiling.current() is None
    np.testing.assert_array_equal(examples.collatz(np.array([3, 7])), [7, 16])
    with pytest.raises(AssertionError, match="read the clock"), pcbatch.profile():
        examples.collatz(np.array([3, 7]))


def test_plot_draws_both_panels(tmp_path):
    pytest.importorskip("matplotlib")
    prof = _profile_collatz("numpy")
    path = tmp_path / "profile.png"
    prof.plot(path)
    assert path.stat().st_size > 1000


def test_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pcbatch\[plot\]"):
        profiling.Profile().plot(tmp_path / "x.png")
