"""Seed-compatible name for lowering (real home: ``pcbatch.passes.lower_calls``)."""

from pcbatch.passes.lower_calls import run as lower_function_calls
from pcbatch.passes.stack_opt import run as fuse_pop_push

__all__ = ["fuse_pop_push", "lower_function_calls"]
