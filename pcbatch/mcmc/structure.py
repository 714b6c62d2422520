"""Structured states and data: pytrees of arrays, and the flat vectors the sampler uses.

A structure is what JAX calls a pytree: dicts (keys sorted, as JAX sorts them;
an ``OrderedDict`` keeps its order), tuples, namedtuples, lists and None (no
leaves), nested in any way, with arrays or numbers as leaves. Any other object
is a leaf, except where JAX is imported and ``jax.tree_util`` flattens it (a
dataclass registered with JAX, say): then it is a node with JAX's children. The
order and the names of the leaves are JAX's for every container above, so a
state flattens the same way on every backend.

Each leaf has a name, its key path joined by dots: ``"mu"`` and ``"theta"`` for
a dict, ``"0"``, ``"1"`` for a tuple, field names for a namedtuple or a
dataclass, ``"a.b"`` for ``{"a": {"b": ...}}``.

The sampler's state is ONE vector per chain: `Layout` records where each leaf
lies in it (`Layout.unflatten` cuts a vector into the structure,
`Layout.flatten` joins a structure of per-chain values into the vector). Both
are written with slicing and ``reshape`` only, so they run on per-example
values of every backend (NumPy's ``BatchedArray``, JAX tracers, TensorFlow
tensors through their ``reshape``).
"""

from __future__ import annotations

import collections
import dataclasses
import numbers
import sys
from typing import Any

import numpy as np

__all__ = ["Layout", "Node", "flatten", "is_structured"]


@dataclasses.dataclass(frozen=True)
class Node:
    """The shape of a structure without its leaves (hashable: a compile-cache key).

    ``kind`` is "leaf", "dict", "tuple", "list", "namedtuple", "none" or "jax";
    ``names`` the key of each child as a string, ``meta`` what rebuilding needs
    (the dict's keys and type, the namedtuple's class, JAX's one-level treedef).
    """

    kind: str
    names: tuple = ()
    children: tuple = ()
    meta: Any = None

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(child.num_leaves for child in self.children)

    def paths(self) -> list:
        """Each leaf's name: its key path, joined by dots ("" for a bare leaf)."""
        if self.kind == "leaf":
            return [""]
        found = []
        for name, child in zip(self.names, self.children):
            found.extend(f"{name}.{rest}" if rest else name for rest in child.paths())
        return found

    def unflatten(self, leaves) -> Any:
        """The structure with ``leaves`` (in `flatten`'s order) in place of its leaves."""
        leaves = iter(leaves)
        tree = self._build(leaves)
        if next(leaves, _END) is not _END:
            raise ValueError("more leaves than the structure holds")
        return tree

    def _build(self, leaves) -> Any:
        if self.kind == "leaf":
            return next(leaves)
        if self.kind == "none":
            return None
        items = [child._build(leaves) for child in self.children]
        if self.kind == "dict":
            keys, cls = self.meta
            pairs = zip(keys, items)
            return cls(pairs) if cls in (dict, collections.OrderedDict) else dict(pairs)
        if self.kind == "namedtuple":
            return self.meta(*items)
        if self.kind == "tuple":
            return tuple(items)
        if self.kind == "list":
            return list(items)
        return self.meta.unflatten(items)  # JAX's one-level treedef


_END = object()
_LEAF = Node("leaf")


def is_structured(value: Any) -> bool:
    """Whether ``value`` is a structure rather than one array (or list of numbers)."""
    # A list at the top is one array, as np.asarray reads it.
    return not (isinstance(value, list) or _is_leaf_value(value))


def flatten(tree: Any) -> tuple:
    """(leaves, `Node`): the leaves of ``tree`` in order, and its structure."""
    leaves: list = []
    node = _flatten(tree, leaves)
    return leaves, node


def _is_leaf_value(value: Any) -> bool:
    return (hasattr(value, "shape") and hasattr(value, "dtype")) or isinstance(
        value, (numbers.Number, np.generic)
    )


