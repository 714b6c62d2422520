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

A state may also be a structure (a dict, tuple, namedtuple, nested; on JAX any pytree)
of arrays with a leading chain axis, and the log density may take data::

    def log_prob(params, data):     # JAX: ONE chain's {"mu": [], "z": [3]}, the data
        return -0.5 * (params["mu"] ** 2 + jnp.sum((params["z"] - data) ** 2))

    result = nuts.sample(log_prob, {"mu": jnp.zeros(100), "z": jnp.zeros((100, 3))},
                         data=jnp.ones(3), num_samples=500, num_warmup=300, seed=1)
    result.samples["z"].shape       # (500, 100, 3)

New data of the same shapes and dtypes, and any ``num_samples`` or ``num_warmup``,
run in the program already compiled.

Constrained leaves take a transform (`pcbatch.mcmc.transforms`, applied by
`pcbatch.mcmc.constrained`): ``sample(..., transforms={"sigma": transforms.positive()})``.
`warmup` runs only the warmup and returns an `AdaptedState` that `sample` continues
(`pcbatch.mcmc.adapted`); ``adapt_mass="dense"`` adapts a dense mass matrix
(`pcbatch.mcmc.metric`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from pcbatch import callbacks, errors, profiling
from pcbatch.mcmc import (
    adapted,
    arviz_data,
    constrained,
    diagnostics,
    gradients,
    program,
    progress,
    structure,
    tracing,
    transforms,
)
from pcbatch.mcmc import warmup as _warmup
from pcbatch.mcmc.adapted import AdaptedState
from pcbatch.mcmc.tracing import integer_seed

if TYPE_CHECKING:
    from pcbatch.api import BatchedFunction

#: ``data_chain_axis``: False, True, or data leaf names (see `sample`)
ChainAxis = bool | str | Iterable[str]

__all__ = [
    "MAX_SUPPORTED_TREE_DEPTH",
    "AdaptedState",
    "Draws",
    "KernelResults",
    "NoUTurnSampler",
    "NutsResult",
    "integer_seed",
    "sample",
    "transforms",
    "warmup",
]

#: the deepest tree allowed: 2**15 leapfrog steps per draw
MAX_SUPPORTED_TREE_DEPTH = 15

#: The program keeps the draws of one call in a buffer of a fixed number of draws, so
#: that ``num_samples`` is not part of the compiled program: a run of more draws is
#: several calls, each continuing exactly where the last stopped (draws do not depend
#: on the split). The buffer holds at most `MAX_DRAWS_PER_CALL` draws, and fewer where
#: that many would pass `DRAW_BUFFER_BYTES` (never fewer than `MIN_DRAWS_PER_CALL`).
MAX_DRAWS_PER_CALL = 1024
MIN_DRAWS_PER_CALL = 64
DRAW_BUFFER_BYTES = 2**28


@dataclasses.dataclass
class Draws:
    """Draws ``[num_draws, num_chains, *event_shape]`` (the backend's arrays; with a
    structured state that structure, each leaf ``[num_draws, num_chains, *leaf_shape]``)
    and their statistics, each a ``[num_draws, num_chains]`` NumPy array:

    - ``num_leapfrogs``, ``tree_depth``: the draw's leapfrog steps and tree doublings;
    - ``diverging``: its trajectory's energy error passed 1000 (or was NaN);
    - ``accept_prob``: the mean acceptance statistic over its trajectory;
    - ``step_size``: the step size it took;
    - ``log_density``: the target's log density at the draw;
    - ``energy``: the Hamiltonian at the draw, ``-log_density`` plus the kinetic energy
      ``p . (inverse_mass * p) / 2`` of the momentum ``p`` the trajectory reached it with;
    - ``energy_error``: ``energy`` minus the Hamiltonian at the trajectory's start;
    - ``max_energy_error``: the energy error of largest magnitude, signed, over every
      state the trajectory computed (+inf where the Hamiltonian was NaN).
    """

    samples: Any
    num_leapfrogs: np.ndarray[Any, Any]
    tree_depth: np.ndarray[Any, Any]
    diverging: np.ndarray[Any, Any]
    accept_prob: np.ndarray[Any, Any]
    step_size: np.ndarray[Any, Any]
    log_density: np.ndarray[Any, Any]
    energy: np.ndarray[Any, Any]
    energy_error: np.ndarray[Any, Any]
    max_energy_error: np.ndarray[Any, Any]

    @property
    def names(self) -> list[str]:
        """Each leaf's name (its key path, as ``"a.b"``); ``["x"]`` for one array."""
        if not structure.is_structured(self.samples):
            return ["x"]
        paths: list[str] = structure.flatten(self.samples)[1].paths()
        return paths

    def leaves(self) -> list[np.ndarray[Any, Any]]:
        """The draws of each leaf (`names`' order), as NumPy arrays."""
        if not structure.is_structured(self.samples):
            return [gradients.to_numpy(self.samples)]
        return [gradients.to_numpy(leaf) for leaf in structure.flatten(self.samples)[0]]


@dataclasses.dataclass
class NutsResult(Draws):
    """The kept draws and their statistics (`Draws`: ``num_draws`` is ``num_samples``),
    the work they took, and with ``sample(..., save_warmup=True)`` the warmup's draws
    (``warmup_draws``, a `Draws` of ``num_warmup`` draws; None otherwise).

    ``inverse_mass`` is the adapted diagonal ``[num_chains, size]``, over the flattened
    state with a structured one (`names`' order, each leaf raveled).

    From a `sample` traced inside ``jax.jit`` or ``tf.function`` every array is the
    backend's traced array (return the ones you need from the traced function), and
    ``gradient_evaluations``, ``leapfrog_steps`` and ``wall_time`` are None: they are
    only known once a run has finished.
    """

    inverse_mass: np.ndarray[Any, Any]
    gradient_evaluations: int | None
    leapfrog_steps: int | None
    wall_time: float | None
    warmup_draws: Draws | None = None
    #: the chains where this call left them: ``initial_state`` of a `sample` that continues
    state: AdaptedState | None = None

    @property
    def num_chains(self) -> int:
        return int(self.num_leapfrogs.shape[1])

    @property
    def utilization(self) -> float | None:
        """Leapfrog steps taken (all chains, warmup included) per batched gradient lane
        (None under tracing: the counts are unknown)."""
        if self.gradient_evaluations is None or self.leapfrog_steps is None:
            return None
        lanes = self.gradient_evaluations * self.num_chains
        return self.leapfrog_steps / lanes if lanes else 1.0

    @property
    def lockstep_utilization(self) -> float:
        """The bound of a lockstep sampler: per draw, mean over max trajectory length."""
        n = self.num_leapfrogs.astype(np.float64)
        return float(np.mean(n.mean(axis=1) / np.maximum(n.max(axis=1), 1)))

    def _per_leaf(self, function: Callable[[np.ndarray[Any, Any]], Any]) -> Any:
        """``function`` of each leaf's draws (as NumPy), in the samples' structure."""
        if not structure.is_structured(self.samples):
            return function(gradients.to_numpy(self.samples))
        leaves, node = structure.flatten(self.samples)
        return node.unflatten([function(gradients.to_numpy(leaf)) for leaf in leaves])

    def ess(self, method: str = "bulk", implementation: str = "auto") -> Any:
        """Effective sample size per component (per leaf, in the state's structure):
        ``method="bulk"`` or ``"tail"``, rank-normalized as in ArviZ (Vehtari et al. 2021),
        or ``"classic"`` (Stan's multi-chain estimate without ranks or splits). See
        `diagnostics.ess` for ``implementation``."""
        if method == "classic":
            return self._per_leaf(diagnostics.effective_sample_size)
        return self._per_leaf(
            functools.partial(diagnostics.ess, method=method, implementation=implementation)
        )

    def rhat(self, method: str = "rank", implementation: str = "auto") -> Any:
        """R-hat per component (per leaf, in the state's structure): ``method="rank"``,
        the rank-normalized split R-hat as in ArviZ (Vehtari et al. 2021), or
        ``"classic"`` (the split R-hat of BDA3). See `diagnostics.rhat`."""
        if method == "classic":
            return self._per_leaf(diagnostics.potential_scale_reduction)
        if method != "rank":
            raise ValueError(f"rhat(): method is 'rank' or 'classic', got {method!r}")
        return self._per_leaf(functools.partial(diagnostics.rhat, implementation=implementation))

    def bfmi(self) -> np.ndarray[Any, Any]:
        """E-BFMI of each chain (`diagnostics.bfmi` of ``energy``); ArviZ's ``az.bfmi``."""
        return diagnostics.bfmi(self.energy)

    def to_arviz(
        self, *, coords: dict[str, Any] | None = None, dims: dict[str, Any] | None = None
    ) -> Any:
        """The draws and statistics as ArviZ ``InferenceData`` (needs ``pip install arviz``):
        one posterior variable per leaf, named as `names` (``x`` for one array), the
        statistics in ``sample_stats`` under ArviZ's names, and with warmup draws kept
        (``save_warmup=True``) the groups ``warmup_posterior`` and ``warmup_sample_stats``.
        ``coords`` and ``dims`` are ArviZ's ``from_dict`` arguments: ``dims`` names each
        variable's dimensions after ``chain`` and ``draw``, ``coords`` their labels."""
        return arviz_data.inference_data(self, coords=coords, dims=dims)


def sample(
    target_log_prob_fn: Callable[[Any], Any] | None,
    initial_state: Any,
    *,
    num_samples: int,
    num_warmup: int,
    step_size: float | None = None,
    max_tree_depth: int = 10,
    seed: Any,  # an integer or a JAX PRNG key, traced or not
    backend: Any = None,
    value_and_grad: Callable[..., Any] | None = None,
    data: Any = None,
    data_chain_axis: ChainAxis = False,
    transforms: Any = None,
    inverse_mass: Any = None,
    adapt_mass: str = "diagonal",
    thin: int = 1,
    jitter: float = 0.0,
    target_accept_prob: float = 0.8,
    first_chain: int = 0,
    first_draw: int = 0,
    schedule: str = "returns_first",
    progress_bar: bool | None = None,
    save_warmup: bool = False,
) -> NutsResult:
    """Runs NUTS for every chain of ``initial_state`` (shape ``[num_chains, *event_shape]``).

    Args:
      target_log_prob_fn: ONE state (``event_shape``, or one chain's structure) -> its
        log density; ``(state, data)`` -> log density when ``data`` is given. On JAX its
        gradient comes from ``jax.value_and_grad``, on TensorFlow from a gradient tape,
        on Torch from torch's autograd (it gets one chain's plain tensors).
      initial_state: the chains' starting points (or an `AdaptedState`, from `warmup` or
        a result's ``state``: the chains continue from there without adaptation, with
        ``num_warmup=0``): one array ``[num_chains,
        *event_shape]``, or a structure of them (a dict, tuple, namedtuple, nested; on
        JAX anything ``jax.tree_util`` flattens), every leaf with the leading chain axis.
        Its array type picks the backend (NumPy, JAX, TensorFlow or Torch, on the
        tensors' device) unless ``backend`` is given. A list is taken as one NumPy
        array (a tuple is a structure). Integer states are converted to the backend's
        default float (NumPy and Torch float64, JAX float32 unless ``jax_enable_x64``,
        TensorFlow float32); floats must be float32 or float64 (float16 and bfloat16
        are rejected: their rounding makes every trajectory diverge); booleans and
        complex numbers are rejected. The leaves of a structure share one dtype:
        NumPy's ``result_type`` of theirs (after integers become floats); the target
        receives them, and the draws come back, in it.
      backend: the pcbatch backend to run on; it also picks the gradient (a NumPy
        ``initial_state`` with ``backend=JaxBackend()`` uses ``jax.value_and_grad``).
      num_samples, num_warmup: draws kept, and warmup draws before them (step size by
        dual averaging, diagonal mass matrix in Stan's windows). Both are required,
        as in NumPyro: ``num_warmup=0`` runs without adaptation, at ``step_size``
        (Stan's default is 1000 warmup draws). Neither is part of the compiled
        program: any values run in the program compiled for the first.
      step_size: the initial step size, a positive finite number (scalar or one per
        chain); with warmup it is only a starting point for Stan's step-size search.
        None: 0.1, or an `AdaptedState`'s adapted step sizes.
      max_tree_depth: at most ``2**max_tree_depth - 1`` leapfrog steps per draw.
      seed: an integer, or a JAX PRNG key (``jax.random.key`` or ``PRNGKey``: the run
        draws what ``seed=integer_seed(key)`` draws); a chain's draws depend only on
        (seed, its chain index, draw). Inside ``jax.jit`` or ``tf.function`` it may be
        traced (an integer scalar array, or a key). Under tracing the result's arrays
        are the traced arrays (statistics included, not NumPy) and what only the
        finished run knows, ``gradient_evaluations``, ``leapfrog_steps`` and
        ``wall_time``, is None; ``jitter=`` needs a concrete seed there.
      value_and_grad: ONE state -> (log density, gradient); ``(state, data)`` with
        ``data``. Required on NumPy. With a structured state it receives the state's
        structure and returns the gradient in that same structure.
      data: None, or an array or a structure of arrays (as ``initial_state``'s) passed
        to the target as its second argument. It is an input of the compiled program,
        not a constant of it: new data of the same shapes and dtypes runs without
        compiling again. Float leaves are converted to the state's dtype.
      data_chain_axis: which data leaves hold one value per chain along a leading axis
        of length ``num_chains`` (chain ``c`` sees ``leaf[c]``): False (none: every
        chain sees the same data), True (every leaf), or a leaf name or a list of them
        (names as `NutsResult.names` gives them; a name marks the leaves under it).
      transforms: constrained parameters (see `pcbatch.mcmc.transforms`): one transform
        for a state that is one array, or a dict of leaf names (or name prefixes) to
        transforms, or a structure like the state's with transforms (None where a leaf
        is unconstrained). ``initial_state`` is given, and the draws come back, in the
        constrained space; the sampler moves the unconstrained values and adds each
        transform's log |det J| to the target. On NumPy ``value_and_grad`` stays a
        function of the constrained parameters: its gradient is carried to the
        unconstrained ones by the chain rule (each transform's ``pullback``).
      inverse_mass: the starting diagonal of the inverse mass matrix over the flattened
        unconstrained state, ``[size]`` or one per chain ``[chains, size]``; None: ones
        (or an `AdaptedState`'s adapted one).
      adapt_mass: "diagonal" (Stan's windows re-estimate the diagonal during warmup) or
        "off" (warmup adapts the step size only; the inverse mass stays as given).
      thin: keep every ``thin``-th draw (the first of each ``thin``): ``num_samples``
        draws are kept out of ``num_samples * thin``.
      jitter: each chain's unconstrained start moves by uniform noise in ``(-jitter,
        jitter)`` per coordinate (Stan's random inits use 2), a function of (seed, chain
        index) only; 0: the start as given.
      first_chain: the chain index of the first chain (to split chains over calls).
      first_draw: the draw counter of the first draw (to continue a run: pass the
        previous call's ``first_draw + num_warmup + num_samples``).
      schedule: the VM's scheduling policy (see ``pcbatch.passes.order_blocks``);
        draws are identical under every policy, only the work differs.
      progress_bar: a tqdm bar of the draws finished over all chains, updated while
        the sampler runs (at most every 0.1 s). None (the default): on when tqdm is
        installed and stderr is a terminal; True: on, and without tqdm a plain line on
        stderr at every tenth of the draws; False: off, and the program has no
        callback at all. Draws are the same either way. Under TensorFlow with XLA the
        bar only fills at the end (see `pcbatch.callbacks`).
      save_warmup: also return the warmup's draws and their statistics
        (``result.warmup_draws``; ``to_arviz()`` puts them in ``warmup_posterior`` and
        ``warmup_sample_stats``). Off by default: they take memory as the kept draws do.
    """
    options = _Options.checked(
        num_samples=num_samples, num_warmup=num_warmup, step_size=step_size,
        max_tree_depth=max_tree_depth, seed=seed, backend=backend,
        value_and_grad=value_and_grad, data=data, data_chain_axis=data_chain_axis,
        transforms=transforms, inverse_mass=inverse_mass, adapt_mass=adapt_mass, thin=thin,
        jitter=jitter, target_accept_prob=target_accept_prob, first_chain=first_chain,
        first_draw=first_draw, schedule=schedule, progress_bar=progress_bar,
        save_warmup=save_warmup,
    )  # fmt: skip
    return _sample_with(target_log_prob_fn, initial_state, options)


def _sample(
    target_log_prob_fn: Callable[..., Any] | None, initial_state: Any, **arguments: Any
) -> NutsResult:
    """`sample` with `_Options`' keyword arguments (``draws_per_call``, ``warmup_only``
    too), for `warmup` and `NoUTurnSampler`."""
    return _sample_with(target_log_prob_fn, initial_state, _Options.checked(**arguments))


@dataclasses.dataclass(frozen=True)
class _Options:
    """`sample`'s arguments but the target and the initial state, checked (`checked`):
    counts are ints, ``thin``, ``jitter`` and ``adapt_mass`` in their ranges. Defaults
    are `sample`'s. Two more for pcbatch's own callers: ``draws_per_call``, the
    program's draw buffer (None: `_draws_per_call`), and ``warmup_only``, a run of the
    warmup and no draw (`warmup`)."""

    num_samples: int
    num_warmup: int
    seed: Any
    step_size: Any = None
    max_tree_depth: int = 10
    backend: Any = None
    value_and_grad: Callable[..., Any] | None = None
    data: Any = None
    data_chain_axis: ChainAxis = False
    transforms: Any = None
    inverse_mass: Any = None
    adapt_mass: str = "diagonal"
    thin: int = 1
    jitter: float = 0.0
    target_accept_prob: float = 0.8
    first_chain: int = 0
    first_draw: int = 0
    schedule: str = "returns_first"
    progress_bar: bool | None = None
    save_warmup: bool = False
    draws_per_call: int | None = None
    warmup_only: bool = False

    @classmethod
    def checked(cls, **arguments: Any) -> _Options:
        """The options of these arguments, or the error that names the bad one."""
        options = cls(**arguments)
        num_samples = _count(options.num_samples, "num_samples")
        num_warmup = _count(options.num_warmup, "num_warmup")
        max_tree_depth = _count(options.max_tree_depth, "max_tree_depth")
        _check_arguments(max(num_samples, int(options.warmup_only)), num_warmup, max_tree_depth)
        return dataclasses.replace(
            options,
            num_samples=num_samples,
            num_warmup=num_warmup,
            max_tree_depth=max_tree_depth,
            thin=adapted.check_thin(options.thin),
            jitter=adapted.check_jitter(options.jitter),
            adapt_mass=adapted.check_adapt_mass(options.adapt_mass),
        )


def _sample_with(
    target_log_prob_fn: Callable[..., Any] | None, initial_state: Any, options: _Options
) -> NutsResult:
    """`sample` with its options checked.

    Three steps: `_prepare` checks the inputs and turns them into the program's
    (`_Run`), `_execute` calls the program until every draw is done (`_Ran`), and
    `_result` gives the draws back in the user's structure and constrained space."""
    run = _prepare(target_log_prob_fn, initial_state, options)
    return _result(run, _execute(run))


# -- preparing a run ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Start:
    """The chains' unconstrained start as the program takes it (``[chains, *event_shape]``),
    what gives draws back in the user's form (``layout`` of a structured state,
    ``constraints`` of its transforms), whether the metric is dense, and the
    `AdaptedState` the run continues (None: a new run)."""

    q: Any
    layout: structure.Layout | None
    constraints: constrained.Constraints | None
    dense: bool
    resumed: AdaptedState | None = None


@dataclasses.dataclass(frozen=True)
class _Position:
    """Where in its run a call starts: the run's first chain index and first draw counter,
    the draws already done (a continued run's; warmup included) and the run's warmup."""

    first_chain: int
    first_draw: int
    done: int
    num_warmup: int


@dataclasses.dataclass(frozen=True)
class _Run:
    """One `_sample` call, ready to run: the compiled program with its inputs besides the
    chain state (data leaves, seeds, chain indices, draw counters) and options, the
    chains' first state, which draws to run and keep, and what `_result` needs."""

    run_chain: BatchedFunction
    inputs: tuple[Any, ...]
    options: dict[str, Any]
    state: Any  # warmup.ChainState of the backend's arrays
    capacity: int  # the program's draw buffer
    event_shape: tuple[int, ...]
    adapt_mass: bool
    position: _Position
    saved_warmup: int  # warmup draws this call runs and keeps (``save_warmup``)
    num_draws: int  # draws after the warmup, ``num_samples * thin``
    thin: int
    start: _Start
    seed: Any
    traced: bool
    bar: progress.DrawProgress | progress.LineProgress | None


def _prepare(
    target_log_prob_fn: Callable[..., Any] | None, initial_state: Any, options: _Options
) -> _Run:
    """The target, the initial state and the options turned into the program's inputs
    (see `_Run`), each checked against the others."""
    o = options
    start = _start_of(initial_state, o.backend, o.transforms, o.inverse_mass, o.adapt_mass)
    position = _Position(o.first_chain, o.first_draw, 0, o.num_warmup)
    if start.resumed is not None:
        _check_resuming(start.resumed, o)
        position = _resumed_position(start.resumed)
    dtype, library = _run_dtype(start.q, o.backend)
    num_chains = int(start.q.shape[0])
    data_leaves, data_node = _data_leaves(o.data, o.data_chain_axis, num_chains, dtype, library)
    gradient = _gradient(target_log_prob_fn, o.value_and_grad, start, o.backend, data_node)
    word = tracing.seed_word(o.seed, library)
    traced = tracing.is_traced(start.q, data_leaves, word)
    # Traced, the run happens after this call returns: no bar could follow it.
    show_progress = progress.wanted(o.progress_bar) and not traced
    # Under TensorFlow's XLA (the default for tensors) no callback can run: the bar
    # fills at the end, and the program is the one without a callback.
    counts_live = show_progress and callbacks.supported_on(
        o.backend if o.backend is not None else _default_backend(start.q)
    )
    q = _on_backend(start.q, o.backend)
    event_shape = tuple(int(d) for d in q.shape[1:])
    capacity = o.draws_per_call or _draws_per_call(num_chains, event_shape, dtype)
    run_chain = _compiled(
        gradient, capacity, o.max_tree_depth, event_shape, float(o.target_accept_prob),
        counts_live,
    )  # fmt: skip
    state = _first_state(start, q, o, word, position.first_chain, dtype)
    chains = np.arange(position.first_chain, position.first_chain + num_chains, dtype=np.uint32)
    draws = np.full(num_chains, np.uint32(position.first_draw))
    seeds = tracing.chain_seeds(word, num_chains, library)
    call_options = _run_options(o, traced, library)
    bar = None
    if show_progress:
        bar = progress.new_bar(
            num_chains * (o.num_warmup + o.num_samples * o.thin),  # this call's draws
            description="NUTS draws" if counts_live else "NUTS draws (shown when done: XLA)",
        )
    # The warmup draws this call runs (none when it continues a run), and of them those
    # the draw buffer keeps: with ``save_warmup`` the warmup runs through the buffer.
    saved = max(position.num_warmup - position.done, 0) if o.save_warmup else 0
    return _Run(
        run_chain, (data_leaves, seeds, chains, draws), call_options, state, capacity,
        event_shape, o.adapt_mass != "off", position, saved, o.num_samples * o.thin, o.thin,
        start, o.seed, traced, bar,
    )  # fmt: skip


def _start_of(
    initial_state: Any, backend: Any, transforms: Any, inverse_mass: Any, adapt_mass: str
) -> _Start:
    """``initial_state`` (or the `AdaptedState` it is) as the program's unconstrained start."""
    if isinstance(initial_state, AdaptedState):
        resumed = initial_state
        return _Start(
            resumed.chain_state.q, resumed.layout, resumed.constraints, resumed.dense, resumed
        )
    _check_finite_start(initial_state)
    constraints = constrained.build(transforms, initial_state)
    if constraints is not None:
        initial_state = constraints.unconstrain(initial_state)
    layout = None
    if structure.is_structured(initial_state):
        q, layout = _flat_state(initial_state, backend)
    else:
        q = _float_state(initial_state, backend)
    dense = _wants_dense(q, layout, inverse_mass, adapt_mass)
    if dense and layout is None and len(q.shape) != 2:
        # A dense metric works on one vector per chain: a state of any other shape goes
        # flat, as a structure with one leaf.
        layout = structure.Layout(structure.Node("leaf"), (tuple(q.shape[1:]),))
        q = _reshape_for(q)(q, (q.shape[0], -1))
    return _Start(q, layout, constraints, dense)


def _check_finite_start(initial_state: Any) -> None:
    """A ValueError naming the leaf and chains where ``initial_state`` holds nan or inf.

    From such a point every trajectory is non-finite: the chain would never move, and
    its draws would be nan or inf with nothing else said. Inside ``jax.jit`` or
    ``tf.function`` the values are not known: there such a chain's draws are non-finite
    and every transition of it is divergent (``diverging``)."""
    if tracing.is_traced(initial_state):
        return
    if structure.is_structured(initial_state):
        leaves, node = structure.flatten(initial_state)
        names = node.paths()
    else:
        leaves, names = [initial_state], [""]
    for name, leaf in zip(names, leaves):
        values = gradients.to_numpy(leaf)
        if values.dtype.kind not in "fc" or values.ndim < 1:
            continue  # integers are finite; other kinds and shapes are refused later
        finite = np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1)
        if not finite.all():
            what = "initial_state" if name == "" else f"initial_state[{name!r}]"
            chains = np.flatnonzero(~finite)
            shown = chains[:10].tolist()
            more = f" (and {len(chains) - 10} more)" if len(chains) > 10 else ""
            raise ValueError(
                f"nuts.sample: {what} is not finite (nan or inf) at chains {shown}{more}; "
                "start every chain at a finite point inside the model's support (say, a "
                "draw from the prior, or zeros), else its draws are nan or inf"
            )


