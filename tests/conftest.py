"""Test-wide settings: every compilation in the suite runs the IR verifier between passes."""

from pcbatch.passes import pipeline

pipeline.VERIFY_BY_DEFAULT = True
