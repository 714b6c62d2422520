"""Counter-based random numbers: Threefry-2x32 (20 rounds), written for one example.

A chain's random numbers are a pure function of (seed, chain index, draw, stream):
no generator state travels between chains, so a chain draws the same numbers
whether it runs alone or beside a thousand others, on any backend and under
any schedule. Threefry is the counter-based block cipher of Salmon et al.,
"Parallel random numbers: as easy as 1, 2, 3" (SC 2011), also JAX's default.

Only wrapping uint32 addition and multiplication, floor division and xor are
used, so the same code runs under NumPy, ``jax.numpy`` and TensorFlow's NumPy.
Rotations are ``x * 2**r + x // 2**(32 - r)``: the two parts share no bits.

Streams: the 32-bit stream counter holds a tag in its top 8 bits (what the
numbers are for) and an index below (which one), see `stream`.
"""

from __future__ import annotations

import numpy as np

from pcbatch.backends.batched_array import elementwise

__all__ = ["normal", "stream", "threefry2x32", "uniform", "uniform_pair"]

_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_PARITY = np.uint32(0x1BD11BDA)

MOMENTUM, DIRECTION, ACCEPT, SUBTREE, STEP_SEARCH = 1, 2, 3, 4, 5


def stream(tag: int, index):
    """The stream counter for ``index`` (below 2**24) under ``tag``."""
    return np.uint32(tag << 24) + _as_u32(index)


def _rotate_left(x, r: int):
    return x * np.uint32(1 << r) + x // np.uint32(1 << (32 - r))


@elementwise
def threefry2x32(key0, key1, count0, count1):
    """The Threefry-2x32-20 block: two uint32 words from a 2-word key and 2-word counter."""
    key2 = np.bitwise_xor(np.bitwise_xor(key0, key1), _PARITY)
    keys = (key0, key1, key2)
    x0, x1 = count0 + key0, count1 + key1
    for group in range(5):
        for r in _ROTATIONS[4 * (group % 2) : 4 * (group % 2) + 4]:
            x0 = x0 + x1
            x1 = np.bitwise_xor(_rotate_left(x1, r), x0)
        injection = group + 1
        x0 = x0 + keys[injection % 3]
        x1 = x1 + keys[(injection + 1) % 3] + np.uint32(injection)
    return x0, x1


def _as_u32(value):
    # No np.asarray: a batched value must stay an array of the running backend.
    if isinstance(value, (int, np.integer)):
        return np.uint32(value)
    return value.astype(np.uint32)


def uniform_pair(seed, chain, draw, stream_counter, dtype):
    """Two independent uniforms in (0, 1) of ``dtype`` (arrays shaped like the stream)."""
    with np.errstate(over="ignore"):  # uint32 arithmetic wraps by design
        words = threefry2x32(_as_u32(seed), _as_u32(chain), _as_u32(draw), stream_counter)
    # 24 bits fit a float32 mantissa exactly; the half-step offset keeps 0 out.
    scale = np.asarray(2.0**-24, dtype)
    return tuple(((w // np.uint32(256)).astype(dtype) + 0.5) * scale for w in words)


def uniform(seed, chain, draw, tag: int, index, dtype):
    """One uniform in (0, 1) for stream (``tag``, ``index``)."""
    return uniform_pair(seed, chain, draw, stream(tag, index), dtype)[0]


def normal(seed, chain, draw, tag: int, size: int, dtype):
    """``size`` standard normals (Box-Muller on one counter block each)."""
    u1, u2 = uniform_pair(seed, chain, draw, stream(tag, np.arange(size)), dtype)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(np.asarray(2.0 * np.pi, dtype) * u2)
