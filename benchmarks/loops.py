"""Loops against loops written by hand: issue 28's table, all contenders in one process.

Four workloads, each a function for ONE example written as plain Python (below):

- ``collatz``: Collatz step counts of 100,000 starts in [1, 100,000);
- ``newton``: Newton's square root of 100,000 values in [1, 1e6), a while loop that
  runs until the iterate stops decreasing;
- ``mccarthy91``: McCarthy's 91 function, recursive, over 10,000 values in [0, 200];
- ``fib``: naive recursive Fibonacci, ``fib(n - 1) + fib(n - 2)``, for 1,000 values of
  n in [15, 20].

Contenders: that function batched by pcbatch on JAX (``pcbatch-jax``; with another
``JaxBackend(block_choice=...)`` than the platform's: ``pcbatch-jax-loops``,
``pcbatch-jax-switch``, ``pcbatch-jax-sweep``), on TensorFlow
with XLA (``pcbatch-tf``), on Torch (``pcbatch-torch``: the CPU, or CUDA with
``--platform gpu``) and on NumPy (``pcbatch-numpy``); a loop written by hand as
``jax.jit(jax.vmap(...lax.while_loop...))`` (``jax-vmap``: McCarthy 91 as its counter
loop, Fibonacci with an explicit stack); the function called on each example in a plain
Python loop (``python``); and hand-masked NumPy (``numpy-masked``: a while loop over
the whole array with boolean masks, Fibonacci with an explicit stack per example).

Columns: ``warm s``, the median of ``--repeats`` whole-batch calls after the first, the
contenders taking turns (inputs already on the device; the result fetched as a NumPy
array); ``first s``, the first call, tracing and compilation included (each contender
gets a fresh ``pcbatch.Context`` or a fresh ``jax.jit``); ``ratio``, warm time over the
warm time of the hand-written loop named in ``vs`` (``jax-vmap`` for the JAX, TensorFlow,
Torch and Python rows, ``numpy-masked`` for the NumPy rows); ``check``, whether the result
equals the plain Python result (a mismatch is printed with its input, and the script
exits with status 1). Issue 28's targets follow the table.

Inputs come from fixed seeds. By default integers are int64 and floats float64, with
``jax_enable_x64`` on (the issue's figures are float64); ``--no-x64`` runs int32 and
float32 everywhere (Python then iterates over NumPy scalars, so that its arithmetic is
float32 too). TensorFlow, when a ``pcbatch-tf`` row is asked for, is imported before
anything runs, so every JAX first call is taken with it loaded (in backends.py's
measurements that slowed JAX's first calls); leave ``pcbatch-tf`` out of
``--contenders`` for JAX first calls without it. A contender whose library does not
import is skipped with a note.

Usage: ``python benchmarks/loops.py [--repeats N] [--scale S] [--only NAME]
[--contenders pcbatch-jax,jax-vmap,...] [--platform cpu|gpu] [--no-x64]``;
``--scale 0.01 --repeats 1`` is a smoke run (``--repeats 0``: first calls and checks
only).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.metadata
import os
import pathlib
import platform
import statistics
import sys
import time
from collections.abc import Callable

# Run as a script, this folder comes first on sys.path, where ``import torch`` would find
# benchmarks/torch.py: the folder leaves the path first.
_HERE = pathlib.Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != _HERE]

import numpy as np  # noqa: E402

import pcbatch  # noqa: E402

FIB_MAX_N = 20
FIB_STACK = FIB_MAX_N + 2  # the explicit stacks: pending n, strictly decreasing


# ---------------------------------------------------------------------------
# The programs, written for one example. `python` calls them as they are; pcbatch
# batches these same functions.


def collatz(x):
    steps = 0
    while x != 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def newton(a):
    x = a + 1.0  # above sqrt(a), so the iterates decrease until they converge
    y = 0.5 * (x + a / x)
    while y < x:
        x = y
        y = 0.5 * (x + a / x)
    return x


def mccarthy91(n):
    if n > 100:
        return n - 10
    return mccarthy91(mccarthy91(n + 11))


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


# ---------------------------------------------------------------------------
# Loops written by hand for JAX: one example's lax.while_loop (vmapped and jitted
# by `_prepare_jax_vmap`).


def collatz_lax(x):
    from jax import lax
    from jax import numpy as jnp

    def step(state):
        x, steps = state
        return jnp.where(x % 2 == 0, x // 2, 3 * x + 1), steps + 1

    return lax.while_loop(lambda s: s[0] != 1, step, (x, jnp.zeros_like(x)))[1]


def newton_lax(a):
    from jax import lax

    def step(state):
        _, x = state
        return x, 0.5 * (x + a / x)

    x = a + 1.0
    return lax.while_loop(lambda s: s[1] < s[0], step, (x, 0.5 * (x + a / x)))[0]


def mccarthy91_lax(n):
    """The counter form: ``depth`` counts the calls still to make."""
    from jax import lax
    from jax import numpy as jnp

    def step(state):
        n, depth = state
        high = n > 100
        return jnp.where(high, n - 10, n + 11), jnp.where(high, depth - 1, depth + 1)

    return lax.while_loop(lambda s: s[1] > 0, step, (n, jnp.ones_like(n)))[0]


def fib_lax(n):
    """An explicit stack of the n still to expand; the leaves' values are summed."""
    from jax import lax
    from jax import numpy as jnp

    def step(state):
        stack, top, total = state
        v = stack[top - 1]
        leaf = v < 2
        stack = stack.at[top - 1].set(v - 1).at[top].set(v - 2)
        return stack, jnp.where(leaf, top - 1, top + 1), total + jnp.where(leaf, v, 0)

    stack = jnp.zeros(FIB_STACK, n.dtype).at[0].set(n)
    start = (stack, jnp.ones((), jnp.int32), jnp.zeros_like(n))
    return lax.while_loop(lambda s: s[1] > 0, step, start)[2]