def _resumed_position(resumed: AdaptedState) -> _Position:
    """The run goes on: its warmup is over, its draws counted from its first draw."""
    return _Position(
        resumed.first_chain, resumed.first_draw, resumed.draws_done, resumed.num_warmup
    )


def _run_dtype(q: Any, backend: Any) -> tuple[np.dtype[Any], str]:
    """The dtype the program runs in, and the array library that runs it."""
    dtype = gradients.dtype_of(q)
    library = _library(q, backend)
    if library == "jax":
        _register_with_jax()
        import jax

        # The dtype JAX runs it in (float32 without jax_enable_x64).
        dtype = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    return dtype, library


def _gradient(
    target_log_prob_fn: Callable[..., Any] | None,
    value_and_grad: Callable[..., Any] | None,
    start: _Start,
    backend: Any,
    data_node: structure.Node | None,
) -> Callable[..., Any]:
    """The program's ``(q, data) -> (log density, gradient)`` of the unconstrained state."""
    if start.constraints is not None:
        if value_and_grad is not None:
            value_and_grad = constrained.value_and_grad(value_and_grad, start.constraints)
        elif target_log_prob_fn is not None:
            target_log_prob_fn = constrained.target(target_log_prob_fn, start.constraints)
    return gradients.value_and_grad_for(
        target_log_prob_fn, value_and_grad, start.q, backend, layout=start.layout, data=data_node
    )


