"""Seed-compatible name for the batched stack machine (real home: ``pcbatch.vm``)."""

from pcbatch.errors import StackOverflowError
from pcbatch.vm.machine import DEFAULT_MAX_STACK_DEPTH, StepLimitError, execute
from pcbatch.vm.runner import run

__all__ = ["DEFAULT_MAX_STACK_DEPTH", "StackOverflowError", "StepLimitError", "execute", "run"]
