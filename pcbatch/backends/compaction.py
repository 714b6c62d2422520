"""The ``compaction`` option of the compiled backends: which bucket widths it names.

A compiled backend (`JaxBackend`, `TensorFlowBackend`) takes ``compaction``; the
staged machine (``pcbatch/vm/compact.py``) runs a block with few active threads on
a bucket of that many gathered lanes. The option lives here, with the backends that
take it and check it at construction; the machine reads the widths from `buckets`.
"""

from __future__ import annotations

from collections.abc import Sequence

#: ``"auto"`` makes no bucket narrower than this (it would save little over the next one
#: up and cost one more compilation of every block)
SMALLEST = 8
#: ``compaction="auto"`` uses at most this many buckets (compile time grows with each)
MAX_AUTO_BUCKETS = 3


def buckets(option, batch_size: int) -> list[int]:
    """The bucket widths (ascending) for a backend's ``compaction`` option.

    ``None``/``False``: none (full width always). ``"auto"``: the largest power of
    two at most a quarter of the batch, then every eighth of it down to `SMALLEST`,
    at most `MAX_AUTO_BUCKETS` (1,000 lanes: 128 and 16). A sequence of ints: those
    widths, keeping the ones below the batch width.
    """
    if option is None or option is False:
        return []
    if option == "auto":
        sizes, k = [], 1 << max(batch_size // 4, 1).bit_length() - 1
        while k >= SMALLEST and len(sizes) < MAX_AUTO_BUCKETS:
            sizes.append(k)
            k //= 8
        return sorted(sizes)
    if isinstance(option, Sequence) and not isinstance(option, str):
        if not all(isinstance(k, int) and k > 0 for k in option):
            raise ValueError(f"compaction buckets must be positive ints, not {option!r}")
        return sorted({k for k in option if k < batch_size})
    raise ValueError(f"compaction must be None, 'auto' or a sequence of ints, not {option!r}")


def parse_option(text: str | None):
    """A command line's compaction option: None, ``"auto"`` or ``"16,128"`` (widths)."""
    if text is None or text == "auto":
        return text
    try:
        return tuple(int(k) for k in text.split(","))
    except ValueError:
        raise ValueError(f"compaction: 'auto' or widths like '16,128', not {text!r}") from None


def check_option(option) -> None:
    """Raises ValueError for an option `buckets` would reject (at construction time)."""
    buckets(option, 2)