def _first_state(
    start: _Start,
    q: Any,
    options: _Options,
    word: Any,
    first_chain: int,
    dtype: np.dtype[Any],
) -> Any:
    """The chains' `warmup.ChainState` before the call's first draw: a continued run's
    (with the options' ``step_size`` and ``inverse_mass`` in place of the adapted ones
    when given), or a new run's at ``q`` (moved by ``jitter``)."""
    num_chains = int(q.shape[0])
    size = int(np.prod(tuple(q.shape[1:]), dtype=np.int64))
    step_size, inverse_mass = options.step_size, options.inverse_mass
    steps = None if step_size is None else _step_sizes(step_size, dtype, num_chains)
    inv_mass = None
    if inverse_mass is not None:
        inv_mass = adapted.inverse_mass_input(inverse_mass, num_chains, size, dtype, start.dense)
    if start.resumed is not None:
        return adapted.start_of(start.resumed, steps, inv_mass, dtype)
    if options.jitter > 0:
        q = q + _jitter(num_chains, size, options.jitter, word, first_chain, dtype)
    if steps is None:
        steps = _step_sizes(0.1, dtype, num_chains)
    return _warmup.start_state(q, steps, dtype, inv_mass, start.dense)


def _run_options(options: _Options, traced: bool, library: str) -> dict[str, Any]:
    """The batched call's options."""
    # Returns first: chains unwinding their trees all meet before the next descent.
    call: dict[str, Any] = {
        "max_stack_depth": options.max_tree_depth + 2, "schedule": options.schedule
    }
    if options.backend is not None:
        call["backend"] = options.backend
    if traced and library == "tensorflow" and _in_xla_function():
        # TensorFlow's XLA bridge fails to convert the sampler's nested while loops
        # ("Cannot find body function") when the caller's graph is compiled by XLA.
        raise NotImplementedError(
            "nuts.sample inside tf.function(jit_compile=True) is not supported: "
            "TensorFlow's XLA bridge cannot convert the sampler's nested loops. Call it "
            "in a tf.function without jit_compile (the sampler's own program is still "
            "compiled with XLA), or eagerly"
        )
    return call


