"""Seed-compatible name for variable allocation (real home: ``pcbatch.passes.allocate``)."""

from pcbatch.passes.allocate import may_write  # noqa: F401
