"""Test-wide settings: every compilation in the suite runs the IR verifier between passes;
the slow tier runs only with ``--slow`` (see `tests.tiers`); no Hypothesis test depends
on wall time (no deadline, no too-slow health check); after each test module the shared
backends drop what was compiled for it (memory)."""

import gc
import os

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter out

from pcbatch.passes import pipeline  # noqa: E402
from tests import tiers  # noqa: E402
from tests.backends import COMPILED_NAMES  # noqa: E402

pipeline.VERIFY_BY_DEFAULT = True

# A test fails only when the code is wrong, never because the machine is busy.
settings.register_profile(
    "pcbatch", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("pcbatch")


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help="also run the slow tier: long fuzz samples, long NUTS runs, large programs",
    )
    parser.addoption(
        "--every-backend",
        action="store_true",
        default=False,
        help="with --slow: run each NUTS feature test on both compiled backends, not one "
        "in turn (tests.tiers.numpy_fast)",
    )
    parser.addoption(
        "--skip-backend",
        action="append",
        default=[],
        metavar="NAME",
        help="leave out the cases parametrized with this backend (CI's second oldest-"
        "dependency environment skips what its first already ran on the same NumPy)",
    )


def pytest_configure(config):
    tiers.SLOW = config.getoption("--slow")
    tiers.EVERY_BACKEND = config.getoption("--every-backend")


#: the modules that cost the most CPU (``--durations``, 2026-11-27), most first: they run
#: first, so that the two xdist workers end on many short tests and finish together
#: (worksteal hands out contiguous runs of the list, and steals from their ends). A
#: module's tests stay together: what one compiles is released when it ends.
HEAVY_FIRST = [
    "tests/reliability/test_fuzz.py",
    "tests/mcmc/test_posteriors.py",
    "tests/test_docs.py",
    "tests/mcmc/test_nuts_outsider.py",
    "tests/mcmc/test_nuts.py",
    "tests/mcmc/test_nuts_adaptation.py",
    "tests/mcmc/test_nuts_transforms.py",
    "tests/mcmc/test_pyro_models.py",
    "tests/mcmc/test_nuts_composable.py",
    "tests/mcmc/test_nuts_kernel.py",
    "tests/mcmc/test_nuts_models.py",
    "tests/mcmc/test_nuts_torch.py",
    "tests/backends_tests/test_sharding.py",
]


def _heaviness(item) -> int:
    module = item.nodeid.split("::", 1)[0]
    return HEAVY_FIRST.index(module) if module in HEAVY_FIRST else len(HEAVY_FIRST)


def _backend_of(item) -> str | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    names = [value for key, value in params.items() if "backend" in key]
    return next((name for name in names if isinstance(name, str)), None)


def _deselect(config, items, leave_out) -> None:
    left_out = [item for item in items if leave_out(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not leave_out(item)]


def pytest_collection_modifyitems(config, items):
    items.sort(key=_heaviness)  # stable: the other modules keep their order
    skipped = set(config.getoption("--skip-backend"))
    if skipped:
        _deselect(config, items, lambda item: _backend_of(item) in skipped)
    if not tiers.SLOW:
        _deselect(config, items, lambda item: item.get_closest_marker("slow") is not None)
        left_out = set(tiers.compiled_in_turn(items, _backend_of, COMPILED_NAMES))
        _deselect(config, items, lambda item: item in left_out)
    if not tiers.EVERY_BACKEND:
        _deselect(config, items, lambda item: item.get_closest_marker("every_backend")
                  is not None)


def pytest_collection_finish(session):
    # What exists now (the libraries, the test modules and their parameters) lives for
    # the whole session: frozen, later full collections skip its 600,000 objects
    # (0.23 s each here).
    gc.freeze()


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    """After each test module: the shared backends forget the programs compiled for it.

    The suite's backends live for the whole session (`tests.backends.backend`), and so
    do the Contexts of the programs' modules (imported once): kept, every compiled run
    (megabytes of XLA or TensorFlow code) stays until the worker exits, past 12 GB per
    worker with ``--slow``. A module's tests still share what they compile."""
    yield
    from pcbatch import api
    from tests import backends

    for backend in [*backends._INSTANCES.values(), *api._SHARED.values()]:
        cache = getattr(backend, "compile_cache", None)
        if cache is not None:
            cache.clear()
    if _resident_bytes() > COLLECT_ABOVE:
        # Compiled programs sit in reference cycles, which only a full collection frees;
        # one costs 1-4 s in a worker that has compiled much, 94 CPU-s over the fast
        # tier when run after every module, so it runs only once memory has grown.
        gc.collect()


#: a worker's resident memory past which a module's end runs a full garbage collection
COLLECT_ABOVE = 1 << 31  # 2 GiB


def _resident_bytes() -> int:
    """This process's resident memory (Linux's /proc); past `COLLECT_ABOVE` elsewhere, so
    that every module's end collects there."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return COLLECT_ABOVE + 1
