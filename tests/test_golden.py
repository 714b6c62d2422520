"""Golden IR text: each program's IR after every pass, compared with tests/golden/*.txt.

Regenerate after an intended change with ``PCBATCH_REGEN_GOLDEN=1 python -m pytest
tests/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import pcbatch
from pcbatch.ir import printer
from pcbatch.passes import pipeline
from pcbatch.vm import runner
from tests.programs.corpus import CORPUS_BY_NAME

GOLDEN_DIR = pathlib.Path(__file__).parent / "golden"
PROGRAMS = {
    "fib": [np.array([5])],
    "even_odd": [np.array([5])],
    "gcd_swap": [np.array([4]), np.array([6])],
    "tail_sum": [np.array([3])],
    "collatz": [np.array([7])],
    "self_update": [np.array([1])],
}


def _render(name: str) -> str:
    program = CORPUS_BY_NAME[name].build()
    sig = runner.signature_of(PROGRAMS[name])
    sections = [f"=== source (structured)\n{printer.format_program(program)}"]
    for pass_name, _ in pipeline.PASSES:
        program_after = pipeline.compile_program(
            program, sig, pcbatch.NumpyBackend(), stop_after=pass_name
        )
        sections.append(f"=== after {pass_name}\n{printer.format_program(program_after)}")
    return "\n".join(sections)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_golden_ir(name):
    text = _render(name)
    path = GOLDEN_DIR / f"{name}.txt"
    if os.environ.get("PCBATCH_REGEN_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"missing {path}; run with PCBATCH_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"IR for {name} changed; see the regen note in this file"
