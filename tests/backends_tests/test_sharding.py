"""The batch sharded over a device mesh (``JaxBackend(mesh=..., axis=...)``).

Several CPU devices exist only if ``XLA_FLAGS=--xla_force_host_platform_device_count``
is set before JAX starts, so the multi-device checks run in fresh processes
(``sharded_worker.py``, one per check; the rest of the suite keeps one device).
Each reports its cases as JSON lines; a case fails here with the worker's traceback.
The oracle is the one-device JAX run (bit for bit) and ``dry_run``.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax.sharding import Mesh  # noqa: E402

import pcbatch  # noqa: E402
from pcbatch.backends.jax import JaxBackend  # noqa: E402
from pcbatch.examples import collatz, fib  # noqa: E402
from tests import backends, tiers  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKER = pathlib.Path(__file__).with_name("sharded_worker.py")
DEVICES = 4
#: set to 1 to compare every corpus program bit for bit with the one-device run
FULL = os.environ.get("PCBATCH_FULL_SHARDING_TESTS") == "1"
#: the fast tier shards every 8th corpus program (and every one of pcbatch/examples.py);
#: the slow tier (``--slow``) all of them
CORPUS_EVERY = tiers.pick(8, 1)


def _env(devices: int) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"  # forced host devices, even where a GPU is present
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def _start(log: pathlib.Path, *args, devices: int = DEVICES) -> subprocess.Popen:
    # Output to files, not pipes: workers run side by side, and one that filled a
    # pipe nobody reads yet would stall.
    with open(f"{log}.out", "w") as out, open(f"{log}.err", "w") as err:
        process = subprocess.Popen(
            [sys.executable, str(WORKER), *map(str, args)],
            env=_env(devices),
            cwd=ROOT,
            stdout=out,
            stderr=err,
        )
    process.log = log
    return process


def _cases(process: subprocess.Popen, timeout: float = 580) -> dict:
    """The worker's cases -> error (None if passed); fails if the worker itself failed."""
    process.wait(timeout=timeout)
    out, err = (pathlib.Path(f"{process.log}.{kind}").read_text() for kind in ("out", "err"))
    cases = {}
    for line in out.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            cases[record["case"]] = record["error"]
    assert process.returncode == 0 and cases, f"worker failed:\n{out[-3000:]}\n{err[-3000:]}"
    return cases


def _assert_all_pass(cases: dict) -> None:
    failed = {case: error for case, error in cases.items() if error is not None}
    assert not failed, "\n".join(f"--- {case}\n{error}" for case, error in failed.items())


CHECKS = ["layout", "flags", "hlo", "nuts"]
#: checks of the slow tier only: NUTS with sharded chains compiles the sampler twice
SLOW_CHECKS = {"nuts"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    """Every worker started at once (each compiles on one core; CI has two)."""
    logs, port = tmp_path_factory.mktemp("sharding"), _free_port()
    started = {
        check: [_start(logs / check, check, DEVICES)]
        for check in CHECKS
        if tiers.SLOW or check not in SLOW_CHECKS
    }
    identical = "all" if FULL else "examples"
    started["corpus"] = [
        _start(logs / "corpus", "corpus", DEVICES, 7, identical, CORPUS_EVERY)
    ]
    # jax.distributed.initialize: two CPU processes of two devices each, on loopback
    started["multiprocess"] = [
        _start(logs / f"process{p}", "multiprocess", p, 2, port, 2, devices=2) for p in (0, 1)
    ]
    yield started
    for processes in started.values():
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize(
    "check", [pytest.param(c, marks=tiers.slow if c in SLOW_CHECKS else ()) for c in CHECKS]
)
def test_sharded_runs(workers, check):
    """Results laid out as asked, per-shard counts, flags, no collectives in the loop, NUTS."""
    _assert_all_pass(_cases(workers[check][0]))


def test_the_corpus_sharded_equals_the_one_device_run(workers):
    """Batch 7 on 4 devices: uneven shards, one of them with a single thread."""
    cases = _cases(workers["corpus"][0])
    assert len(cases) >= 50 // CORPUS_EVERY
    _assert_all_pass(cases)


def test_two_processes_on_loopback_equal_one_process(workers):
    """The same calls in two processes under ``jax.distributed`` equal one process's run."""
    for process in workers["multiprocess"]:
        cases = _cases(process)
        assert len(cases) == 2
        _assert_all_pass(cases)


# ---------------------------------------------------------------------------
# In this process: a mesh of this process's one device, and bad arguments


def _one_device_mesh(*names):
    return Mesh(np.array(jax.devices()[:1]).reshape((1,) * len(names)), names)


def test_a_one_device_mesh_gives_the_unsharded_results():
    backends.backend("jax")  # float64 like the other JAX tests
    backend = JaxBackend(mesh=_one_device_mesh("batch"))
    n = np.arange(9)
    with pcbatch.profile() as prof:
        out = fib(n, backend=backend)
    with pcbatch.profile() as alone:
        expected = fib(n, backend=backends.backend("jax"))
    np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))
    assert dict(prof.shard_block_executions) == {0: alone.block_executions}
    assert prof.lane_utilization == alone.lane_utilization


def test_a_mesh_with_several_axes_splits_along_the_named_one():
    backends.backend("jax")
    backend = JaxBackend(mesh=_one_device_mesh("hosts", "gpus"), axis=("hosts", "gpus"))
    x = np.arange(1, 6)
    np.testing.assert_array_equal(np.asarray(collatz(x, backend=backend)), collatz(x, dry_run=True))


@pytest.mark.parametrize(
    "options, error, words",
    [
        ({"mesh": "cpu"}, TypeError, "jax.sharding.Mesh"),
        ({"mesh": "two-axes"}, ValueError, "name the one to split the batch over"),
        ({"mesh": "one-axis", "axis": "rows"}, ValueError, "'rows' is not an axis"),
        ({"axis": "batch"}, ValueError, "pass mesh= too"),
    ],
)
def test_bad_sharding_options_are_clear_errors(options, error, words):
    meshes = {"one-axis": _one_device_mesh("batch"), "two-axes": _one_device_mesh("a", "b")}
    if isinstance(options.get("mesh"), str):
        options = dict(options, mesh=meshes.get(options["mesh"], options["mesh"]))
    with pytest.raises(error, match=words):
        JaxBackend(**options)
