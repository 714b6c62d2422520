"""Seed-compatible name for the batched stack machine (real home: ``pcbatch.vm``)."""

from pcbatch.errors import StackOverflowError  # noqa: F401
from pcbatch.vm.machine import DEFAULT_MAX_STACK_DEPTH, StepLimitError, execute  # noqa: F401
from pcbatch.vm.runner import run  # noqa: F401