# -- running it --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Ran:
    """What the program calls gave: each call's number of kept draws with its outputs,
    the chains' state after the last call, the run's draws done by then, and the work
    (None under tracing, where the run has not happened yet)."""

    calls: list[tuple[int, list[Any]]]
    state: Any  # warmup.ChainState
    done: int
    gradient_evaluations: int | None
    leapfrog_steps: int | None
    wall_time: float | None


def _execute(run: _Run) -> _Ran:
    """Runs the program calls `_call_loop` plans, counting their work and time."""
    clock = time.perf_counter()
    counted = profiling.counting([program.GRADIENT_LABEL])
    with counted as prof, progress.showing(run.bar), _user_shape_errors():
        calls, state, done = _call_loop(run)
    if run.traced:
        return _Ran(calls, state, done, None, None, None)
    return _Ran(
        calls,
        state,
        done,
        prof.primitive_counts[program.GRADIENT_LABEL],
        prof.primitive_lanes[program.GRADIENT_LABEL],
        time.perf_counter() - clock,
    )


@contextlib.contextmanager
def _user_shape_errors() -> Iterator[None]:
    """Raises a log density or gradient of the wrong shape as the clear error it is,
    not as the pcbatch type-inference error it causes while the program compiles."""
    try:
        yield
    except errors.TypeInferenceError as error:
        cause: BaseException | None = error
        while cause is not None and not isinstance(cause, gradients.LogDensityShapeError):
            cause = cause.__cause__
        if cause is None:
            raise
        raise gradients.LogDensityShapeError(str(cause)) from None


