"""Test-wide settings: every compilation in the suite runs the IR verifier between passes."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep TensorFlow's start-up chatter out

from pcbatch.passes import pipeline  # noqa: E402

pipeline.VERIFY_BY_DEFAULT = True
