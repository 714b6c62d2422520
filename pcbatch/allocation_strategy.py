"""Seed-compatible name for variable allocation (real home: ``pcbatch.passes.allocate``)."""

from pcbatch.passes.allocate import may_write

__all__ = ["may_write"]
