"""What a user sees: the demo's progress and answer, and no warning that pcbatch causes.

Each check runs in a fresh process: TensorFlow logs its warnings from C++ once per
process, and the demo is run as a user runs it.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _python(code: str, tmp_path: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, **env)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
    )


def test_the_demo_shows_progress_without_tqdm_and_the_known_answer(tmp_path):
    # sys.modules["tqdm"] = None: tqdm cannot be imported, as in the base install.
    done = _python(
        "import sys; sys.modules['tqdm'] = None\n"
        "from pcbatch import demo\n"
        "sys.exit(demo.main(['--chains', '8', '--samples', '100', '--warmup', '100',"
        " '--dim', '3']))\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("NUTS draws: ")]
    assert progress[0] == "NUTS draws: 0 of 1,600"
    assert progress[-1].startswith("NUTS draws: 100% (1,600 of 1,600) in ")
    assert len(progress) == 11  # the start, every tenth, the end
    out = done.stdout
    assert "means from -1 to 1, standard deviations from 0.5 to 2" in out
    assert "component     mean  estimate      sd  estimate" in out
    assert "        2    1.000" in out  # the last component's known mean
    assert "estimates agree with the known answer" in out


_CALLS = """
import warnings

import numpy as np

from pcbatch.examples import collatz, fib

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert list(np.asarray(fib(convert(np.arange(8))))) == [0, 1, 1, 2, 3, 5, 8, 13]
    assert int(np.asarray(collatz(convert(np.array([27]))))[0]) == 111
for warning in caught:
    print(f"WARNING {warning.category.__name__} {warning.filename}:{warning.lineno}: "
          f"{warning.message}")
"""


@pytest.mark.parametrize(
    "library, convert",
    [
        ("numpy", "from numpy import asarray as convert"),
        ("jax", "from jax.numpy import asarray as convert"),
        ("tensorflow", "from tensorflow import constant as convert"),
    ],
    ids=["numpy", "jax", "tensorflow"],
)
def test_no_warning_of_pcbatch_reaches_the_user(library, convert, tmp_path):
    """A plain batched call on each backend warns of nothing: no Python warning, and on
    TensorFlow under XLA (the default) no log line from what pcbatch compiles (its
    anchor once was a RandomUniform, for which XLA logs that seeds are ignored)."""
    pytest.importorskip(library)
    done = _python(
        convert + "\n" + _CALLS,
        tmp_path,
        TF_CPP_MIN_LOG_LEVEL="0",  # TensorFlow's warnings shown, as a user sees them
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stdout, done.stdout
    assert "ignore seeds" not in done.stderr, done.stderr
    # absl's warning lines start with "W" and the date; pcbatch's programs cause none
    tf_warnings = [line for line in done.stderr.splitlines() if line[:2] == "W0"]
    assert not tf_warnings, tf_warnings
