"""The Python examples in README.md and docs/ run as written."""

from __future__ import annotations

import pathlib
import re
import runpy

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _examples():
    for path in DOCS:
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S)):
            if re.search(r"^(import|from) pcbatch", block, re.M):
                yield pytest.param(block, id=f"{path.name}-{i}")


@pytest.mark.parametrize("code", list(_examples()))
def test_example_runs(code, tmp_path):
    # Batched functions are compiled from source, so the example runs from a file.
    script = tmp_path / "example.py"
    script.write_text(code)
    runpy.run_path(str(script), run_name="__main__")
