"""Seed-compatible name for liveness (real home: ``pcbatch.analysis.liveness``)."""

from pcbatch.analysis.liveness import block_liveness, live_after_instructions

__all__ = ["block_liveness", "live_after_instructions"]
