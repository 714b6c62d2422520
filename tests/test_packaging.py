"""What ships: the wheel holds exactly the package, typed, with its license; every public
module names its API in ``__all__``, and every name there exists."""

from __future__ import annotations

import email.parser
import importlib
import importlib.metadata
import importlib.util
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

import pcbatch

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: The modules the documentation names as API, each with the library it needs.
PUBLIC_MODULES = {
    "pcbatch": None,
    "pcbatch.api": None,
    "pcbatch.errors": None,
    "pcbatch.callbacks": None,
    "pcbatch.profiling": None,
    "pcbatch.profiling.recorder": None,
    "pcbatch.examples": None,
    "pcbatch.demo": None,
    "pcbatch.dsl": None,
    "pcbatch.fuzz": None,
    "pcbatch.fuzz.programs": None,
    "pcbatch.fuzz.pack": None,
    "pcbatch.fuzz.eager": None,
    "pcbatch.mcmc": None,
    "pcbatch.mcmc.nuts": None,
    "pcbatch.mcmc.diagnostics": None,
    "pcbatch.mcmc.random": None,
    "pcbatch.backends.numpy": None,
    "pcbatch.backends.batched_array": None,
    "pcbatch.backends.jax": "jax",
    "pcbatch.backends.tensorflow": "tensorflow",
    "pcbatch.vm.reference": None,
    "pcbatch.ir.printer": None,
    # the seed's module names (tfp.experimental.auto_batching's; dsl is above)
    "pcbatch.allocation_strategy": None,
    "pcbatch.frontend": None,
    "pcbatch.instructions": None,
    "pcbatch.liveness": None,
    "pcbatch.lowering": None,
    "pcbatch.numpy_backend": None,
    "pcbatch.stackless": None,
    "pcbatch.tf_backend": "tensorflow",
    "pcbatch.type_inference": None,
    "pcbatch.virtual_machine": None,
    "pcbatch.xla": None,
}


@pytest.mark.parametrize("name", sorted(PUBLIC_MODULES))
def test_every_public_module_names_its_api(name):
    if PUBLIC_MODULES[name] is not None:
        pytest.importorskip(PUBLIC_MODULES[name])
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    missing = [attribute for attribute in exported if not hasattr(module, attribute)]
    assert not missing, f"{name}.__all__ names what it lacks: {missing}"


def test_the_seed_module_names_are_public_modules():
    assert {f"pcbatch.{name}" for name in pcbatch._SEED_MODULES} <= set(PUBLIC_MODULES)


def test_the_compiled_backends_are_exported_where_their_library_is_installed():
    for name, library in (("JaxBackend", "jax"), ("TensorFlowBackend", "tensorflow")):
        installed = importlib.util.find_spec(library) is not None
        assert (name in pcbatch.__all__) == installed, name


def test_the_package_is_typed():
    assert (ROOT / "pcbatch" / "py.typed").is_file()


# -- the wheel ---------------------------------------------------------------------


def _pyproject() -> dict:
    text = (ROOT / "pyproject.toml").read_text()
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads(text)


def _builds_without_isolation() -> bool:
    """Whether this environment's setuptools can build the wheel, with no download."""
    (required,) = [r for r in _pyproject()["build-system"]["requires"] if "setuptools" in r]
    try:
        installed = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major = lambda version: int(version.split(".")[0])
    return major(installed) >= major(required.split(">=")[1])


@pytest.mark.network  # pip's isolated build downloads setuptools unless it is installed
def test_the_wheel_holds_exactly_the_package_typed_with_its_license(tmp_path):
    # Built from a copy: setuptools leaves build/ in the source tree, and a stale
    # build/lib would put deleted modules into the next wheel.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT / "pcbatch", source / "pcbatch", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q"]
    command += ["-w", str(tmp_path / "dist")]
    if _builds_without_isolation():
        command.append("--no-build-isolation")
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, (
        "pip could not build the wheel (offline? deselect this test with -m 'not network'):\n"
        + done.stdout
        + done.stderr
    )
    project = _pyproject()["project"]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name == f"pcbatch-{project['version']}-py3-none-any.whl"
    assert project["version"] == pcbatch.__version__

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"pcbatch-{project['version']}.dist-info"
        shipped_license = archive.read(f"{info}/licenses/LICENSE")
        metadata = email.parser.Parser().parsestr(archive.read(f"{info}/METADATA").decode())

    package = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "pcbatch").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    package.add("pcbatch/py.typed")
    dist_info = {
        f"{info}/{name}"
        for name in ("METADATA", "WHEEL", "RECORD", "top_level.txt", "licenses/LICENSE")
    }
    assert names - dist_info == package, (
        f"in the wheel only: {sorted(names - dist_info - package)}; "
        f"missing from it: {sorted(package - names)}"
    )
    assert dist_info <= names, sorted(dist_info - names)
    assert shipped_license == (ROOT / "LICENSE").read_bytes()

    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Requires-Python"] == project["requires-python"]
    assert "Typing :: Typed" in metadata.get_all("Classifier")
    assert set(metadata.get_all("Provides-Extra")) >= {"jax", "tf", "all"}
    assert metadata["Author"] or metadata["Author-email"]
    assert metadata["Description-Content-Type"] == "text/markdown"
