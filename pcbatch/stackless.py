"""Seed-compatible name for stackless execution (real home: ``pcbatch.vm.stackless``)."""

from pcbatch.vm.stackless import execute  # noqa: F401
