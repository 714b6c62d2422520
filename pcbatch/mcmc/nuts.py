"""The No-U-Turn Sampler over many chains at once: `sample` and `NoUTurnSampler`.

The sampler is `pcbatch.mcmc.program`: NUTS written for one chain, recursively,
batched by pcbatch. This module prepares its inputs (the gradient for the
backend, seeds, step sizes), runs it, and packages the draws with the work it
took (gradient evaluations, utilization).

Example::

    import numpy as np
    from pcbatch.mcmc import nuts

    def value_and_grad(x):          # one chain's state -> (log density, gradient)
        return -0.5 * np.sum(x * x), -x

    result = nuts.sample(None, np.zeros((100, 3)), num_samples=500, num_warmup=300,
                         seed=1, value_and_grad=value_and_grad)
    result.samples.shape            # (500, 100, 3)
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pcbatch import callbacks, profiling
from pcbatch.mcmc import diagnostics, gradients, program, progress

#: the deepest tree allowed: 2**15 leapfrog steps per draw
MAX_SUPPORTED_TREE_DEPTH = 15


@dataclasses.dataclass
class NutsResult:
    """Draws ``[num_samples, num_chains, *event_shape]`` and per-draw, per-chain statistics."""

    samples: Any
    num_leapfrogs: np.ndarray[Any, Any]
    tree_depth: np.ndarray[Any, Any]
    diverging: np.ndarray[Any, Any]
    accept_prob: np.ndarray[Any, Any]
    step_size: np.ndarray[Any, Any]
    inverse_mass: np.ndarray[Any, Any]
    gradient_evaluations: int
    leapfrog_steps: int
    wall_time: float

    @property
    def num_chains(self) -> int:
        return int(self.num_leapfrogs.shape[1])

    @property
    def utilization(self) -> float:
        """Leapfrog steps taken (all chains, warmup included) per batched gradient lane."""
        lanes = self.gradient_evaluations * self.num_chains
        return self.leapfrog_steps / lanes if lanes else 1.0

    @property
    def lockstep_utilization(self) -> float:
        """The bound of a lockstep sampler: per draw, mean over max trajectory length."""
        n = self.num_leapfrogs.astype(np.float64)
        return float(np.mean(n.mean(axis=1) / np.maximum(n.max(axis=1), 1)))

    def ess(self) -> np.ndarray[Any, Any]:
        return diagnostics.effective_sample_size(np.asarray(self.samples))

    def rhat(self) -> np.ndarray[Any, Any]:
        return diagnostics.potential_scale_reduction(np.asarray(self.samples))

    def to_arviz(self) -> Any:
        """The draws and statistics as ArviZ ``InferenceData`` (needs ``pip install arviz``)."""
        try:
            import arviz
        except ImportError:
            raise ImportError("to_arviz() needs ArviZ: pip install 'pcbatch[arviz]'") from None

        def chains_first(a: Any) -> np.ndarray[Any, Any]:
            return np.swapaxes(np.asarray(a), 0, 1)

        stats = {
            "n_steps": self.num_leapfrogs,
            "tree_depth": self.tree_depth,
            "diverging": self.diverging,
            "acceptance_rate": self.accept_prob,
            "step_size": self.step_size,
        }
        return arviz.from_dict(
            posterior={"x": chains_first(self.samples)},
            sample_stats={k: chains_first(v) for k, v in stats.items()},
        )


def sample(
    target_log_prob_fn: Callable[[Any], Any] | None,
    initial_state: Any,
    *,
    num_samples: int,
    num_warmup: int,
    step_size: float = 0.1,
    max_tree_depth: int = 10,
    seed: int,
    backend: Any = None,
    value_and_grad: Callable[[Any], tuple[Any, Any]] | None = None,
    target_accept_prob: float = 0.8,
    first_chain: int = 0,
    first_draw: int = 0,
    schedule: str = "returns_first",
    progress_bar: bool | None = None,
) -> NutsResult:
    """Runs NUTS for every chain of ``initial_state`` (shape ``[num_chains, *event_shape]``).

    Args:
      target_log_prob_fn: ONE state (``event_shape``) -> its log density. On JAX its
        gradient comes from ``jax.value_and_grad``, on TensorFlow from a gradient tape.
      initial_state: the chains' starting points; its array type picks the backend
        (NumPy, JAX or TensorFlow) unless ``backend`` is given. A list or tuple is
        taken as a NumPy array. Integer states are converted to the backend's
        default float (NumPy float64, JAX float32 unless ``jax_enable_x64``,
        TensorFlow float32); floats must be float32 or float64 (float16 and bfloat16
        are rejected: their rounding makes every trajectory diverge); booleans and
        complex numbers are rejected.
      backend: the pcbatch backend to run on; it also picks the gradient (a NumPy
        ``initial_state`` with ``backend=JaxBackend()`` uses ``jax.value_and_grad``).
      num_samples, num_warmup: draws kept, and warmup draws before them (step size by
        dual averaging, diagonal mass matrix in Stan's windows). Both are required,
        as in NumPyro: ``num_warmup=0`` runs without adaptation, at ``step_size``
        (Stan's default is 1000 warmup draws).
      step_size: the initial step size, a positive finite number (scalar or one per
        chain); with warmup it is only a starting point for Stan's step-size search.
      max_tree_depth: at most ``2**max_tree_depth - 1`` leapfrog steps per draw.
      seed: an integer; a chain's draws depend only on (seed, its chain index, draw).
      value_and_grad: ONE state -> (log density, gradient). Required on NumPy.
      target_accept_prob: the mean acceptance statistic warmup aims for.
      first_chain: the chain index of the first chain (to split chains over calls).
      first_draw: the draw counter of the first draw (to continue a run: pass the
        previous call's ``first_draw + num_warmup + num_samples``).
      schedule: the VM's scheduling policy (see ``pcbatch.passes.order_blocks``);
        draws are identical under every policy, only the work differs.
      progress_bar: a tqdm bar of the draws finished over all chains, updated while
        the sampler runs (at most every 0.1 s). None (the default): on when tqdm is
        installed and stderr is a terminal; False: off, and the program has no
        callback at all. Draws are the same either way. Under TensorFlow with XLA the
        bar only fills at the end (see `pcbatch.callbacks`).
    """
    _check_arguments(num_samples, num_warmup, max_tree_depth)
    initial_state = _float_state(initial_state, backend)
    value_and_grad = gradients.value_and_grad_for(
        target_log_prob_fn, value_and_grad, initial_state, backend
    )
    show_progress = progress.wanted(progress_bar)
    # Under TensorFlow's XLA (the default for tensors) no callback can run: the bar
    # fills at the end, and the program is the one without a callback.
    counts_live = show_progress and callbacks.supported_on(
        backend if backend is not None else _default_backend(initial_state)
    )
    q = _on_backend(initial_state, backend)
    num_chains = int(q.shape[0])
    event_shape = tuple(int(d) for d in q.shape[1:])
    dtype = np.dtype(getattr(q.dtype, "as_numpy_dtype", q.dtype))
    run_chain = _compiled(
        value_and_grad,
        num_samples,
        num_warmup,
        max_tree_depth,
        event_shape,
        float(target_accept_prob),
        counts_live,
    )
    steps = _step_sizes(step_size, dtype, num_chains)
    chains = np.arange(first_chain, first_chain + num_chains, dtype=np.uint32)
    seeds = np.full(num_chains, np.uint32(seed % 2**32))
    draws = np.full(num_chains, np.uint32(first_draw))
    # Returns first: chains unwinding their trees all meet before the next descent.
    options: dict[str, Any] = {"max_stack_depth": max_tree_depth + 2, "schedule": schedule}
    if backend is not None:
        options["backend"] = backend
    bar = None
    if show_progress:
        bar = progress.DrawProgress(
            num_chains * (num_warmup + num_samples),
            description="NUTS draws" if counts_live else "NUTS draws (shown when done: XLA)",
        )
    start = time.perf_counter()
    with profiling.profile() as prof, progress.showing(bar):
        outputs = run_chain(q, steps, seeds, chains, draws, **options)
    wall = time.perf_counter() - start
    samples, leapfrogs, depths, divergent, accept, step_sizes, inv_mass = outputs

    def host(a: Any) -> np.ndarray[Any, Any]:
        return np.swapaxes(np.asarray(a), 0, 1)

    return NutsResult(
        samples=_swap_chains(samples),
        num_leapfrogs=host(leapfrogs),
        tree_depth=host(depths),
        diverging=host(divergent),
        accept_prob=host(accept),
        step_size=host(step_sizes),
        inverse_mass=np.asarray(inv_mass),
        gradient_evaluations=prof.primitive_counts[program.GRADIENT_LABEL],
        leapfrog_steps=prof.primitive_lanes[program.GRADIENT_LABEL],
        wall_time=wall,
    )


def _on_backend(state: Any, backend: Any) -> Any:
    """``state`` as ``backend``'s arrays (a TensorFlow program traced for tensors is
    traced again for NumPy arrays)."""
    if getattr(backend, "name", None) == "tensorflow":
        import tensorflow as tf

        return tf.convert_to_tensor(state)
    return state


def _default_backend(initial_state: Any) -> Any:
    """The backend pcbatch picks for ``initial_state`` (TensorFlow's default is XLA)."""
    if gradients.array_library(initial_state) == "tensorflow":
        from pcbatch.backends.tensorflow import TensorFlowBackend

        return TensorFlowBackend()
    return None


def _swap_chains(samples: Any) -> Any:
    """``[chains, draws, ...]`` -> ``[draws, chains, ...]``, keeping the backend's array type."""
    perm = (1, 0) + tuple(range(2, len(samples.shape)))
    if gradients.array_library(samples) == "tensorflow":
        import tensorflow as tf

        return tf.transpose(samples, perm)
    return samples.transpose(perm)


def _float_state(state: Any, backend: Any) -> Any:
    """``state`` as float32 or float64 arrays of its library (see `sample`'s rules)."""
    if not (hasattr(state, "shape") and hasattr(state, "dtype")):
        state = np.asarray(state)  # a list or tuple of numbers
    if len(state.shape) < 1:
        raise ValueError(
            "nuts.sample: initial_state needs a leading chain dimension, "
            f"[num_chains, *event_shape]; got a scalar ({state!r})"
        )
    dtype = np.dtype(getattr(state.dtype, "as_numpy_dtype", state.dtype))
    if dtype in (np.float32, np.float64):
        return state
    if dtype.kind in "iu":
        return _as_default_float(state, backend)
    if dtype == np.float16 or dtype.name == "bfloat16":
        advice = "float32 or float64 (e.g. initial_state.astype(np.float32))"
        reason = "its rounding error makes every leapfrog trajectory diverge"
    else:
        advice = "real numbers as float32 or float64"
        reason = "the sampler's state is a point of a real vector space"
    raise TypeError(
        f"nuts.sample: initial_state has dtype {dtype.name}, which NUTS cannot use "
        f"({reason}); pass {advice}"
    )


def _as_default_float(state: Any, backend: Any) -> Any:
    """An integer ``state`` in its library's default float dtype."""
    library = gradients.array_library(state)
    if library == "jax":
        import jax.numpy as jnp

        return jnp.asarray(state, dtype=jnp.result_type(float))
    if library == "tensorflow":
        import tensorflow as tf

        return tf.cast(state, tf.float32)
    return np.asarray(state, dtype=np.float64)


def _step_sizes(step_size: Any, dtype: Any, num_chains: int) -> np.ndarray[Any, Any]:
    """One positive finite step size per chain, in the state's dtype."""
    try:
        steps = np.asarray(step_size)
        valid_kind = steps.dtype.kind in "iuf"
        per_chain = np.broadcast_to(steps, (num_chains,))
    except (TypeError, ValueError):
        valid_kind = False
    if not valid_kind:
        raise TypeError(
            f"nuts.sample: step_size must be a positive number or one per chain "
            f"({num_chains} chains), got {step_size!r}"
        )
    if not np.all(np.isfinite(per_chain) & (per_chain > 0)):
        raise ValueError(
            f"nuts.sample: step_size must be positive and finite, got {step_size!r}; "
            "a step size of 0 never moves the chains (with warmup it is the starting "
            "point of the step-size search; 0.1 is the default)"
        )
    return per_chain.astype(dtype)


def _check_arguments(num_samples: int, num_warmup: int, max_tree_depth: int) -> None:
    if int(num_samples) < 1:
        raise ValueError(f"num_samples must be at least 1, got {num_samples}")
    if int(num_warmup) < 0:
        raise ValueError(f"num_warmup must be at least 0, got {num_warmup}")
    if not 1 <= int(max_tree_depth) <= MAX_SUPPORTED_TREE_DEPTH:
        raise ValueError(
            f"max_tree_depth must be in [1, {MAX_SUPPORTED_TREE_DEPTH}], got {max_tree_depth}"
        )


@functools.lru_cache(maxsize=32)
def _compiled(
    value_and_grad: Callable[[Any], tuple[Any, Any]],
    num_samples: int,
    num_warmup: int,
    max_tree_depth: int,
    event_shape: tuple[int, ...],
    target: float,
    show_progress: bool,
) -> Any:
    """One `Context` per sampler configuration, so its compiled programs are reused."""
    from pcbatch.api import Context

    return program.build(
        Context(),
        value_and_grad,
        num_samples=int(num_samples),
        num_warmup=int(num_warmup),
        max_tree_depth=int(max_tree_depth),
        event_shape=event_shape,
        target_accept=target,
        on_draw=progress.report_draws if show_progress else None,
    )


class NoUTurnSampler:
    """A TFP-style transition kernel on the same batched program: one draw per `one_step`.

    ``bootstrap_results(state)`` starts the kernel's bookkeeping;
    ``one_step(state, results)`` returns ``(next_state, results)`` where ``results``
    holds the step's `NutsResult` (``last``) and the draw counter, so successive steps
    use fresh random streams. A step does not adapt: it samples at ``step_size``
    (``sample(..., num_warmup=0)``). Use `sample` for many draws: it batches across
    draws too, and adapts with ``num_warmup``.
    """

    def __init__(
        self,
        target_log_prob_fn: Callable[[Any], Any] | None = None,
        step_size: Any = 0.1,
        max_tree_depth: int = 10,
        *,
        seed: int = 0,
        value_and_grad: Callable[[Any], tuple[Any, Any]] | None = None,
    ) -> None:
        self.target_log_prob_fn = target_log_prob_fn
        self.step_size = step_size
        self.max_tree_depth = max_tree_depth
        self.seed = seed
        self.value_and_grad = value_and_grad

    @property
    def is_calibrated(self) -> bool:
        return True

    def bootstrap_results(self, current_state: Any) -> KernelResults:
        return KernelResults(draw=0, last=None)

    def one_step(
        self, current_state: Any, previous_kernel_results: KernelResults
    ) -> tuple[Any, KernelResults]:
        result = sample(
            self.target_log_prob_fn,
            current_state,
            num_samples=1,
            num_warmup=0,  # a kernel step does not adapt
            step_size=self.step_size,
            max_tree_depth=self.max_tree_depth,
            seed=self.seed,
            value_and_grad=self.value_and_grad,
            first_draw=previous_kernel_results.draw,
            progress_bar=False,  # one draw per call: nothing to watch
        )
        next_results = KernelResults(draw=previous_kernel_results.draw + 1, last=result)
        return result.samples[0], next_results


@dataclasses.dataclass(frozen=True)
class KernelResults:
    """`NoUTurnSampler` bookkeeping: the next draw counter and the last step's result."""

    draw: int
    last: NutsResult | None
