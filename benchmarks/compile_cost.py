"""Where a first call's time goes on JAX: per workload, CPU seconds and the program's size.

    PYTHONPATH=. python benchmarks/compile_cost.py [--only fib,nuts] [--repeats 3] [--nuts-dim 100]

For each workload, a fresh ``pcbatch.Context`` and a fresh backend, and each stage of
the first call measured with ``time.process_time`` (CPU seconds of this process, all its
threads: far less sensitive to other processes' load than wall time):

- ``front``: pcbatch's compiler (parsing, passes, type inference, lowering) up to the
  lowered program, the rest of the first call outside JAX's stages below;
- ``trace``: JAX tracing the staged machine (`pcbatch.vm.staged`) to a jaxpr;
- ``lower``: the jaxpr lowered to StableHLO;
- ``xla``: XLA's compile of that module;
- sizes: StableHLO ops and ``while`` ops of the lowered module; HLO instructions,
  computations, fusions (about one kernel each on CPU) and ``while`` loops of the
  optimized module.

Beside each pcbatch row, where one exists, the same stages for the loop written by hand
(``benchmarks/loops.py``'s ``jax.jit(jax.vmap(...lax.while_loop...))``) and for NUTS,
BlackJAX's (``jax.jit(jax.vmap(one_chain))``, if blackjax imports); ``ratio`` is the
pcbatch row's trace+lower+xla over the hand-written one's. ``--repeats`` takes the
minimum over that many fresh builds, each stage taken back to back in this one process.
Workloads: ``loops.py``'s Collatz, Newton, McCarthy 91 and Fibonacci; the corpus's
even/odd, Ackermann and the NUTS-shaped tree (`pcbatch.examples`); NUTS with a fixed
step size on the 100-D correlated Gaussian (``--nuts-dim``), 8 chains, 2 draws.
``--backend tensorflow`` measures pcbatch on TF-XLA instead (trace: the tf.function's
graph; xla: its compile and first run; the hand-written rows stay JAX).

A tiny jitted function runs first, so that JAX's one-time start-up costs no workload.

Figures, 2026-11-26 (the 2-core development VM, loaded by other sessions: CPU seconds
move by 10-20% between runs, so each pair below was taken back to back, the code
before this session's changes (commit 05701e0) and after, twice, default options).
``total``: the first call's CPU seconds; ``fus``: fusions of the optimized HLO;
``ratio``: trace+lower+xla over the hand-written loop's (BlackJAX's for NUTS).

    workload       total before -> after   fus before -> after   ratio before -> after
    collatz        0.54, 0.56 -> 0.30, 0.30    22 -> 14          3.01, 2.96 -> 1.72, 1.82
    newton         0.51, 0.52 -> 0.30, 0.30    25 -> 17          2.68, 2.75 -> 1.56, 1.66
    mccarthy91     0.45, 0.48 -> 0.36, 0.35    20 -> 19          2.54, 2.52 -> 2.30, 2.29
    fib            0.71, 0.68 -> 0.58, 0.53    34 -> 33          2.06, 1.89 -> 1.84, 1.79
    even_odd       0.60, 0.62 -> 0.48, 0.45    32 -> 30
    ackermann      0.67, 0.62 -> 0.58, 0.51    34 -> 33
    trajectories   1.18, 1.16 -> 1.05, 0.97    82 -> 81
    nuts100       12.00, 12.29 -> 9.36, 9.30  692 -> 513          2.75, 2.55 -> 1.92, 2.01

TF-XLA (``--backend tensorflow``, same machine, back to back): Collatz 1.25 -> 0.83 s
(20 -> 14 fusions), Fibonacci 1.45 -> 1.37 s (31 fusions).

The hand-written loops' first calls: 0.15-0.18 s (Collatz, Newton, McCarthy 91), 0.27-0.30
s (Fibonacci); BlackJAX's NUTS 4.2-4.7 s. XLA's compile is most of every first call, and
it grows with the kernels (fusions): NUTS's 513 are mostly masked register writes (one
per register a block writes), the binary dispatch tree's scalar predicates (71) and the
blocks' program-counter updates. What moved the figures: a profile's counters counted
once per step rather than in every block (NUTS: 178 kernels); a loop whose blocks run in
one fixed order needing no per-step policy (Collatz, Newton: 8 kernels, and a cheaper
step); no program-counter stack without calls; no XLA compile of the blank state (0.1 s
of every small program's first call, in ``front``).

Sizes later the same day (``eqns``: the jaxpr's equations, inner jaxprs included;
deterministic, unlike the seconds), before -> after copy coalescing
(`pcbatch.passes.coalesce`) and a four-way dispatch tree on JAX (since reverted to
the binary one: slower warm steps, `JaxBackend.TREE_FAN_OUT`), as fusions / optimized HLO
instructions / eqns: nuts100 513 / 14,359 / 3,950 -> 468 / 12,241 / 3,837 (while loops
73 -> 58); collatz 14 / 232 / 66 -> 13 / 217 / 64; newton 17 / 210 / 45 -> 16 / 195 / 43;
mccarthy91 19 / 306 / 93 -> 18 / 284 / 91; fib 33 / 644 / 241 -> 31 / 586 / 237. Tried
and not kept: a variable's leaves of one dtype and shape stacked in one register
(``[batch, k, ...]``, one masked select per group): nuts100 498 -> 433 fusions and
12,736 -> 10,556 HLO instructions, but XLA's compile took 7-9% longer in three
alternating runs (the stacks' concatenates).

Later still (nuts10: ``--nuts-dim 10``, CPU s, the machine loaded, old and new code
alternating): XLA compiles each distinct kernel once (60 identical masked selects compile
in 0.05 s, 60 differing only in a constant in 1.2 s), so what a compile costs follows
the distinct fused computations: nuts10 has 444 fusions but 203 distinct ones (181 up
to constants), BlackJAX's 187 fusions. By ``perf``, XLA's time goes to LLVM (about 45%),
the fusion emitters (20%), HLO passes (20%, while-loop trip-count analysis and copy
insertion the largest) and thunk emission. Found and fixed: NUTS's type inference ran
the gradient eagerly on a dummy state, 11 XLA compiles of single operations (nuts10
front 1.28, 1.36 -> 0.89, 0.99 s; `pcbatch.mcmc.gradients.ARRAY_RESULTS`), and after
the run 8 compiles of slices of its outputs, now cut on the host (front 1.45, 1.52 ->
0.70, 0.62 s for both). Measured, not kept: the blank state as an argument for NUTS too (a 16 MiB
bound: 16 kernels fewer, XLA 5.98, 5.94, 6.05 -> 5.98, 5.84, 6.43 s); program-counter
targets as runtime scalars rather than constants (15 distinct kernels fewer, no faster);
``block_choice="flat"`` (38 loops, not 73: XLA 6.23, 6.35 -> 5.63, 5.22 s, but a step
tests every block's predicate); XLA options: ``xla_disable_hlo_passes`` of the while-loop
passes (within noise), ``xla_backend_optimization_level=0`` (6.25 -> 4.77 s, unoptimized
kernels), ``xla_cpu_use_fusion_emitters=false`` (6.2-6.7 -> 5.1-5.7 s, slower kernels:
docs/user-guide.md). Across processes JAX's persistent compilation cache keeps the staged
program (docs/user-guide.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys
import time

import numpy as np

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import pcbatch  # noqa: E402
from pcbatch.backends.jax import JaxBackend  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loops  # noqa: E402

# ---------------------------------------------------------------------------
# Measuring one jitted function's stages


@dataclasses.dataclass
class Stages:
    trace: float = 0.0
    lower: float = 0.0
    xla: float = 0.0
    total: float = 0.0  # the whole first call (or build), every stage included
    stablehlo_ops: int = 0
    stablehlo_whiles: int = 0
    hlo_instructions: int = 0
    hlo_computations: int = 0
    fusions: int = 0
    whiles: int = 0
    jaxpr_eqns: int = 0

    @property
    def staged(self) -> float:
        return self.trace + self.lower + self.xla

    def add(self, other: Stages) -> None:
        for field in dataclasses.fields(self):
            if field.name != "total":
                setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


_INSTRUCTION = re.compile(r"^\s+(ROOT )?%?[\w.\-]+ = ")
_COMPUTATION = re.compile(r"^(ENTRY )?%?[\w.\-]+ .*\{\s*$")


def hlo_sizes(stages: Stages, lowered, compiled) -> None:
    """Counts of the lowered (StableHLO) and optimized (HLO) modules into ``stages``."""
    mlir = lowered.as_text()
    stages.stablehlo_ops = sum(1 for line in mlir.splitlines() if "stablehlo." in line)
    stages.stablehlo_whiles = mlir.count("stablehlo.while")
    _count_hlo(stages, compiled.as_text() or "")


def _count_hlo(stages: Stages, hlo: str) -> None:
    lines = hlo.splitlines()
    stages.hlo_instructions = sum(1 for line in lines if _INSTRUCTION.match(line))
    stages.hlo_computations = sum(1 for line in lines if _COMPUTATION.match(line))
    stages.fusions = sum(1 for line in lines if _INSTRUCTION.match(line) and " fusion(" in line)
    stages.whiles = sum(1 for line in lines if _INSTRUCTION.match(line) and " while(" in line)


def jaxpr_equations(jaxpr) -> int:
    """The equations of a jaxpr and of every jaxpr inside it (each inner one counted
    where it appears)."""
    total = 0
    for eqn in jaxpr.eqns:
        total += 1
        for param in eqn.params.values():
            for inner in param if isinstance(param, (tuple, list)) else [param]:
                inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's
                if hasattr(inner, "eqns"):
                    total += jaxpr_equations(inner)
    return total


def staged_build(function, args, stages: Stages):
    """``jax.jit(function)`` traced, lowered and compiled for ``args``, each stage timed."""
    clock = time.process_time
    start = clock()
    traced = jax.jit(function).trace(*args)
    traced_at = clock()
    lowered = traced.lower()
    lowered_at = clock()
    compiled = lowered.compile()
    compiled_at = clock()
    stages.trace += traced_at - start
    stages.lower += lowered_at - traced_at
    stages.xla += compiled_at - lowered_at
    stages.jaxpr_eqns += jaxpr_equations(traced.jaxpr.jaxpr)
    hlo_sizes(stages, lowered, compiled)
    return compiled


@contextlib.contextmanager
def recording_jit(stages: Stages):
    """``JaxBackend.jit`` replaced for the block: each function it compiles is built with
    `staged_build` on its first call, its stages added to ``stages``."""
    original = JaxBackend.jit

    def jit(self, function):
        built = {}

        def call(*args):
            if any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves(args)):
                return jax.jit(function)(*args)  # inside a caller's trace
            if "compiled" not in built:
                one = Stages()
                built["compiled"] = staged_build(function, args, one)
                stages.add(one)
            return built["compiled"](*args)

        return call

    JaxBackend.jit = jit
    try:
        yield
    finally:
        JaxBackend.jit = original


@contextlib.contextmanager
def recording_tf_jit(stages: Stages):
    """The same for ``TensorFlowBackend.jit`` with XLA: ``trace``, the tf.function's graph;
    ``xla``, its first run (XLA's compile, then the run itself, small here); sizes of the
    optimized HLO only."""
    import tensorflow as tf

    from pcbatch.backends.tensorflow import TensorFlowBackend

    original = TensorFlowBackend.jit

    def jit(self, function):
        call = original(self, function)
        built = {}

        def first(inputs, *rest):
            if built:
                return call(inputs, *rest)
            built["done"] = True
            clock = time.process_time
            inputs = tf.nest.map_structure(tf.convert_to_tensor, inputs)
            start = clock()
            call.traced.get_concrete_function(inputs, *rest)
            traced_at = clock()
            result = call(inputs, *rest)
            stages.trace += traced_at - start
            stages.xla += clock() - traced_at
            ir = call.traced.experimental_get_compiler_ir(inputs, *rest)
            _count_hlo(stages, ir(stage="optimized_hlo"))
            return result

        return first

    TensorFlowBackend.jit = jit
    try:
        yield
    finally:
        TensorFlowBackend.jit = original


# ---------------------------------------------------------------------------
# Workloads: loops.py's, and programs of the test corpus (tests/programs) as Python

MOD = 1_000_003


def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


def ack(m, n):
    if m == 0:
        return n + 1
    if n == 0:
        return ack(m - 1, 1)
    return ack(m - 1, ack(m, n - 1))


def build_tree(depth, x):
    """A doubly recursive tree build with a data-dependent early stop, like NUTS's."""
    if depth == 0:
        value = (x * 1103 + 12345) % MOD
        return value, value % 7 == 0
    left, stop = build_tree(depth - 1, x)
    if stop:
        return left, stop
    right, stop = build_tree(depth - 1, (x + left) % MOD)
    total = (left + 3 * right) % MOD
    return total, stop or total % 11 == 0


def trajectories(x, n_traj):
    """A loop of tree builds of growing depth: NUTS's shape (`pcbatch.examples`)."""
    acc = 0
    for i in range(n_traj):
        value, _ = build_tree(i % 4, x)
        acc = (acc + value) % MOD
        x = (x + value + 1) % MOD
    return acc, x


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    pcbatch_call: callable  # (backend) -> None: one first call, fresh Context
    hand_build: callable | None  # (stages) -> None: the hand-written contender's build


def _loop_case(work: loops.Workload, count: int) -> Case:
    rng = np.random.default_rng(0)
    inputs = work.inputs(rng, count, np.int64, np.float64)

    def pcbatch_call(backend):
        fn = pcbatch.Context().batch(work.one)
        options = {"backend": backend}
        if work.depth is not None:
            options["max_stack_depth"] = work.depth
        np.asarray(fn(inputs, **options))

    def hand_build(stages):
        staged_build(jax.vmap(work.lax_one), (jax.device_put(inputs),), stages)

    return Case(work.name, pcbatch_call, hand_build)


def _python_case(name: str, functions, args: list, depth: int) -> Case:
    """``functions[0]`` (calling the others), batched by a fresh Context."""

    def pcbatch_call(backend):
        ctx = pcbatch.Context()
        batched = [ctx.batch(f) for f in functions]
        batched[0](*args, backend=backend, max_stack_depth=depth)

    return Case(name, pcbatch_call, None)


def _nuts_case(dim: int, chains: int) -> Case:
    from pcbatch.demo import correlated_gaussian
    from pcbatch.mcmc import nuts

    mean, cov, _ = correlated_gaussian(dim)
    precision = np.linalg.inv(cov)

    def log_prob(x):
        import jax.numpy as jnp

        centered = x - jnp.asarray(mean, x.dtype)
        return -0.5 * jnp.sum(centered * jnp.matmul(jnp.asarray(precision, x.dtype), centered))

    start = np.random.RandomState(1).normal(size=(chains, dim))  # float64, as x64 is on

    def pcbatch_call(backend):
        import jax.numpy as jnp

        nuts.sample(
            log_prob, jnp.asarray(start), num_samples=2, num_warmup=0, seed=0, step_size=0.1,
            progress_bar=False, backend=backend,
        )

    def blackjax_build(stages):
        import blackjax
        import jax.numpy as jnp

        def one_chain(key, position):
            kernel = blackjax.nuts(log_prob, step_size=0.1, inverse_mass_matrix=jnp.ones(dim))
            state = kernel.init(position)

            def draw(state, key):
                state, info = kernel.step(key, state)
                return state, (state.position, info.num_integration_steps)

            return jax.lax.scan(draw, state, jax.random.split(key, 2))[1]

        keys = jax.random.split(jax.random.PRNGKey(0), chains)
        staged_build(jax.vmap(one_chain), (keys, jnp.asarray(start)), stages)

    try:
        import blackjax  # noqa: F401
    except ImportError:
        blackjax_build = None
    return Case(f"nuts{dim}", pcbatch_call, blackjax_build)


def cases(opts) -> list:
    scale = opts.scale
    found = [_loop_case(w, max(1, int(w.count * scale))) for w in loops.WORKLOADS]
    rng = np.random.RandomState(0)
    found += [
        _python_case("even_odd", [is_even, is_odd], [rng.randint(0, 30, size=64)], 40),
        _python_case(
            "ackermann", [ack], [rng.randint(0, 3, size=64), rng.randint(0, 4, size=64)], 64
        ),
        _python_case(
            "trajectories", [trajectories, build_tree],
            [rng.randint(0, 100, size=64), rng.randint(1, 6, size=64)], 12,
        ),
    ]
    found.append(_nuts_case(opts.nuts_dim, 8))
    if opts.only:
        wanted = set(opts.only.split(","))
        found = [c for c in found if c.name in wanted or c.name.rstrip("0123456789") in wanted]
    return found


# ---------------------------------------------------------------------------
# The table


def measure_pcbatch(case: Case, backend_name: str) -> Stages:
    stages = Stages()
    if backend_name == "jax":
        backend, patch = JaxBackend(), recording_jit(stages)
    else:
        from pcbatch.backends.tensorflow import TensorFlowBackend

        backend, patch = TensorFlowBackend(jit_compile=True), recording_tf_jit(stages)
    start = time.process_time()
    with patch:
        case.pcbatch_call(backend)
    stages.total = time.process_time() - start
    return stages


def measure_hand(case: Case) -> Stages | None:
    if case.hand_build is None:
        return None
    stages = Stages()
    start = time.process_time()
    case.hand_build(stages)
    stages.total = time.process_time() - start
    return stages


def best(runs: list) -> Stages:
    """Per stage, the minimum over ``runs`` (sizes are the same in each)."""
    out = dataclasses.replace(runs[0])
    for field in ("trace", "lower", "xla", "total"):
        setattr(out, field, min(getattr(r, field) for r in runs))
    return out


def row(label: str, s: Stages, ratio: str = "") -> str:
    front = s.total - s.staged
    return (
        f"{label:<22} {front:>6.2f} {s.trace:>6.2f} {s.lower:>6.2f} {s.xla:>6.2f} "
        f"{s.total:>6.2f} {s.stablehlo_ops:>6} {s.stablehlo_whiles:>5} {s.hlo_instructions:>6} "
        f"{s.hlo_computations:>5} {s.fusions:>5} {s.whiles:>5} {s.jaxpr_eqns:>6} {ratio:>6}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--scale", type=float, default=0.01, help="of loops.py's input counts")
    parser.add_argument("--nuts-dim", type=int, default=100)
    parser.add_argument("--backend", choices=("jax", "tensorflow"), default="jax")
    parser.add_argument("--no-hand", action="store_true", help="pcbatch rows only")
    opts = parser.parse_args()
    jax.jit(lambda x: x + 1)(np.float64(1.0))  # JAX's start-up, outside every workload
    print(
        f"{'workload':<22} {'front':>6} {'trace':>6} {'lower':>6} {'xla':>6} {'total':>6} "
        f"{'shlo':>6} {'swhl':>5} {'hlo':>6} {'comps':>5} {'fus':>5} {'whl':>5} {'eqns':>6} "
        f"{'ratio':>6}"
    )
    for case in cases(opts):
        mine = best([measure_pcbatch(case, opts.backend) for _ in range(opts.repeats)])
        hand = None
        if not opts.no_hand and case.hand_build is not None:
            hand = best([measure_hand(case) for _ in range(opts.repeats)])
        ratio = f"{mine.staged / hand.staged:.2f}" if hand is not None else ""
        print(row(f"{case.name} pcbatch-{opts.backend}", mine, ratio), flush=True)
        if hand is not None:
            contender = "blackjax" if case.name.startswith("nuts") else "jax-vmap"
            print(row(f"{case.name} {contender}", hand), flush=True)


if __name__ == "__main__":
    main()
