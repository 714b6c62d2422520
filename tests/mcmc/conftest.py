"""The NUTS tests parametrized over every backend write their targets for NumPy, JAX and
TensorFlow (``xp`` namespaces, per-backend set-up) and skip Torch, saying so; NUTS on
Torch is tested against the same targets on NumPy in test_nuts_torch.py."""

import pathlib

import pytest

_REASON = ("these NUTS tests' targets are written for NumPy, JAX and TensorFlow; NUTS on "
           "Torch is tested in tests/mcmc/test_nuts_torch.py")


def pytest_collection_modifyitems(config, items):
    # The hook sees the whole session's items, not only this folder's.
    here = pathlib.Path(__file__).parent
    for item in items:
        if here not in item.path.parents:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "torch" in (params.get("backend"), params.get("backend_name")):
            item.add_marker(pytest.mark.skip(reason=_REASON))
