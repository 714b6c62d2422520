"""Seed-compatible name for type inference (real home: ``pcbatch.passes.infer_types``)."""

from pcbatch.passes.infer_types import run as infer_types

__all__ = ["infer_types"]
