"""Differential fuzzing: random programs, batched on every backend, against the per-example run.

The programs come from `pcbatch.fuzz` (see its docstring for the subset covered);
Hypothesis draws every decision, so a failing program shrinks to a small one.
The draws are derandomized, so CI sees the same programs on every run; long
random runs are ``benchmarks/fuzz.py``. JAX and TensorFlow compile each new
program, so they get few examples.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcbatch import fuzz
from tests.backends import BACKEND_NAMES, backend

# Examples per configuration: NumPy runs a program in milliseconds; compiled backends
# spend seconds compiling each one (more in benchmarks/fuzz.py).
EXAMPLES = {"numpy": 150, "stackless": 40, "returns_first": 40, "jax": 6, "tensorflow": 4}
CONFIGS = [*BACKEND_NAMES, "stackless", "returns_first"]


class _DrawChooser:
    """`pcbatch.fuzz`'s chooser, drawing from Hypothesis (so programs shrink)."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))


@st.composite
def programs(draw) -> fuzz.FuzzProgram:
    return fuzz.generate(_DrawChooser(draw))


def _options(config: str) -> dict:
    if config == "stackless":
        return {"stackless": True}
    if config == "returns_first":
        return {"schedule": "returns_first"}
    return {"backend": backend(config)}


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz_programs"))


@pytest.mark.parametrize("config", CONFIGS)
def test_random_programs_batch_like_the_per_example_run(config, fuzz_dir):
    options = _options(config)

    @settings(
        max_examples=EXAMPLES[config],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(program=programs(), seed=st.integers(0, 2**16), batch_size=st.integers(1, 6))
    def check(program, seed, batch_size):
        module = fuzz.load(program, fuzz_dir)
        args = program.make_args(np.random.RandomState(seed), batch_size)
        problem = fuzz.mismatch(program, module, args, **options)
        assert problem is None, f"{problem}\n{program.source}"

    check()


def test_generated_programs_cover_the_subset():
    """The generator reaches every construct the fuzzer claims to cover."""
    sources = "\n".join(fuzz.generate(fuzz.RandomChooser(s)).source for s in range(200))
    for construct in ["elif ", "else:", "while ", "for ", "break", "continue", " and ",
                      " or ", "not (", "np.sum(", "= f0(", "= f1(", "= f2(", "return",
                      "v[::-1]", "np.sum(v)", "v[-"]:
        assert construct in sources, construct
    shapes = {fuzz.generate(fuzz.RandomChooser(s)).event_shape for s in range(50)}
    assert shapes == set(fuzz.EVENT_SHAPES)
