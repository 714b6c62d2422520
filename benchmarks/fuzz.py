"""Long differential fuzz runs: random programs, every backend against the per-example run.

    python benchmarks/fuzz.py --programs 10000 --backends numpy stackless returns_first
    python benchmarks/fuzz.py --programs 200 --backends jax tensorflow --seed 7
    python benchmarks/fuzz.py --programs 10000 --pack 40   # packed: see pcbatch.fuzz.pack
    python benchmarks/fuzz.py --programs 10000 --pack 4 --backends jax --seconds 480
    python benchmarks/fuzz.py --programs 2000 --pack 4 --backends jax_eager tensorflow_eager

Program ``k`` of a run is ``pcbatch.fuzz.generate(RandomChooser(seed + k))``, so a
failure is reproduced by its printed seed alone (``--seed S --programs 1``). Prints
each mismatch or error with the program's source, then the counts per backend, and
exits 1 if anything failed. JAX and TensorFlow compile every new program (about a
second each), so give them fewer programs.

``--pack P`` checks programs ``P`` at a time, each pack one module (programs of one
event shape, ``--members`` rows each, shuffled together; `pcbatch.fuzz.pack`). A
packed failure names the culprit program's seed, re-runs it alone, and prints it
shrunk to a small program (``--no-shrink`` skips that). On NumPy packing saves the
per-call overhead (about 4x); on JAX the compile time grows with the pack's size, so
it saves little; on TensorFlow keep packs small (``--pack 4``): graph building grows
faster than the pack.

Where a compiled backend's time goes (2026-11-26, JAX 0.10 on CPU, a loaded machine,
rough): for a 67-line program, 14 s in all: XLA's compile 7.9 s, tracing the staged
machine 2.7 s (its 119 nested one-trip while loops), lowering 1.2 s, type inference
1.5 s. The compile grows faster than a program's size: one 159-line program of
three functions took 45 s alone, and a pack's compile is led by its largest
program, so larger packs cost less per program (16 programs: 143 s wall with
``--pack 4``, 112 s with ``--pack 16``). LLVM's optimization flags
(``--xla_backend_optimization_level=0``, ``--xla_llvm_disable_expensive_passes``)
and ``JaxBackend(block_choice="flat")`` changed little. TensorFlow with XLA, 4
programs: 26 s in XLA's compile, 24 s tracing (8.5 s of it ``tf.vectorized_map``).
With ``PCBATCH_FUZZ_CACHE=<folder>`` JAX keeps its compiled programs on disk, so a
rerun of the same seeds compiles nothing again. ``--progress`` reports after every
pack, so a run that is stopped can quote its count.

``tensorflow_xla`` is TensorFlow compiled with XLA (``tensorflow`` is graph mode);
``jax_eager`` and ``tensorflow_eager`` run the same staged machine op by op, without
compiling (`pcbatch.fuzz.eager`): about 1 CPU second per program on either (JAX's
compile alone costs about 4, TensorFlow's graph mode more), testing everything but the
compiler. ``torch`` is the Torch backend (eager, on the CPU unless Torch's default
device says otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import pathlib
import sys
import tempfile
import time
import traceback

# benchmarks/torch.py would be ``import torch`` with this folder first on sys.path
_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != _HERE]

import numpy as np  # noqa: E402

from pcbatch.fuzz import eager as fuzz_eager  # noqa: E402
from pcbatch.fuzz import pack as fuzz_pack  # noqa: E402
from pcbatch.fuzz import programs as fuzz  # noqa: E402

BACKENDS = ("numpy", "stackless", "returns_first", "jax", "tensorflow", "tensorflow_xla",
            "torch", "jax_eager", "tensorflow_eager")


def options_for(name: str) -> dict:
    """Call options that select a backend (or a NumPy variant of the machine)."""
    if name == "numpy":
        return {}
    if name == "stackless":
        return {"stackless": True}
    if name == "returns_first":
        return {"schedule": "returns_first"}
    if name.endswith("_eager"):
        return options_for(name[: -len("_eager")])
    if name == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)  # the per-example run is int64/float64
        _persistent_cache(jax)
        from pcbatch.backends.jax import JaxBackend

        return {"backend": JaxBackend()}
    if name in ("tensorflow", "tensorflow_xla"):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        from pcbatch.backends.tensorflow import TensorFlowBackend

        return {"backend": TensorFlowBackend(jit_compile=name == "tensorflow_xla")}
    if name == "torch":
        from pcbatch.backends.torch import TorchBackend

        return {"backend": TorchBackend()}
    raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")


def _persistent_cache(jax) -> None:
    """JAX's compilation cache on disk, if ``PCBATCH_FUZZ_CACHE`` names a folder: a rerun
    of the same seeds (after a fix, or a shrink's retries) compiles nothing twice."""
    folder = os.environ.get("PCBATCH_FUZZ_CACHE")
    if folder:
        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def mode_for(name: str, options: dict):
    """The context a backend's calls run in: eager for the ``_eager`` configs."""
    if name.endswith("_eager"):
        return fuzz_eager.eagerly(options["backend"])
    return contextlib.nullcontext()


def check_one(seed: int, backends: dict, directory: str, batch_size: int) -> list:
    """(backend, seed, what went wrong) for each backend that disagreed on program ``seed``."""
    program = fuzz.generate(fuzz.RandomChooser(seed))
    module = fuzz.load(program, directory)
    args = program.make_args(np.random.RandomState(seed), batch_size)
    failures = []
    for name, options in backends.items():
        try:
            with mode_for(name, options):
                problem = fuzz.mismatch(program, module, args, **options)
        except Exception:  # noqa: BLE001 - any crash is a finding to report
            problem = traceback.format_exc(limit=-3)
        if problem:
            failures.append((name, seed, problem, program.source))
    return failures


def check_packs(seeds: list, backends: dict, directory: str, size: int, members: int,
                shrink: bool, checked=lambda count: None) -> list:
    """Failures, as `check_one` reports them, of programs ``seeds`` checked in packs;
    ``checked(count)`` is told after each pack how many of them are done."""
    by_shape: dict = {}
    for seed in seeds:
        program = fuzz.generate(fuzz.RandomChooser(seed))
        by_shape.setdefault(program.event_shape, []).append((seed, program))
    failures, done = [], 0
    for group in by_shape.values():
        for start in range(0, len(group), size):
            part = group[start:start + size]
            failures += _check_pack(part, backends, directory, members, shrink)
            done += len(part)
            checked(done)
    return failures


def _check_pack(part: list, backends: dict, directory: str, members: int, shrink: bool) -> list:
    packed = fuzz_pack.pack([program for _, program in part])
    module = fuzz.load(packed.program, directory)
    args = packed.make_args([seed for seed, _ in part], members)
    failures = []
    for name, options in backends.items():
        with mode_for(name, options):
            found = _check_pack_on(part, packed, module, args, name, options, directory,
                                   members, shrink)
        failures += found
    return failures


def _check_pack_on(part, packed, module, args, name, options, directory, members,
                   shrink) -> list:
    """`_check_pack`'s failures on one backend."""
    try:
        problem, culprits = fuzz_pack.check(packed, module, args, **options)
    except Exception:  # noqa: BLE001 - any crash is a finding to report
        problem, culprits = traceback.format_exc(limit=-3), []
    if not problem:
        return []
    found = []
    for index in culprits or range(len(part)):  # a crash: any program may be the cause
        seed = part[index][0]
        try:
            alone = fuzz_pack.isolate(packed, index, args, directory, **options)
        except Exception:  # noqa: BLE001 - any crash is a finding to report
            alone = traceback.format_exc(limit=-3)
        if alone is None:
            continue
        source = part[index][1].source
        if shrink:
            source = _shrunk(seed, members, options, directory)
        found.append((name, seed, alone, source))
    if not found:  # every program passes alone: the pack is the finding
        seeds = [s for s, _ in part]
        found.append((name, seeds, f"only when packed: {problem}", packed.program.source))
    return found


def _shrunk(seed: int, members: int, options: dict, directory: str) -> str:
    """Program ``seed``'s smallest failing variant (its rows come from the same seed)."""
    chooser = fuzz.RandomChooser(seed)
    fuzz.generate(chooser)

    def program_of(offsets):
        return fuzz.generate(fuzz.ReplayChooser(offsets))

    def fails(offsets) -> bool:
        program = program_of(offsets)
        args = program.make_args(np.random.RandomState(seed), members)
        try:
            module = fuzz.load(program, directory)
            return fuzz.mismatch(program, module, args, **options) is not None
        except Exception:  # noqa: BLE001 - still failing, if differently
            return True

    return "(shrunk)\n" + program_of(fuzz_pack.shrink(chooser.drawn, fails)).source


def _release_compiled(backends: dict) -> None:
    """Drops the programs compiled so far: no later program reuses them (each has its own
    source), and kept they grow a long JAX run by tens of megabytes per program (20 GB
    after 100 programs in packs of 16)."""
    for options in backends.values():
        cache = getattr(options.get("backend"), "compile_cache", None)
        if cache is not None:
            cache.clear()
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    gc.collect()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--backends", nargs="+", default=["numpy"], choices=BACKENDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=7)
    parser.add_argument("--pack", type=int, default=0, help="programs per packed module")
    parser.add_argument("--members", type=int, default=4, help="batch rows per packed program")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--progress", action="store_true",
                        help="report the count after every chunk (slow backends)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="start no new programs after this long (counts what was checked)")
    args = parser.parse_args(argv)
    backends = {name: options_for(name) for name in args.backends}
    failed: dict = {name: 0 for name in backends}
    # Packs form within a chunk of seeds, one event shape at a time.
    chunk = args.pack * 2 * len(fuzz.EVENT_SHAPES) if args.pack else 1
    start, checked = time.monotonic(), 0
    with tempfile.TemporaryDirectory() as directory:
        for k in range(0, args.programs, chunk):
            if args.seconds is not None and time.monotonic() - start > args.seconds:
                break
            seeds = list(range(args.seed + k, args.seed + min(k + chunk, args.programs)))
            if args.pack:
                def report(done, k=k):
                    if args.progress:  # a slow backend: a count a stopped run can quote
                        print(f"{k + done} programs checked, {sum(failed.values())} failures "
                              f"so far, {time.monotonic() - start:.0f} s", file=sys.stderr,
                              flush=True)

                found = check_packs(seeds, backends, directory, args.pack, args.members,
                                    not args.no_shrink, report)
            else:
                found = check_one(seeds[0], backends, directory, args.batch_size)
            for name, seed, problem, source in found:
                failed[name] += 1
                print(f"--- {name}, seed {seed}: {problem}\n{source}", flush=True)
            checked = k + len(seeds)
            _release_compiled(backends)
            if checked // 500 > k // 500 or args.progress:
                print(f"{checked} programs checked, {sum(failed.values())} failures",
                      file=sys.stderr, flush=True)
    for name in backends:
        print(f"{name}: {checked} programs, {failed[name]} mismatches or errors")
    return 1 if any(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
