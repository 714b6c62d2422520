"""Differential fuzzing: random programs, batched on every backend, against the per-example run.

The programs come from `pcbatch.fuzz` (see its docstring for the subset covered);
Hypothesis draws every decision, so a failing program shrinks to a small one.
The draws are derandomized, so CI sees the same programs on every run; long
random runs are ``benchmarks/fuzz.py``. Besides them, `pcbatch.fuzz.pack` packs
several programs into one module whose batch runs them side by side (divergence
across programs), and a packed failure is narrowed to one program and shrunk.

JAX and TensorFlow: compiling costs seconds per program even packed (XLA on CPU
compiles every fused kernel with LLVM), so most of their programs run the same
staged machine eagerly (`pcbatch.fuzz.eager`: ``jax.disable_jit``, TensorFlow's eager
functions), which checks the VM's blocks, stacks, item assignments and dispatch op
by op on that backend's arrays; each eager test checks that the staged machine ran
once per call. What eager mode cannot test is the compiler, so a smaller compiled
sample stays: Hypothesis examples (JAX; TensorFlow graph mode), JAX packs and
TensorFlow XLA packs. Graph-mode packs are gone: the slowest of all per program.

Measured on a busy 2-core machine (load 6-10), wall seconds per program in this
file: TensorFlow graph packs 57, XLA packs 26, JAX compiled packs 11, TensorFlow eager
10, JAX eager 5 (op-by-op dispatch, with ``jnp`` indexing and dtype conversions
decomposed into many primitives, is most of it). In CPU seconds a JAX pack of 4
spends about 4 per program, 3.5 of them in XLA's compile; XLA options for a cheaper
compile (``xla_backend_optimization_level=0``, ``xla_llvm_disable_expensive_passes``)
saved nothing measurable. Eager is thus about 2x cheaper per program than compiled on
JAX and 5x cheaper than graph mode on TensorFlow: with graph packs dropped, the file
checks 62 JAX and 40 TensorFlow programs (30 and 17 before) in a little less time
(``--durations``: 950 s with 40 JAX eager programs, so about 990 s with 48, against
1,040 s before, on the same busy machine).

Since JAX's block dispatch became a tree of run-at-most-once loops, a JAX eager
program costs about 1 s on the idle machine (98 s for 100), so the slow tier
(``--slow``, tests/tiers.py) runs 300 JAX eager programs in three parts that xdist
spreads over workers: 314 JAX programs per run.

TensorFlow eager programs cost 3.9 s each while every call of a per-example primitive
traced a new ``tf.vectorized_map`` graph (about 24 ms, twice per primitive in type
inference alone). With type inference tracing one example instead and eager calls
reusing one traced graph per signature, a program costs about 0.7 s, so the slow tier
runs 200 TensorFlow eager programs in two parts: 208 TensorFlow programs per run.

The fast tier (the default) runs every configuration on a small sample: 50 + 15 + 15
NumPy programs through Hypothesis and 40 packed, 9 on JAX (2 compiled via Hypothesis,
3 in a compiled pack, 4 eager) and 8 on TensorFlow (2 in graph mode via Hypothesis, 2
in an XLA pack, 4 eager).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcbatch.fuzz import eager as fuzz_eager
from pcbatch.fuzz import pack as fuzz_pack
from pcbatch.fuzz import programs as fuzz
from tests.backends import BACKEND_NAMES, backend
from tests.tiers import pick

# Examples per configuration: NumPy runs a program in milliseconds; compiled backends
# spend seconds compiling each one (more in benchmarks/fuzz.py). The fast tier checks a
# small sample of every configuration; ``--slow`` (tests/tiers.py) the long one.
EXAMPLES = pick(
    {"numpy": 50, "stackless": 15, "returns_first": 15, "jax": 2, "tensorflow": 2, "torch": 30},
    {"numpy": 150, "stackless": 40, "returns_first": 40, "jax": 6, "tensorflow": 4,
     "torch": 150},
)
# Packed runs: (programs per pack, packs). Compiled, a pack costs about as much as its
# programs one by one, so the compiled packs mainly test programs diverging side by side
# and the compilers (TensorFlow's graph mode, the slowest at ~57 s a program on a busy
# CI machine, keeps only its Hypothesis examples); the ``_eager`` configs run the staged
# machine op by op (module docstring). NumPy checks 200 programs in a few seconds; Torch
# (eager, as NumPy) about as fast.
PACKS = pick(
    {"numpy": (20, 2), "torch": (20, 1), "jax": (3, 1), "tensorflow_xla": (2, 1),
     "jax_eager": (4, 1), "tensorflow_eager": (4, 1)},
    {"numpy": (40, 5), "torch": (40, 5), "jax": (4, 2), "tensorflow_xla": (2, 2),
     "jax_eager": (4, 15), "tensorflow_eager": (4, 15)},
)
EAGER = {"jax_eager": "jax", "tensorflow_eager": "tensorflow"}
# Eager configs may run in parts (``config:part``, seeds 10,000 apart) so workers share
# them. The slow tier's 60 JAX and 60 TensorFlow programs run op by op cost about 100 CPU-s
# each (one part each since 2026-11-27, for CI's time); longer runs are benchmarks/fuzz.py's
# (its counts are in benchmarks/README.md).
PARTS = {"jax_eager": 1, "tensorflow_eager": 1}
_NEEDS = {"numpy": "numpy", "torch": "torch", "jax": "jax", "tensorflow_xla": "tensorflow", **EAGER}
PACK_CONFIGS = [
    f"{config}:{part}" if config in PARTS else config
    for config, name in _NEEDS.items()
    if name in BACKEND_NAMES
    for part in range(PARTS.get(config, 1))
]
MEMBERS = 3  # batch rows per packed program
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
        try:
            problem = fuzz.mismatch(program, module, args, **options)
        finally:
            fuzz.unload(module)
        assert problem is None, f"{problem}\n{program.source}"

    check()


def test_generated_programs_cover_the_subset():
    """The generator reaches every construct the fuzzer claims to cover."""
    sources = "\n".join(fuzz.generate(fuzz.RandomChooser(s)).source for s in range(200))
    for construct in ["elif ", "else:", "while ", "for ", "break", "continue", " and ",
                      " or ", "not (", "np.sum(", "= f0(", "= f1(", "= f2(", "return",
                      "v[::-1]", "np.sum(v)", "v[-", "] += ", "w[np.clip(", "u[np.clip(",
                      "% 2] = ", "w = np.array(w)", "int(w[", "dtype=np.int8", "dtype=np.uint8",
                      "dtype=np.int16", "dtype=np.float32"]:
        assert construct in sources, construct
    shapes = {fuzz.generate(fuzz.RandomChooser(s)).event_shape for s in range(50)}
    assert shapes == set(fuzz.EVENT_SHAPES)


def _packs(count: int, size: int, start: int = 0) -> list:
    """``count`` packs of ``size`` programs (seeds ``start``, ``start + 1``, ...), grouped
    by event shape."""
    by_shape: dict = {}
    seed = start
    while sum(len(g) // size for g in by_shape.values()) < count:
        by_shape.setdefault(fuzz.generate(fuzz.RandomChooser(seed)).event_shape, []).append(seed)
        seed += 1
    groups = [g[i:i + size] for g in by_shape.values() for i in range(0, len(g) - size + 1, size)]
    return groups[:count]


@pytest.fixture(scope="module")
def xla_tensorflow():
    from pcbatch.backends.tensorflow import TensorFlowBackend

    return TensorFlowBackend(jit_compile=True)


@pytest.mark.parametrize("config", PACK_CONFIGS)
def test_packed_programs_batch_like_the_per_example_run(config, fuzz_dir, request):
    config, _, part = config.partition(":")
    size, count = PACKS[config]
    if config == "tensorflow_xla":
        chosen = request.getfixturevalue("xla_tensorflow")
    else:
        chosen = backend(EAGER.get(config, config))
    options = {"backend": chosen}
    eager = config in EAGER
    # Eager configs take programs of their own (seeds from 1000), not the compiled ones.
    start = 1000 + 10_000 * int(part or 0) if eager else 0
    for seeds in _packs(count, size, start=start):
        packed = fuzz_pack.pack([fuzz.generate(fuzz.RandomChooser(s)) for s in seeds])
        module = fuzz.load(packed.program, fuzz_dir)
        args = packed.make_args(seeds, MEMBERS)
        traces = chosen.traces if eager else None
        with fuzz_eager.eagerly(chosen) if eager else contextlib.nullcontext():
            problem, culprits = fuzz_pack.check(packed, module, args, **options)
            alone = {s: fuzz_pack.isolate(packed, i, args, fuzz_dir, **options)
                     for i, s in enumerate(seeds) if i in culprits}
        fuzz.unload(module)
        source = packed.program.source
        assert problem is None, f"{problem}\nprograms (seed: alone) {alone}\n{source}"
        if eager:  # the staged machine itself ran, not a compiled program
            assert chosen.traces == traces + 1


def test_packing_keeps_each_programs_results(fuzz_dir):
    """Row by row, the packed ``main`` returns what its program's own ``f0`` returns."""
    seeds = _packs(1, 4)[0]
    programs = [fuzz.generate(fuzz.RandomChooser(s)) for s in seeds]
    packed = fuzz_pack.pack(programs)
    args = packed.make_args(seeds, MEMBERS)
    assert sorted(np.bincount(args[0]).tolist()) == [MEMBERS] * 4
    assert len(set(args[0][:4].tolist())) > 1  # programs interleave in the batch
    got = fuzz.load(packed.program, fuzz_dir).main(*args)
    for k, program in enumerate(programs):
        rows = args[0] == k
        want = fuzz.load(program, fuzz_dir).f0(*(a[rows] for a in args[1:]), dry_run=True)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g)[rows], w)


