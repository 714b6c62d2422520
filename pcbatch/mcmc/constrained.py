"""`nuts.sample(..., transforms=...)`: sampling constrained parameters in unconstrained space.

`Constraints` records which `transforms.Transform` each leaf of the state has. The
sampler never sees the constrained space: the host maps the initial state through
each leaf's ``inverse`` (`Constraints.unconstrain`), the target the program calls is
``log p(forward(y)) + log |det J|`` (`Constraints.target` on JAX and TensorFlow,
where automatic differentiation goes through ``forward``; `Constraints.value_and_grad`
on NumPy, where the user's gradient at ``forward(y)`` is carried back to ``y`` by each
transform's ``pullback``: the chain rule), and the draws are mapped back through
``forward`` (`Constraints.constrain`).

A transform is written for one chain's leaf; on the host, over many chains and draws,
it runs vectorized: `BatchedArray` on NumPy, ``jax.vmap``, ``tf.vectorized_map``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from pcbatch.backends.batched_array import vectorize
from pcbatch.mcmc import gradients, structure, tracing
from pcbatch.mcmc.transforms import Transform


@dataclasses.dataclass(frozen=True)
class Constraints:
    """Each leaf's transform (None: unconstrained) and constrained shape (one chain's).

    ``node`` is the state's `structure.Node`, None for a state that is one array.
    Hashable, so the wrapped targets are cached and the compiled sampler is found again.
    """

    node: Any
    transforms: tuple
    shapes: tuple

    def _leaves(self, tree) -> list:
        if self.node is None:
            return [tree]
        return structure.flatten(tree)[0]

    def _tree(self, leaves: list) -> Any:
        return leaves[0] if self.node is None else self.node.unflatten(leaves)

    def forward_one(self, params_u) -> tuple:
        """(ONE chain's constrained parameters, the summed log |det J|)."""
        leaves, log_det = [], 0.0
        for transform, leaf in zip(self.transforms, self._leaves(params_u)):
            if transform is None:
                leaves.append(leaf)
            else:
                leaves.append(transform.forward(leaf))
                log_det = log_det + transform.log_det_jacobian(leaf)
        return self._tree(leaves), log_det

    def unconstrain(self, state) -> Any:
        """The chains' initial state (constrained, chain axis first) in unconstrained space."""
        leaves = []
        names = _names(self.node)
        for name, transform, leaf in zip(names, self.transforms, self._leaves(state)):
            if transform is None:
                leaves.append(leaf)
                continue
            with np.errstate(divide="ignore", invalid="ignore"):  # reported below
                free = _per_example(transform.inverse, leaf, 1)
            if tracing.is_traced(free):
                # Inside jax.jit or tf.function the values are not known yet: a start
                # outside the support gives non-finite draws instead of this error.
                leaves.append(free)
                continue
            finite = np.isfinite(gradients.to_numpy(free))
            finite = finite.reshape(int(free.shape[0]), -1).all(axis=1)
            if not finite.all():
                what = "initial_state" if name == "" else f"initial_state[{name!r}]"
                chains = np.flatnonzero(~finite)[:10].tolist()
                raise ValueError(
                    f"nuts.sample: {what} is outside its transform's support at chains "
                    f"{chains} ({type(transform).__name__.strip('_')}'s inverse is not finite "
                    "there); start every chain inside the constraint"
                )
            leaves.append(free)
        return self._tree(leaves)

    def constrain(self, draws) -> Any:
        """Draws ``[draws, chains, *unconstrained shape]`` per leaf, in constrained space."""
        leaves = [
            leaf if transform is None else _per_example(transform.forward, leaf, 2)
            for transform, leaf in zip(self.transforms, self._leaves(draws))
        ]
        return self._tree(leaves)

    def unconstrained_shapes(self) -> tuple:
        return tuple(
            shape if t is None else t.unconstrained_shape(shape)
            for t, shape in zip(self.transforms, self.shapes)
        )


def _names(node) -> list:
    return [""] if node is None else node.paths()


def build(transforms, state) -> Constraints | None:
    """The `Constraints` of ``transforms=`` for ``state`` (None: no transform at all).

    ``transforms`` is one `Transform` (for a state that is one array), or a dict of
    leaf names (or name prefixes, as `NutsResult.names` gives them) to transforms, or a
    structure like the state's with transforms (None for unconstrained leaves).
    """
    if transforms is None:
        return None
    structured = structure.is_structured(state)
    leaves, node = structure.flatten(state) if structured else ([state], None)
    names = _names(node)
    shapes = tuple(tuple(int(d) for d in np.shape(leaf)[1:]) for leaf in leaves)
    if isinstance(transforms, Transform):
        if structured:
            raise TypeError(
                "nuts.sample: transforms= is one transform, but initial_state is a structure; "
                "give a dict of leaf names to transforms, e.g. {"
                f"{names[0]!r}: nuts.transforms.positive()}}"
            )
        chosen = [transforms]
    else:
        chosen = _by_name(transforms, names)
    for name, transform, shape in zip(names, chosen, shapes):
        if transform is not None:
            try:
                transform.unconstrained_shape(shape)
            except ValueError as error:
                what = "initial_state" if name == "" else f"initial_state[{name!r}]"
                raise ValueError(f"nuts.sample: transforms= for {what}: {error}") from None
    if all(t is None for t in chosen):
        return None
    return Constraints(node, tuple(chosen), shapes)


def _by_name(transforms, names: list) -> list:
    spec, spec_node = structure.flatten(transforms)
    chosen: list = [None] * len(names)
    for prefix, transform in zip(spec_node.paths(), spec):
        if not isinstance(transform, Transform):
            raise TypeError(
                f"nuts.sample: transforms[{prefix!r}] is {transform!r}, not a transform; use "
                "nuts.transforms.positive(), interval(...), ... or custom(...)"
            )
        under = [k for k, n in enumerate(names) if n == prefix or n.startswith(prefix + ".")]
        if not under or prefix == "":
            raise ValueError(
                f"nuts.sample: transforms= names {prefix!r}, which is no leaf of initial_state "
                f"(its leaves: {', '.join(repr(n) for n in names)})"
            )
        for k in under:
            if chosen[k] is not None:
                raise ValueError(f"nuts.sample: transforms= gives leaf {names[k]!r} two transforms")
            chosen[k] = transform
    return chosen


def _per_example(function, array, lead: int):
    """``function`` of one example, over ``array``'s ``lead`` leading axes, vectorized in
    ``array``'s library."""
    shape = tuple(int(d) for d in array.shape)
    library = gradients.array_library(array)
    if library == "tensorflow":
        import tensorflow as tf

        rows = tf.reshape(array, (-1, *shape[lead:]))
        out = tf.vectorized_map(function, rows)
        return tf.reshape(out, shape[:lead] + tuple(int(d) for d in out.shape[1:]))
    rows = array.reshape((-1, *shape[lead:]))
    if library == "jax":
        import jax

        out = jax.vmap(function)(rows)
    elif library == "torch":  # NumPy's meaning on the tensors' device (`torch_values`)
        from pcbatch.backends.torch import TorchBackend

        out = TorchBackend(device=array.device).vectorize(function)(rows)
    else:
        out = np.asarray(vectorize(function)(np.asarray(rows)))
    return out.reshape(shape[:lead] + tuple(out.shape[1:]))


@functools.lru_cache(maxsize=32)
def target(log_prob, constraints: Constraints):
    """``log_prob`` (of constrained parameters) as a density of the unconstrained ones."""

    def unconstrained_log_prob(params_u, *data):
        params, log_det = _forward_one(constraints, params_u)
        return log_prob(params, *data) + log_det

    return unconstrained_log_prob


def _forward_one(constraints: Constraints, params_u) -> tuple:
    """`Constraints.forward_one`; on Torch's plain tensors (the target is torch code, under
    ``torch.func``) the transforms, written with NumPy calls, run on one-example torch
    views (`pcbatch.backends.torch_values`), whose operations are torch's: differentiable."""
    leaves = constraints._leaves(params_u)
    if not leaves or gradients.array_library(leaves[0]) != "torch":
        return constraints.forward_one(params_u)
    from pcbatch.backends.torch_values import TorchBatched

    views = [TorchBatched(leaf[None]) for leaf in leaves]
    params, log_det = constraints.forward_one(constraints._tree(views))
    plain = [leaf.data[0] if isinstance(leaf, TorchBatched) else leaf
             for leaf in constraints._leaves(params)]
    log_det = log_det.data[0] if isinstance(log_det, TorchBatched) else log_det
    return constraints._tree(plain), log_det


@functools.lru_cache(maxsize=32)
def value_and_grad(function, constraints: Constraints):
    """The user's NumPy ``value_and_grad`` (of constrained parameters) for unconstrained
    ones: each leaf's gradient carried back through its transform's ``pullback``."""

    def unconstrained_value_and_grad(params_u, *data):
        params, log_det = constraints.forward_one(params_u)
        logp, grad = function(params, *data)
        if constraints.node is None:
            grad_leaves = [grad]
        else:
            grad_leaves, grad_node = structure.flatten(grad)
            if grad_node != constraints.node:
                names = ", ".join(constraints.node.paths())
                raise ValueError(
                    "value_and_grad's gradient must have the state's structure, with leaves "
                    f"{names}; got one with leaves {', '.join(grad_node.paths()) or 'none'}"
                )
        leaves_u = constraints._leaves(params_u)
        grads = []
        for transform, y, g in zip(constraints.transforms, leaves_u, grad_leaves):
            if transform is None:
                grads.append(g)
            else:
                shape = constraints.shapes[len(grads)]
                grads.append(transform.pullback(y, np.zeros(shape, y.dtype) + g))
        return logp + log_det, constraints._tree(grads)

    return unconstrained_value_and_grad
