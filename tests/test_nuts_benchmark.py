"""benchmarks/nuts.py at a tiny size: every row prints, the lockstep baselines' included
(a changed ESS call once broke their rows and nothing ran the script)."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests import tiers

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks", "nuts.py")


@tiers.slow
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("jax", "blackjax", "numpyro")),
    reason="needs jax, blackjax and numpyro (the bench extra)",
)
def test_every_sampler_prints_its_row():
    samplers = ["numpy", "blackjax", "numpyro", "gradient"]
    done = subprocess.run(
        [sys.executable, SCRIPT, "--backends", ",".join(samplers), "--chains", "2",
         "--warmup", "0", "--samples", "5", "--target", "logistic"],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split()[0] for line in done.stdout.splitlines() if re.match(r"\w+ +2 ", line)]
    assert rows == samplers, done.stdout
