"""benchmarks/loops.py at a tiny scale: every contender agrees with plain Python, and a
contender that does not is reported and fails the run."""

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import loops

SCRIPT = os.path.join(os.path.dirname(loops.__file__), "loops.py")


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_smoke_numpy_and_jax_contenders_agree():
    # a process of its own: the script turns on jax_enable_x64 for the whole process
    contenders = "pcbatch-jax,jax-vmap,python,pcbatch-numpy,numpy-masked"
    done = subprocess.run(
        [sys.executable, SCRIPT, "--scale", "0.001", "--repeats", "0",
         "--contenders", contenders],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if re.match(r"\w+ x\d+ ", line)]
    assert len(rows) == 4 * 5
    assert all(row[-1] == "ok" for row in rows), done.stdout


def test_a_wrong_result_is_reported(monkeypatch, capsys):
    wrong = dataclasses.replace(loops.WORKLOADS[0], masked=lambda x: loops.collatz_masked(x) + 1)
    monkeypatch.setattr(loops, "WORKLOADS", (wrong,))
    argv = ["--scale", "0.0001", "--repeats", "1", "--contenders", "python,numpy-masked"]
    assert loops.main(argv) == 1
    out = capsys.readouterr().out
    assert "!!! MISMATCH: collatz numpy-masked against plain Python: 10 of 10 differ" in out


def test_mismatch_names_the_first_bad_input():
    want = np.array([3, 4, 5])
    assert loops._mismatch(want.copy(), want, np.array([7, 8, 9])) is None
    message = loops._mismatch(np.array([3, 0, 5]), want, np.array([7, 8, 9]))
    assert message == (
        "1 of 3 differ; first at index 1, input np.int64(8): got np.int64(0), want np.int64(4)"
    )