# ---------------------------------------------------------------------------
# Loops written by hand for NumPy: the whole batch at once, masked.


def collatz_masked(x):
    steps = np.zeros_like(x)
    active = x != 1
    while active.any():
        x = np.where(active, np.where(x % 2 == 0, x // 2, 3 * x + 1), x)
        steps += active
        active = x != 1
    return steps


def newton_masked(a):
    x = a + 1.0
    y = 0.5 * (x + a / x)
    active = y < x
    while active.any():
        x = np.where(active, y, x)
        y = 0.5 * (x + a / x)
        active = y < x
    return x


def mccarthy91_masked(n):
    depth = np.ones_like(n)
    active = depth > 0
    while active.any():
        high = n > 100
        n = np.where(active, np.where(high, n - 10, n + 11), n)
        depth = np.where(active, np.where(high, depth - 1, depth + 1), depth)
        active = depth > 0
    return n


def fib_masked(n):
    rows = np.arange(len(n))
    stack = np.zeros((len(n), FIB_STACK), n.dtype)
    stack[:, 0] = n
    top = np.ones(len(n), np.intp)
    total = np.zeros_like(n)
    live = top > 0
    while live.any():
        last = np.maximum(top - 1, 0)
        v = stack[rows, last]
        leaf = live & (v < 2)
        split = live & (v >= 2)
        total += np.where(leaf, v, 0)
        stack[rows, last] = np.where(split, v - 1, v)
        stack[rows[split], last[split] + 1] = v[split] - 2
        top += split
        top -= leaf
        live = top > 0
    return total


# ---------------------------------------------------------------------------
# Workloads and contenders.


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    count: int  # inputs at --scale 1
    one: Callable  # the per-example function
    lax_one: Callable  # the hand-written per-example lax loop
    masked: Callable  # the hand-masked NumPy batch function
    inputs: Callable  # (rng, count, int dtype, float dtype) -> inputs
    depth: int | None = None  # pcbatch's max_stack_depth
    jax_target: float = 1.5  # issue 28: pcbatch-jax warm over jax-vmap warm


WORKLOADS = (
    Workload(
        "collatz", 100_000, collatz, collatz_lax, collatz_masked,
        lambda rng, n, i, f: rng.integers(1, 100_000, size=n).astype(i),
    ),
    Workload(
        "newton", 100_000, newton, newton_lax, newton_masked,
        lambda rng, n, i, f: rng.uniform(1.0, 1e6, size=n).astype(f),
    ),
    Workload(
        "mccarthy91", 10_000, mccarthy91, mccarthy91_lax, mccarthy91_masked,
        lambda rng, n, i, f: rng.integers(0, 201, size=n).astype(i),
        depth=12,  # 10 suffices for [0, 200]
    ),
    Workload(
        "fib", 1_000, fib, fib_lax, fib_masked,
        lambda rng, n, i, f: rng.integers(15, FIB_MAX_N + 1, size=n).astype(i),
        depth=FIB_MAX_N + 4,  # as backends.py (FIB_MAX_N suffices)
        jax_target=0.5,  # "at least 2x ahead of the hand-written stack"
    ),
)


def _pcbatch_call(work, backend, x, to_numpy=np.asarray):
    """A fresh Context, so that the first call compiles the function from its source."""
    fn = pcbatch.Context().batch(work.one)
    options = {"backend": backend}
    if work.depth is not None:
        options["max_stack_depth"] = work.depth
    return lambda: to_numpy(fn(x, **options))


def _prepare_pcbatch_jax(work, inputs, libs, block_choice=None):
    from pcbatch.backends.jax import JaxBackend

    backend = JaxBackend(block_choice=block_choice)
    return _pcbatch_call(work, backend, libs["jax"].device_put(inputs))


def _prepare_pcbatch_tf(work, inputs, libs):
    from pcbatch.backends.tensorflow import TensorFlowBackend

    backend = TensorFlowBackend(jit_compile=True)
    return _pcbatch_call(work, backend, libs["tensorflow"].constant(inputs))


def _prepare_pcbatch_torch(work, inputs, libs):
    torch, device = libs["torch"]
    x = torch.as_tensor(inputs, device=device)
    # .cpu() waits for the device's queue, as np.asarray does for JAX's
    return _pcbatch_call(work, pcbatch.TorchBackend(device=device), x, lambda t: t.cpu().numpy())


def _prepare_pcbatch_numpy(work, inputs, libs):
    return _pcbatch_call(work, pcbatch.NumpyBackend(), inputs)


def _prepare_jax_vmap(work, inputs, libs):
    jax = libs["jax"]
    fn, x = jax.jit(jax.vmap(work.lax_one)), jax.device_put(inputs)
    return lambda: np.asarray(fn(x))


def _prepare_python(work, inputs, libs):
    # 64 bits: Python's own int and float; 32 bits: NumPy scalars, so floats stay float32
    values = inputs.tolist() if inputs.dtype.itemsize == 8 else list(inputs)
    return lambda: np.array([work.one(v) for v in values], dtype=inputs.dtype)


def _prepare_numpy_masked(work, inputs, libs):
    return lambda: work.masked(inputs)


#: name -> (the library it needs, or None; prepare(work, inputs, libs) -> call)
CONTENDERS = {
    "pcbatch-jax": ("jax", _prepare_pcbatch_jax),
    # the same with a JaxBackend(block_choice=...) other than the platform's default
    # (the tree of loops on a CPU, the sweep on a GPU)
    "pcbatch-jax-loops": ("jax", functools.partial(_prepare_pcbatch_jax, block_choice="loops")),
    "pcbatch-jax-switch": ("jax", functools.partial(_prepare_pcbatch_jax, block_choice="switch")),
    "pcbatch-jax-sweep": ("jax", functools.partial(_prepare_pcbatch_jax, block_choice="sweep")),
    "pcbatch-tf": ("tensorflow", _prepare_pcbatch_tf),
    "pcbatch-torch": ("torch", _prepare_pcbatch_torch),
    "jax-vmap": ("jax", _prepare_jax_vmap),
    "python": (None, _prepare_python),
    "pcbatch-numpy": (None, _prepare_pcbatch_numpy),
    "numpy-masked": (None, _prepare_numpy_masked),
}

#: the hand-written loop each contender's warm time is divided by
RATIO_AGAINST = {
    "pcbatch-jax": "jax-vmap",
    "pcbatch-jax-loops": "jax-vmap",
    "pcbatch-jax-switch": "jax-vmap",
    "pcbatch-jax-sweep": "jax-vmap",
    "pcbatch-tf": "jax-vmap",
    "pcbatch-torch": "jax-vmap",
    "jax-vmap": "jax-vmap",
    "python": "jax-vmap",
    "pcbatch-numpy": "numpy-masked",
    "numpy-masked": "numpy-masked",
}

#: issue 28's targets: (contender, against, what); bound 1.5, pcbatch-jax warm the workload's
TARGETS = (
    ("pcbatch-jax", "jax-vmap", "warm"),
    ("pcbatch-jax", "jax-vmap", "first"),
    ("pcbatch-tf", "pcbatch-jax", "warm"),
    ("pcbatch-numpy", "numpy-masked", "warm"),
)


# ---------------------------------------------------------------------------
# Libraries and the machine.


def _start_jax(opts):
    if opts.platform == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    else:
        # JAX_PLATFORMS=gpu asks for every GPU platform (cuda, rocm, ...) and fails on the
        # ones not installed: let JAX choose, then insist that it chose a GPU
        os.environ.pop("JAX_PLATFORMS", None)
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # TF needs some too
    import jax

    jax.config.update("jax_enable_x64", opts.x64)
    device = jax.devices()[0]  # fails here, not in a timed call
    if opts.platform == "gpu" and device.platform not in ("gpu", "cuda", "rocm"):
        raise RuntimeError(f"JAX found no GPU (its first device is {device})")
    return jax


def _start_tensorflow(opts):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if opts.platform == "cpu":
        tf.config.set_visible_devices([], "GPU")
    elif not gpus:
        raise RuntimeError("TensorFlow sees no GPU")
    for gpu in gpus if opts.platform == "gpu" else ():
        tf.config.experimental.set_memory_growth(gpu, True)
    return tf


def _start_torch(opts):
    import torch

    if opts.platform == "gpu" and not torch.cuda.is_available():
        raise RuntimeError("Torch sees no CUDA device")
    return torch, "cuda" if opts.platform == "gpu" else "cpu"


def _libraries(opts, names) -> dict:
    """The libraries the chosen contenders need: module, or None with a printed note."""
    starters = {"jax": _start_jax, "tensorflow": _start_tensorflow, "torch": _start_torch}
    needed = {CONTENDERS[name][0] for name in names} - {None}
    libs = {}
    for lib in sorted(needed):
        try:
            libs[lib] = starters[lib](opts)
        except Exception as err:  # a missing or broken install: skip, never crash
            libs[lib] = None
            users = ", ".join(n for n in names if CONTENDERS[n][0] == lib) or "none"
            print(f"note: {lib} not usable ({type(err).__name__}: {err}); skipping: {users}")
    return libs


def _usable(name: str, libs: dict) -> bool:
    lib = CONTENDERS[name][0]
    return lib is None or libs.get(lib) is not None


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _print_header(opts, libs) -> None:
    jax = libs.get("jax")
    kind = repr(jax.devices()[0].device_kind) if jax else "none"
    packages = ("numpy", "jax", "jaxlib", "tensorflow", "torch", "pcbatch")
    versions = ", ".join(f"{p} {_version(p)}" for p in packages)
    bits = "int64/float64, jax x64 on" if opts.x64 else "int32/float32, jax x64 off"
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, jax device {kind}; "
        f"python {platform.python_version()}, {versions}"
    )
    print(
        f"load average {_load()}; --platform {opts.platform}, {bits}, --scale {opts.scale}, "
        f"--repeats {opts.repeats}"
    )


# ---------------------------------------------------------------------------
# Measuring.


def _inputs(work, opts):
    count = max(1, round(work.count * opts.scale))
    ints, floats = (np.int64, np.float64) if opts.x64 else (np.int32, np.float32)
    return work.inputs(np.random.default_rng(0), count, ints, floats)


def _mismatch(got, want, inputs) -> str | None:
    """None if ``got`` equals ``want``; otherwise what differs, with the input."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, want {want.shape}"
    bad = np.flatnonzero(got != want)
    if bad.size == 0:
        return None
    i = bad[0]
    return (
        f"{bad.size} of {want.size} differ; first at index {i}, input {inputs[i]!r}: "
        f"got {got[i]!r}, want {want[i]!r}"
    )


def _first_calls(work, inputs, names, libs) -> tuple:
    """Per contender: its warm-call function and first-call seconds, and the checks."""
    want = _prepare_python(work, inputs, libs)()
    calls, firsts, checks = {}, {}, {}
    for name in names:
        try:
            call = CONTENDERS[name][1](work, inputs, libs)
            start = time.perf_counter()
            got = call()
            firsts[name] = time.perf_counter() - start
        except Exception as err:
            checks[name] = "FAILED"
            print(f"\n!!! FAILED: {work.name} {name}: {type(err).__name__}: {err}\n")
            continue
        problem = _mismatch(got, want, inputs)
        checks[name] = "ok" if problem is None else "MISMATCH"
        if problem is not None:
            print(f"\n!!! MISMATCH: {work.name} {name} against plain Python: {problem}\n")
        calls[name] = call
    return calls, firsts, checks


def _warm_times(calls: dict, repeats: int) -> dict:
    """Per contender: the median of ``repeats`` warm calls, the contenders taking turns
    (none if ``repeats`` is 0)."""
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items() if t}


# ---------------------------------------------------------------------------
# Printing.

HEADER = (
    f"{'workload':<20} {'contender':<18} {'warm s':>9} {'first s':>8} {'ratio':>8}  "
    f"{'vs':<13} check"
)


def _number(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


def _print_rows(label, names, warm, firsts, checks) -> None:
    for name in names:
        if name not in checks:
            continue
        against = RATIO_AGAINST[name]
        ratio = None
        if name in warm and against in warm:
            ratio = warm[name] / warm[against]
        print(
            f"{label:<20} {name:<18} {_number(warm.get(name), '.4f'):>9} "
            f"{_number(firsts.get(name), '.2f'):>8} {_number(ratio, '.2f', 'x'):>8}  "
            f"{against:<13} {checks[name]}"
        )


def _print_targets(measured: dict) -> None:
    """``measured``: workload -> (warm, firsts, Workload)."""
    print("\nissue 28's targets: ratio, bound, met")
    for work_name, (warm, firsts, work) in measured.items():
        for name, against, what in TARGETS:
            times = warm if what == "warm" else firsts
            if name not in times or against not in times:
                continue
            bound = work.jax_target if (name, what) == ("pcbatch-jax", "warm") else 1.5
            ratio = times[name] / times[against]
            met = "yes" if ratio <= bound else "no"
            what = f"{name} / {against}, {what}"
            print(f"  {work_name:<11} {what:<38} {ratio:>7.2f}x <= {bound:.2f}x  {met}")


# ---------------------------------------------------------------------------


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=5, help="warm calls (median); 0: first calls only"
    )
    parser.add_argument("--scale", type=float, default=1.0, help="input counts times this")
    parser.add_argument("--only", default="", help="workloads whose name contains this")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help="a subset")
    parser.add_argument("--platform", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument(
        "--x64", action=argparse.BooleanOptionalAction, default=True,
        help="int64/float64 with jax_enable_x64 (default); --no-x64: int32/float32",
    )
    opts = parser.parse_args(argv)
    opts.names = [n for n in opts.contenders.split(",") if n]
    unknown = sorted(set(opts.names) - set(CONTENDERS))
    if unknown:
        parser.error(f"unknown contenders {unknown}; known: {', '.join(CONTENDERS)}")
    return opts


def main(argv=None) -> int:
    """Prints the table; returns 1 if a contender failed or disagreed with plain Python."""
    opts = _parse(argv)
    libs = _libraries(opts, opts.names)
    _print_header(opts, libs)
    names = [n for n in CONTENDERS if n in opts.names and _usable(n, libs)]
    print(f"\n{HEADER}\n{'-' * len(HEADER)}", flush=True)
    measured, failed = {}, False
    for work in WORKLOADS:
        if opts.only not in work.name:
            continue
        inputs = _inputs(work, opts)
        calls, firsts, checks = _first_calls(work, inputs, names, libs)
        warm = _warm_times(calls, opts.repeats)
        _print_rows(f"{work.name} x{len(inputs)}", names, warm, firsts, checks)
        sys.stdout.flush()
        measured[work.name] = (warm, firsts, work)
        failed |= any(check != "ok" for check in checks.values())
    _print_targets(measured)
    print(f"\nload average {_load()} at the end")
    if failed:
        print("\n!!! some contender FAILED or disagreed with plain Python (see above)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