def _call_loop(run: _Run) -> tuple[list[tuple[int, list[Any]]], Any, int]:
    """Calls the program until the warmup is done and the draw buffer has kept every draw
    asked for: each call continues where the last stopped, and keeps at most
    ``run.capacity`` draws. Returns each call's kept draws with its outputs, the chains'
    final state and the run's draws done."""
    num_warmup = run.position.num_warmup
    # The initial step-size search draws its random numbers at the warmup's end (past
    # every window's search), whatever the number of draws: so a run continued by
    # another call draws what one longer run draws.
    search_draw = num_warmup
    keep_from = num_warmup - run.saved_warmup
    buffered = run.saved_warmup + run.num_draws
    state, start, kept = run.state, run.position.done, 0
    calls: list[tuple[int, list[Any]]] = []
    # The first call runs the warmup too (and is the only one, for `warmup`).
    while kept < buffered or start < num_warmup:
        count = min(run.capacity, buffered - kept)
        stop = max(start, keep_from) + count
        plan = _warmup.plan(start, stop, num_warmup, search_draw, keep_from, run.adapt_mass)
        *outputs, packed = run.run_chain(*state, *run.inputs, plan, **run.options)
        state = _unpacked(packed, run)
        calls.append((count, outputs))
        start, kept = stop, kept + count
    return calls, state, start


def _unpacked(packed: Any, run: _Run) -> _warmup.ChainState:
    """The chains' state from the run's packed vectors; a JAX array on one device is cut
    on the host and its parts put back on that device (slicing it there compiles an XLA
    program per shape: 3 of a first call's compiles)."""
    dense = run.start.dense
    device = None if run.traced else _jax_device(packed)
    if device is None:
        return _warmup.unpack(packed, run.event_shape, _reshape_for(packed), dense)
    import jax

    state = _warmup.unpack(gradients.to_numpy(packed), run.event_shape, np.reshape, dense)
    placed: _warmup.ChainState = jax.tree_util.tree_map(
        lambda a: jax.device_put(a, device), state
    )
    return placed


def _jax_device(array: Any) -> Any:
    """The one JAX device holding ``array``, or None (another library's, or sharded)."""
    return next(iter(array.devices())) if _on_one_jax_device(array) else None


# -- the result --------------------------------------------------------------------------


def _result(run: _Run, ran: _Ran) -> NutsResult:
    """The kept draws (and the saved warmup's) in the user's structure and constrained
    space, with the work they took and the state a next call continues from."""
    start, position = run.start, run.position
    resume = AdaptedState(
        ran.state, start.layout, start.constraints, run.seed, position.first_chain,
        position.first_draw, ran.done, position.num_warmup, reshape=_reshape_for(ran.state.q),
    )  # fmt: skip
    device = None if run.traced else _jax_device(ran.calls[0][1][0])
    outputs = _joined(ran.calls, on_host=device is not None)
    saved = run.saved_warmup
    kept = _draws(outputs, slice(saved, None, run.thin), start.layout, start.constraints,
                  run.traced, device)  # fmt: skip
    warmup_draws = None
    if saved:
        warmup_draws = _draws(outputs, slice(0, saved), start.layout, start.constraints,
                              run.traced, device)  # fmt: skip
    return NutsResult(
        **{field.name: getattr(kept, field.name) for field in dataclasses.fields(Draws)},
        inverse_mass=adapted.user_inverse_mass(ran.state.inv_mass, start.dense, run.traced),
        gradient_evaluations=ran.gradient_evaluations,
        leapfrog_steps=ran.leapfrog_steps,
        wall_time=ran.wall_time,
        warmup_draws=warmup_draws,
        state=resume,
    )


@functools.cache
def _register_with_jax() -> None:
    """Results as JAX pytrees, so that a ``jax.jit`` may return a whole `NutsResult`: its
    arrays (and an `AdaptedState`'s chains and seed) are the leaves, the counts and the
    layout static."""
    import jax

    counts = ("gradient_evaluations", "leapfrog_steps", "wall_time")
    for cls in (Draws, NutsResult):
        names = [field.name for field in dataclasses.fields(cls)]
        data = [name for name in names if name not in counts]
        jax.tree_util.register_dataclass(cls, data, [n for n in names if n in counts])
    jax.tree_util.register_dataclass(
        AdaptedState,
        ["chain_state", "seed"],
        [f.name for f in dataclasses.fields(AdaptedState) if f.name not in ("chain_state", "seed")],
    )


def _in_xla_function() -> bool:
    """Whether the graph being traced is a ``tf.function(jit_compile=True)``'s."""
    from pcbatch.backends.tensorflow import in_xla_context

    return in_xla_context()


