"""Seed-compatible name for the batched stack machine (real home: ``pcbatch.vm``)."""

from pcbatch.errors import StackOverflowError
from pcbatch.vm.dispatch import execute
from pcbatch.vm.failures import DEFAULT_MAX_STACK_DEPTH, StepLimitError
from pcbatch.vm.runner import run

__all__ = ["DEFAULT_MAX_STACK_DEPTH", "StackOverflowError", "StepLimitError", "execute", "run"]