def _flatten(tree: Any, leaves: list) -> Node:
    if _is_leaf_value(tree):
        leaves.append(tree)
        return _LEAF
    if tree is None:
        return Node("none")
    if isinstance(tree, dict):
        keys = list(tree) if isinstance(tree, collections.OrderedDict) else _sorted(tree)
        children = tuple(_flatten(tree[k], leaves) for k in keys)
        return Node("dict", tuple(str(k) for k in keys), children, (tuple(keys), type(tree)))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        children = tuple(_flatten(v, leaves) for v in tree)
        return Node("namedtuple", tuple(tree._fields), children, type(tree))
    if isinstance(tree, (tuple, list)):
        children = tuple(_flatten(v, leaves) for v in tree)
        kind = "tuple" if isinstance(tree, tuple) else "list"
        return Node(kind, tuple(str(i) for i in range(len(tree))), children)
    jax_node = _jax_children(tree)
    if jax_node is not None:
        names, children, treedef = jax_node
        nodes = tuple(_flatten(child, leaves) for child in children)
        return Node("jax", names, nodes, treedef)
    leaves.append(tree)  # checked by whoever needs an array here
    return _LEAF


def _sorted(mapping: dict) -> list:
    try:
        return sorted(mapping)
    except TypeError:
        raise TypeError(
            f"a dict in a structured state or data needs keys that sort (JAX's order), got "
            f"{list(mapping)!r}"
        ) from None


def _jax_children(tree: Any):
    """(names, children, treedef) of ``tree`` one level down, if JAX (already imported)
    flattens it; else None."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    pairs, treedef = jax.tree_util.tree_flatten_with_path(tree, is_leaf=lambda x: x is not tree)
    if len(pairs) == 1 and pairs[0][1] is tree:
        return None  # a leaf to JAX too
    names = tuple(_key_name(path[-1]) for path, _ in pairs)
    return names, [child for _, child in pairs], treedef


def _key_name(key: Any) -> str:
    for attribute in ("name", "key", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each leaf of a structured state lies in the chain's vector.

    ``shapes`` are the leaves' shapes for ONE chain (without the chain axis); leaf
    ``k`` is ``vector[offsets[k] : offsets[k] + sizes[k]]`` reshaped to ``shapes[k]``.
    """

    structure: Node
    shapes: tuple

    @property
    def names(self) -> list:
        return self.structure.paths()

    @property
    def sizes(self) -> tuple:
        return tuple(int(np.prod(s, dtype=np.int64)) for s in self.shapes)

    @property
    def offsets(self) -> tuple:
        return tuple(int(o) for o in np.cumsum((0,) + self.sizes[:-1]))

    @property
    def size(self) -> int:
        return sum(self.sizes)

    def unflatten(self, vector, reshape=None) -> Any:
        """The structure of ONE chain's ``vector`` (``[..., size]``: leading axes kept).

        ``reshape(x, shape)`` defaults to ``x.reshape(shape)`` (TensorFlow tensors need
        ``tf.reshape``)."""
        reshape = reshape or (lambda x, shape: x.reshape(shape))
        lead = tuple(vector.shape[:-1])
        leaves = []
        for offset, size, shape in zip(self.offsets, self.sizes, self.shapes):
            part = vector[..., offset : offset + size]
            leaves.append(reshape(part, lead + tuple(shape)))
        return self.structure.unflatten(leaves)

    def flatten(self, tree, what: str, concatenate=None, reshape=None, dtype=None):
        """ONE chain's structure (a gradient, say) as its vector: the inverse of
        `unflatten`. Each leaf must have its shape in the state (a number stands for
        a leaf of that value everywhere)."""
        reshape = reshape or (lambda x, shape: x.reshape(shape))
        concatenate = concatenate or np.concatenate
        leaves, node = flatten(tree)
        if node != self.structure:
            raise ValueError(
                f"{what} must have the state's structure, with leaves "
                f"{', '.join(self.names)}; got one with leaves "
                f"{', '.join(node.paths()) or 'none'}"
            )
        parts = []
        for name, leaf, shape in zip(self.names, leaves, self.shapes):
            if not hasattr(leaf, "shape"):
                leaf = np.full(shape, leaf, dtype)
            elif tuple(leaf.shape) != tuple(shape):
                raise ValueError(
                    f"{what}: leaf {name!r} has shape {tuple(leaf.shape)} but the state's "
                    f"leaf has shape {tuple(shape)} (one chain's)"
                )
            parts.append(reshape(leaf, (-1,)))
        return parts[0] if len(parts) == 1 else concatenate(parts)