def _jitter(
    num_chains: int, size: int, amount: float, word: Any, first_chain: int, dtype: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    if not isinstance(word, np.uint32):
        raise ValueError(
            "nuts.sample: jitter= needs a concrete seed (a Python integer, or a key or "
            "array computed outside the traced function); the seed given is traced "
            "inside jax.jit or tf.function. Move the start yourself, or pass the seed "
            "as a static integer"
        )
    return adapted.jitter(num_chains, size, amount, int(word), first_chain, dtype)


def _draws(
    outputs: list[Any],
    rows: slice,
    layout: structure.Layout | None,
    constraints: constrained.Constraints | None,
    traced: bool = False,
    device: Any = None,
) -> Draws:
    """The `Draws` of the program's joined outputs (``[chains, draws, ...]``) in ``rows``,
    the samples in the user's structure and constrained space; the statistics as NumPy
    arrays, or ``traced``, as the backend's (traced) arrays; with a JAX ``device``, the
    outputs were that device's (cut on the host, `_joined`) and the samples go back to it."""
    if device is None and not traced and _on_one_jax_device(outputs[0]):
        device = next(iter(outputs[0].devices()))
    if device is not None:
        # Slicing, transposing and splitting device arrays compiles a small XLA program
        # per shape (about 1 s of a JAX first call): NumPy does the same exactly, and
        # only the samples go back to the device, before the constraints.
        import jax

        draws = _draws([gradients.to_numpy(o) for o in outputs], rows, layout, None)
        samples = jax.tree_util.tree_map(lambda a: jax.device_put(a, device), draws.samples)
        if constraints is not None:
            samples = constraints.constrain(samples)
        return dataclasses.replace(draws, samples=samples)
    samples, leapfrogs, depths, divergent, accept, step_sizes, energies = (
        output[:, rows] for output in outputs
    )
    host = _swap_chains if traced else (lambda a: np.swapaxes(gradients.to_numpy(a), 0, 1))
    samples = _swap_chains(samples)
    if layout is not None:
        samples = layout.unflatten(samples, reshape=_reshape_for(samples))
    if constraints is not None:
        samples = constraints.constrain(samples)
    energies = host(energies)
    return Draws(
        samples=samples,
        num_leapfrogs=host(leapfrogs),
        tree_depth=host(depths),
        diverging=host(divergent),
        accept_prob=host(accept),
        step_size=host(step_sizes),
        **{name: energies[..., k] for k, name in enumerate(program.ENERGY_STATISTICS)},
    )


def warmup(
    target_log_prob_fn: Callable[[Any], Any] | None,
    initial_state: Any,
    *,
    num_warmup: int,
    seed: Any,
    **options: Any,
) -> AdaptedState:
    """Runs only the warmup: the chains' `AdaptedState` (positions, step sizes, inverse
    mass, draw counter), which `sample` continues without adaptation
    (``sample(target, state, num_samples=..., num_warmup=0, seed=seed)``: the same draws
    as one ``sample`` with ``num_warmup``). ``options`` are `sample`'s (``data``,
    ``transforms``, ``inverse_mass``, ``adapt_mass``, ``jitter``, ``step_size``, ...)."""
    if int(num_warmup) < 1:
        raise ValueError(f"nuts.warmup: num_warmup must be at least 1, got {num_warmup}")
    for name in ("num_samples", "thin"):
        if name in options:
            raise TypeError(f"nuts.warmup draws no samples: {name}= belongs to nuts.sample")
    unknown = set(options) - _WARMUP_OPTIONS
    if unknown:
        raise TypeError(f"nuts.warmup got unexpected keyword arguments {sorted(unknown)}")
    checked = _Options.checked(
        num_samples=0, num_warmup=num_warmup, seed=seed, warmup_only=True, **options
    )
    result = _sample_with(target_log_prob_fn, initial_state, checked)
    assert result.state is not None  # every run's result carries its end state
    return result.state


#: `sample`'s options that `warmup` takes too
_WARMUP_OPTIONS = frozenset(
    """step_size max_tree_depth backend value_and_grad data data_chain_axis transforms
    inverse_mass adapt_mass jitter target_accept_prob first_chain first_draw schedule
    progress_bar""".split()  # noqa: SIM905
)


def _wants_dense(
    state: Any, layout: structure.Layout | None, inverse_mass: Any, adapt_mass: str
) -> bool:
    """Whether the metric is dense: ``adapt_mass="dense"``, or a dense ``inverse_mass``."""
    num_chains = int(state.shape[0])
    size = int(np.prod(tuple(state.shape[1:]), dtype=np.int64))
    given = inverse_mass is not None and adapted.is_dense_input(
        inverse_mass, num_chains, size, adapt_mass
    )
    if given and adapt_mass == "diagonal":
        raise ValueError(
            "nuts.sample: inverse_mass is a dense matrix, but adapt_mass='diagonal' would "
            "replace it by a diagonal; pass adapt_mass='dense' or 'off'"
        )
    return adapt_mass == "dense" or given


def _check_resuming(state: AdaptedState, options: _Options) -> None:
    """An `AdaptedState` continues as it is: nothing may ask to adapt or start anew."""
    num_warmup, transforms = options.num_warmup, options.transforms
    if num_warmup != 0:
        raise ValueError(
            "nuts.sample: initial_state is an AdaptedState, whose chains continue without "
            f"adaptation: pass num_warmup=0 (got {num_warmup})"
        )
    if transforms is not None and (
        state.constraints is None or constrained.build(transforms, state.position)
        != state.constraints
    ):
        raise ValueError(
            "nuts.sample: initial_state is an AdaptedState, which keeps the transforms it "
            "was sampled with; leave transforms= out"
        )
    if options.first_chain != 0 or options.first_draw != 0:
        raise ValueError(
            "nuts.sample: initial_state is an AdaptedState, which knows its chain indices "
            "and draw counter; leave first_chain= and first_draw= out"
        )
    if options.jitter:
        raise ValueError("nuts.sample: jitter= moves a new start; an AdaptedState continues")


def _draws_per_call(num_chains: int, event_shape: tuple[int, ...], dtype: np.dtype[Any]) -> int:
    """The draw buffer's length: a power of two in [`MIN_DRAWS_PER_CALL`,
    `MAX_DRAWS_PER_CALL`], as long as `DRAW_BUFFER_BYTES` allows."""
    size = int(np.prod(event_shape, dtype=np.int64))
    per_draw = max(1, num_chains * (size * np.dtype(dtype).itemsize + 16))
    fits = max(1, DRAW_BUFFER_BYTES // per_draw)
    return int(np.clip(2 ** int(np.log2(fits)), MIN_DRAWS_PER_CALL, MAX_DRAWS_PER_CALL))


def _joined(calls: list[tuple[int, list[Any]]], on_host: bool = False) -> list[Any]:
    """Each output of the calls (``[chains, buffer, ...]``) cut to the draws each call
    kept and joined along the draw axis; ``on_host``, as NumPy arrays (a JAX array's
    slice compiles an XLA program per shape: 6 of a first call's compiles)."""
    if on_host:
        calls = [(count, [gradients.to_numpy(o) for o in outputs]) for count, outputs in calls]
    joined: list[Any] = []
    for k in range(len(calls[0][1])):
        parts = [outputs[k][:, :count] for count, outputs in calls]
        joined.append(parts[0] if len(parts) == 1 else _concatenate(parts, axis=1))
    return joined


def _concatenate(parts: list[Any], axis: int) -> Any:
    library = gradients.array_library(parts[0])
    if library == "tensorflow":
        import tensorflow as tf

        return tf.concat(parts, axis)
    if library == "jax":
        import jax.numpy as jnp

        return jnp.concatenate(parts, axis)
    if library == "torch":
        import torch

        return torch.cat(parts, dim=axis)
    return np.concatenate([np.asarray(p) for p in parts], axis)


def _reshape_for(array: Any) -> Callable[[Any, tuple[int, ...]], Any]:
    """``reshape(x, shape)`` for ``array``'s library (tensors have no ``reshape`` method)."""
    if gradients.array_library(array) == "tensorflow":
        import tensorflow as tf

        reshape: Callable[[Any, tuple[int, ...]], Any] = tf.reshape  # tf is untyped
        return reshape
    return lambda x, shape: x.reshape(shape)


def _library(state: Any, backend: Any) -> str:
    """The array library the sampler runs on: ``backend``'s, else ``state``'s."""
    name = getattr(backend, "name", None)
    return name if name in ("jax", "tensorflow", "torch") else gradients.array_library(state)


def _flat_state(state: Any, backend: Any) -> tuple[Any, structure.Layout]:
    """A structured ``state`` as ``[chains, size]`` in one float dtype, and its `Layout`."""
    leaves, node = structure.flatten(state)
    names = node.paths()
    if not leaves:
        raise ValueError(
            f"nuts.sample: initial_state {state!r} holds no arrays; give each parameter an "
            "array with a leading chain axis"
        )
    leaves = [
        _float_state(leaf, backend, f"initial_state[{name!r}]")
        for name, leaf in zip(names, leaves)
    ]
    chains = {name: int(leaf.shape[0]) for name, leaf in zip(names, leaves)}
    if len(set(chains.values())) > 1:
        raise ValueError(
            "nuts.sample: every leaf of initial_state needs the same leading chain axis; "
            f"their lengths are {chains}"
        )
    num_chains = next(iter(chains.values()))
    libraries = {gradients.array_library(leaf) for leaf in leaves} | {_library(leaves[0], backend)}
    dtype = np.result_type(
        *(gradients.dtype_of(leaf) for leaf in leaves)
    )
    layout = structure.Layout(node, tuple(tuple(int(d) for d in leaf.shape[1:]) for leaf in leaves))
    if "jax" in libraries:
        import jax
        import jax.numpy as jnp

        dtype = jax.dtypes.canonicalize_dtype(dtype)
        parts = [jnp.reshape(jnp.asarray(leaf, dtype), (num_chains, -1)) for leaf in leaves]
        return jnp.concatenate(parts, axis=1), layout
    if "tensorflow" in libraries:
        import tensorflow as tf

        parts = [
            tf.reshape(tf.cast(tf.convert_to_tensor(leaf), dtype), (num_chains, -1))
            for leaf in leaves
        ]
        return tf.concat(parts, axis=1), layout
    if "torch" in libraries:
        import torch

        from pcbatch.backends.torch import torch_dtype

        device = next((leaf.device for leaf in leaves if isinstance(leaf, torch.Tensor)), None)
        parts = [
            torch.as_tensor(leaf, device=device).to(torch_dtype(dtype)).reshape(num_chains, -1)
            for leaf in leaves
        ]
        return torch.cat(parts, dim=1), layout
    parts = [np.asarray(leaf, dtype).reshape(num_chains, -1) for leaf in leaves]
    return np.concatenate(parts, axis=1), layout


def _data_leaves(
    data: Any, chain_axis: ChainAxis, num_chains: int, dtype: np.dtype[Any], library: str
) -> tuple[tuple[Any, ...], structure.Node | None]:
    """(the program's data input, the data's `structure.Node` or None without data).

    The input is a tuple of the data's leaves: a leaf with a chain axis as it is, any
    other with a leading axis of length 1, which the program shares with every chain.
    """
    if data is None:
        if chain_axis is not False:
            raise ValueError("nuts.sample: data_chain_axis is given, but no data")
        return (), None
    leaves, node = structure.flatten(data)
    names = node.paths()
    marked = _marked(chain_axis, names)
    program_leaves = []
    for name, leaf in zip(names, leaves):
        what = "data" if name == "" else f"data[{name!r}]"
        leaf = _data_array(leaf, what, dtype, library)
        if name in marked:
            if len(leaf.shape) < 1 or int(leaf.shape[0]) != num_chains:
                raise ValueError(
                    f"nuts.sample: {what} has shape {tuple(leaf.shape)}, but data_chain_axis "
                    f"marks it as one value per chain: its leading axis must be the number "
                    f"of chains, {num_chains}"
                )
            program_leaves.append(leaf)
        else:
            program_leaves.append(leaf[None])
    return tuple(program_leaves), node


def _marked(chain_axis: Any, names: list[str]) -> set[str]:
    """The data leaves ``data_chain_axis`` marks as per chain."""
    if chain_axis is True or chain_axis is False:
        return set(names) if chain_axis else set()
    wanted = [chain_axis] if isinstance(chain_axis, str) else chain_axis
    try:
        wanted = list(wanted)
    except TypeError:
        wanted = [None]
    if not all(isinstance(w, str) for w in wanted):
        raise TypeError(
            "nuts.sample: data_chain_axis takes True, False, or data leaf names (strings), "
            f"got {chain_axis!r}"
        )
    marked = set()
    for prefix in wanted:
        under = {n for n in names if n == prefix or n.startswith(prefix + ".")}
        if not under:
            raise ValueError(
                f"nuts.sample: data_chain_axis names {prefix!r}, which is no leaf of the data "
                f"(its leaves: {', '.join(repr(n) for n in names)})"
            )
        marked |= under
    return marked


def _data_array(leaf: Any, what: str, dtype: np.dtype[Any], library: str) -> Any:
    """A data leaf as an array; floats in the state's ``dtype``, and on JAX without
    64-bit mode 64-bit integers as the 32-bit ones JAX would run them as."""
    if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
        try:
            leaf = np.asarray(leaf)
        except Exception as error:  # noqa: BLE001 - the user's value, named in the error
            raise TypeError(f"nuts.sample: {what} is not an array ({error})") from None
    kind = gradients.dtype_of(leaf).kind
    if kind not in "biuf":
        raise TypeError(
            f"nuts.sample: {what} has dtype {leaf.dtype}; data leaves must be arrays of "
            "numbers or booleans"
        )
    target = None
    if kind == "f":
        target = dtype
    elif kind in "iu" and library == "jax":
        import jax

        target = jax.dtypes.canonicalize_dtype(leaf.dtype)
    if target is None or gradients.dtype_of(leaf) == target:
        return leaf
    array_library = gradients.array_library(leaf)
    if array_library == "tensorflow":
        import tensorflow as tf

        return tf.cast(leaf, target)
    if array_library == "jax":
        return leaf.astype(target)
    if array_library == "torch":
        from pcbatch.backends.torch import torch_dtype

        return leaf.to(torch_dtype(target))
    return np.asarray(leaf).astype(target)


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


def _on_one_jax_device(array: Any) -> bool:
    return gradients.array_library(array) == "jax" and len(array.devices()) == 1


def _swap_chains(samples: Any) -> Any:
    """``[chains, draws, ...]`` -> ``[draws, chains, ...]``, keeping the backend's array type."""
    perm = (1, 0) + tuple(range(2, len(samples.shape)))
    if gradients.array_library(samples) == "tensorflow":
        import tensorflow as tf

        return tf.transpose(samples, perm)
    if gradients.array_library(samples) == "torch":
        return samples.permute(perm)
    return samples.transpose(perm)


def _float_state(state: Any, backend: Any, what: str = "initial_state") -> Any:
    """``state`` as float32 or float64 arrays of its library (see `sample`'s rules)."""
    if not (hasattr(state, "shape") and hasattr(state, "dtype")):
        state = np.asarray(state)  # a list or tuple of numbers
    if len(state.shape) < 1:
        raise ValueError(
            f"nuts.sample: {what} needs a leading chain dimension, "
            f"[num_chains, *event_shape]; got a scalar ({state!r})"
        )
    dtype = gradients.dtype_of(state)
    if dtype in (np.float32, np.float64):
        return state
    if dtype.kind in "iu":
        return _as_default_float(state, backend)
    if dtype == np.float16 or dtype.name == "bfloat16":
        advice = f"float32 or float64 (e.g. {what}.astype(np.float32))"
        reason = "its rounding error makes every leapfrog trajectory diverge"
    else:
        advice = "real numbers as float32 or float64"
        reason = "the sampler's state is a point of a real vector space"
    raise TypeError(
        f"nuts.sample: {what} has dtype {dtype.name}, which NUTS cannot use "
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
    if library == "torch":  # NumPy's default float, as per-example code means on Torch
        import torch

        return state.to(torch.float64)
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
    if num_samples < 1:
        raise ValueError(
            f"nuts.sample: num_samples must be at least 1, got {num_samples} (nuts.warmup "
            "runs a warmup alone)"
        )
    if num_warmup < 0:
        raise ValueError(f"nuts.sample: num_warmup must be at least 0, got {num_warmup}")
    if num_samples + num_warmup >= 2**31:
        raise ValueError(
            "nuts.sample: num_warmup + num_samples must be below 2**31, got "
            f"{num_warmup} + {num_samples}"
        )
    if not 1 <= max_tree_depth <= MAX_SUPPORTED_TREE_DEPTH:
        raise ValueError(
            f"nuts.sample: max_tree_depth must be in [1, {MAX_SUPPORTED_TREE_DEPTH}], got "
            f"{max_tree_depth}"
        )


def _count(value: Any, name: str) -> int:
    """``value`` as an int: an integer, or a float with an integer value (``1e3``); a
    fraction is an error rather than a count silently rounded down."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            if isinstance(value, float) and value.is_integer():
                return int(value)
    raise TypeError(f"nuts.sample: {name} must be an integer, got {value!r}")


@functools.lru_cache(maxsize=32)
def _compiled(
    value_and_grad: Callable[..., Any],
    capacity: int,
    max_tree_depth: int,
    event_shape: tuple[int, ...],
    target: float,
    show_progress: bool,
) -> BatchedFunction:
    """One `Context` per sampler configuration, so its compiled programs are reused (the
    numbers of draws and the data are inputs of the program, not part of it)."""
    from pcbatch.api import Context

    return program.build(
        Context(),
        value_and_grad,
        capacity=int(capacity),
        max_tree_depth=int(max_tree_depth),
        event_shape=event_shape,
        target_accept=target,
        on_draw=progress.report_draws if show_progress else None,
    )


class NoUTurnSampler:
    """A TFP-style transition kernel on the same batched program: one draw per `one_step`.

    ``bootstrap_results(state)`` starts the kernel's bookkeeping (``state`` as
    `sample`'s ``initial_state``, structures included; ``data``, ``data_chain_axis``,
    ``transforms`` and ``inverse_mass`` as `sample`'s); ``one_step(state, results)``
    returns ``(next_state, results)`` where ``results`` holds the step's `NutsResult`
    (``last``) and the draw counter, so successive steps use fresh random streams. A
    step does not adapt: it samples at ``step_size`` and ``inverse_mass``
    (``sample(..., num_warmup=0)``), so steps from the state each returned draw what
    one ``sample`` with ``num_warmup=0`` draws. Use `sample` for many draws: it batches
    across draws too, and adapts with ``num_warmup``.

    With ``transforms`` the state is constrained, as `sample`'s: a step given back the
    very arrays the last step returned continues from the unconstrained position it
    kept (no round trip through the constrained space, which could round a simplex
    entry to 0 and leave the support); a state of other arrays (changed between
    steps, say) starts from their unconstrained values. NumPy arrays a step returns
    are read-only, so that a change makes new arrays.
    """

    def __init__(
        self,
        target_log_prob_fn: Callable[[Any], Any] | None = None,
        step_size: Any = 0.1,
        max_tree_depth: int = 10,
        *,
        seed: Any = 0,
        value_and_grad: Callable[..., Any] | None = None,
        data: Any = None,
        data_chain_axis: ChainAxis = False,
        transforms: Any = None,
        inverse_mass: Any = None,
    ) -> None:
        self.target_log_prob_fn = target_log_prob_fn
        self.step_size = step_size
        self.max_tree_depth = max_tree_depth
        self.seed = seed
        self.value_and_grad = value_and_grad
        self.data = data
        self.data_chain_axis = data_chain_axis
        self.transforms = transforms
        self.inverse_mass = inverse_mass

    @property
    def is_calibrated(self) -> bool:
        return True

    def bootstrap_results(self, current_state: Any) -> KernelResults:
        return KernelResults(draw=0, last=None)

    def one_step(
        self, current_state: Any, previous_kernel_results: KernelResults
    ) -> tuple[Any, KernelResults]:
        previous = previous_kernel_results
        kept = previous.kept_state_for(current_state)
        result = _sample(
            self.target_log_prob_fn,
            current_state if kept is None else kept,
            num_samples=1,
            num_warmup=0,  # a kernel step does not adapt
            step_size=self.step_size,
            max_tree_depth=self.max_tree_depth,
            seed=self.seed,
            value_and_grad=self.value_and_grad,
            data=self.data,
            data_chain_axis=self.data_chain_axis,
            # A kept state has its transforms and knows its draw counter.
            transforms=self.transforms if kept is None else None,
            inverse_mass=self.inverse_mass,
            adapt_mass="off",  # nothing adapts; a dense inverse_mass stays dense
            first_draw=previous.draw if kept is None else 0,
            progress_bar=False,  # one draw per call: nothing to watch
            draws_per_call=1,  # its own program: a buffer of one draw
        )
        next_state = _read_only(_first_draw(result.samples))
        return next_state, KernelResults(previous.draw + 1, result, next_state)


def _first_draw(samples: Any) -> Any:
    """Draw 0 of ``samples`` (``[draws, chains, ...]`` per leaf), in their structure."""
    if not structure.is_structured(samples):
        return samples[0]
    leaves, node = structure.flatten(samples)
    return node.unflatten([leaf[0] for leaf in leaves])


def _read_only(state: Any) -> Any:
    """``state`` with its NumPy leaves made read-only (views: the draws stay writable)."""
    for leaf in _leaves_of(state):
        if isinstance(leaf, np.ndarray):
            leaf.flags.writeable = False
    return state


def _leaves_of(state: Any) -> list[Any]:
    if not structure.is_structured(state):
        return [state]
    leaves: list[Any] = structure.flatten(state)[0]
    return leaves


@dataclasses.dataclass(frozen=True)
class KernelResults:
    """`NoUTurnSampler` bookkeeping: the next draw counter, the last step's result, and
    the state that step returned."""

    draw: int
    last: NutsResult | None
    returned: Any = None

    def kept_state_for(self, state: Any) -> AdaptedState | None:
        """The last step's `AdaptedState` where ``state`` is the very state it returned
        (the same arrays, leaf for leaf), else None: ``state`` starts anew."""
        if self.last is None or self.last.state is None or self.returned is None:
            return None
        returned, given = _leaves_of(self.returned), _leaves_of(state)
        if len(returned) != len(given) or any(a is not b for a, b in zip(returned, given)):
            return None
        if structure.is_structured(state) and (
            structure.flatten(state)[1] != structure.flatten(self.returned)[1]
        ):
            return None
        return self.last.state
