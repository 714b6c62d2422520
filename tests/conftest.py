"""Test-wide settings: every compilation in the suite runs the IR verifier between passes;
the slow tier runs only with ``--slow`` (see `tests.tiers`); no Hypothesis test depends
on wall time (no deadline, no too-slow health check)."""

import os

from hypothesis import HealthCheck, settings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter out

from pcbatch.passes import pipeline  # noqa: E402
from tests import tiers  # noqa: E402

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


def pytest_configure(config):
    tiers.SLOW = config.getoption("--slow")


def pytest_collection_modifyitems(config, items):
    if tiers.SLOW:
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