def test_isolate_reruns_one_program_alone(fuzz_dir):
    seeds = _packs(1, 3)[0]
    packed = fuzz_pack.pack([fuzz.generate(fuzz.RandomChooser(s)) for s in seeds])
    args = packed.make_args(seeds, MEMBERS)
    assert fuzz_pack.isolate(packed, 1, args, fuzz_dir) is None


def _has_nested_loop(offsets) -> bool:
    """A stand-in failure: the program has a loop inside a loop."""
    source = fuzz.generate(fuzz.ReplayChooser(offsets)).source
    return any(line.startswith(" " * 8) and line.lstrip().startswith(("while ", "for "))
               for line in source.splitlines())


def test_shrink_keeps_the_failure_and_cuts_the_program_down():
    for seed in range(200):
        chooser = fuzz.RandomChooser(seed)
        original = fuzz.generate(chooser).source
        if _has_nested_loop(chooser.drawn):
            break
    before = fuzz.generate(fuzz.ReplayChooser(chooser.drawn)).source
    assert before == original  # replaying the recorded decisions is exact
    small = fuzz_pack.shrink(chooser.drawn, _has_nested_loop)
    after = fuzz.generate(fuzz.ReplayChooser(small)).source
    assert _has_nested_loop(small)
    assert len(after.splitlines()) < len(before.splitlines()) and len(small) < len(chooser.drawn)
