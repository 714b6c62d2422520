"""Seed-compatible name for stackless execution (real home: ``pcbatch.vm.stackless``)."""

from pcbatch.vm.stackless import execute

__all__ = ["execute"]
