"""The compiler pipeline: one explicit list of named passes.

``compile_program(program, sig, backend)`` takes a structured program and the
argument types of its ``main`` to a lowered program the VM can run. Each pass
is ``run(program, ctx) -> program``; with ``verify=True`` (always on in tests)
the IR verifier runs after every pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pcbatch.passes import (
    allocate,
    coalesce,
    infer_types,
    lower_calls,
    order_blocks,
    prune,
    schedule,
    stack_opt,
    tail_calls,
    thread_jumps,
)

if TYPE_CHECKING:
    from pcbatch.ir.nodes import Program


@dataclasses.dataclass(frozen=True)
class PassContext:
    backend: Any
    sig: Sequence
    schedule: str = order_blocks.DEFAULT


def _infer_types(program, ctx: PassContext):
    return infer_types.run(program, ctx.backend, ctx.sig)


PASSES = (
    ("prune", prune.run),
    ("infer_types", _infer_types),
    ("tail_calls", tail_calls.run),
    ("schedule", schedule.run),
    ("coalesce", coalesce.run),
    ("allocate", allocate.run),
    ("lower_calls", lower_calls.run),
    ("stack_opt", stack_opt.run),
    ("thread_jumps", thread_jumps.run),
    ("order_blocks", order_blocks.run),
)

# Set by tests (conftest) so every compilation in the suite is verified.
VERIFY_BY_DEFAULT = False


UNTYPED_PASSES = tuple(p for p in PASSES if p[0] != "infer_types")


def compile_program(
    program: Program,
    sig: Sequence[Any] | None,
    backend: Any,
    *,
    verify: bool | None = None,
    stop_after: str | None = None,
    schedule: str | None = None,
) -> Program:
    """Runs the pipeline; ``stop_after`` names a pass to stop after (for golden tests).

    With ``sig`` or ``backend`` None, type inference is skipped: the result shows
    the program's shape but cannot run.
    """
    if verify is None:
        verify = VERIFY_BY_DEFAULT
    check = _verifier() if verify else None
    if check:
        check(program)
    typed = sig is not None and backend is not None
    ctx = PassContext(backend, tuple(sig) if typed else (), schedule or order_blocks.DEFAULT)
    for name, run in PASSES if typed else UNTYPED_PASSES:
        program = run(program, ctx)
        if check:
            check(program)
        if name == stop_after:
            break
    return program


def _verifier():
    from pcbatch.ir import verify

    return verify.verify
