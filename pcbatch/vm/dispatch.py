"""The one place that chooses how a lowered program runs: eager or staged, plain or refill.

A backend with ``staged = True`` (JAX, TensorFlow) runs the staged machine
(`pcbatch.vm.staged`), which traces the whole run into one compiled loop; any other
backend runs the eager machine (`pcbatch.vm.machine`) one block at a time. With
``width``, the inputs run through that many lanes, refilled as threads finish
(`pcbatch.vm.refill` eagerly, `pcbatch.vm.staged_refill` staged). With
``return_status``, a failed batch member gets a status instead of raising: the
staged machine reports per lane; the eager one, which stops the whole batch at a
failure, reruns each member alone to tell which failed (`_eager_with_status`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from pcbatch.backends.numpy import NumpyBackend
from pcbatch.errors import LaneStatus, StackOverflowError, is_lane_check_failure
from pcbatch.ir.nodes import Program
from pcbatch.ir.types import flatten, map_pattern
from pcbatch.vm import machine, refill, staged
from pcbatch.vm.failures import DEFAULT_MAX_STACK_DEPTH, StepLimitError
from pcbatch.vm.inputs import batch_size_of


def is_staged(backend) -> bool:
    """Whether ``backend`` runs the staged machine (else the eager one)."""
    return getattr(backend, "staged", False)


def execute(
    program: Program,
    args: Sequence,
    *,
    backend=None,
    max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
    max_steps: int | None = None,
    block_code_cache: dict | None = None,
    width: int | None = None,
    group: int | None = None,
    priority=None,
    return_status: bool = False,
):
    """Runs a lowered program over a batch, on whichever machine ``backend`` takes.

    Args:
      program: a lowered, typed, allocated program (``pipeline.compile_program``).
      args: one value per parameter of ``main``: arrays with a leading batch
        dimension, or per-example values (no batch dimension) to broadcast.
      backend: the array backend (default NumPy).
      max_stack_depth: how deep any recursion may go.
      max_steps: stop with `StepLimitError` after this many VM steps (None: no bound).
      block_code_cache: where a staged backend keeps compiled code across calls
        (default: the backend's own cache); unused on eager backends.
      width, group, priority: run the N inputs in ``args`` through ``min(width, N)``
        lanes, refilled in groups of ``group``, in decreasing ``priority``
        (`pcbatch.vm.refill`); None: a plain call, one lane per batch member.
      return_status: return (results, status), one `pcbatch.LaneStatus` per batch
        member, instead of raising for a member that overflowed or hit max_steps
        (a plain call only).

    Returns:
      main's result (a tuple when it returns several), with a batch dimension.
    """
    backend = backend or NumpyBackend()
    options = dict(backend=backend, max_stack_depth=max_stack_depth, max_steps=max_steps)
    if width is not None:
        return _refill(program, args, width, group, priority, block_code_cache, options)
    if is_staged(backend):
        return staged.execute(
            program, args, cache=block_code_cache, return_status=return_status, **options
        )
    run = functools.partial(machine.execute, **options)
    return _eager_with_status(run, program, args) if return_status else run(program, args)


def _refill(program: Program, args, width, group, priority, cache, options):
    """Main on each of the N inputs in ``args`` through ``min(width, N)`` lanes; the
    results in input order."""
    backend = options["backend"]
    width = refill.check_width(width)
    group = refill.group_size(group, width)
    if len(args) != len(program.vars_in):
        raise TypeError(f"{program.main}() takes {len(program.vars_in)} arguments, got {len(args)}")
    count = batch_size_of(program, args)
    order = refill.start_order(priority, count, program.main)
    if count == 0:
        return _no_results(program, backend)
    if is_staged(backend):
        return _staged_refill(program, args, count, order, width, group, cache, options)
    order = np.arange(count) if order is None else order
    return refill.execute(program, args, order, min(width, count), group, **options)


def _staged_refill(program, args, count, order, width, group, cache, options):
    """A staged run sees the inputs already in starting order (the order is data, so a
    new one does not recompile) and its results are put back in input order."""
    backend = options["backend"]
    if order is not None:
        args = refill.rows(program, args, count, order.astype(np.int32), backend.take)
    results = staged.execute(program, args, cache=cache, refill=(width, group), **options)
    if order is None:
        return results
    inverse = np.argsort(order).astype(np.int32)
    return map_pattern(lambda leaf: backend.take(leaf, inverse), results)


def _no_results(program: Program, backend):
    """Main's results for zero inputs: arrays with a leading dimension 0."""
    zeros = backend.zeros if is_staged(backend) else np.zeros
    results = tuple(
        map_pattern(lambda t: zeros((0, *t.shape), t.dtype), program.var_types[name].tensors)
        for name in program.vars_out
    )
    return results[0] if len(results) == 1 else results


def _eager_with_status(run, program: Program, args: list) -> tuple:
    """(results, status) on the eager machine, which stops the whole batch at a failure:
    the batch runs once, and only if a member fails, each member alone, to tell the
    failed ones (`pcbatch.LaneStatus`) from the others, whose results are kept."""
    size = batch_size_of(program, args)
    try:
        return run(program, args), np.zeros(size, np.int32)
    except (StackOverflowError, StepLimitError):
        pass
    except Exception as e:  # noqa: BLE001 - only a run-time check's failure is a status
        if not is_lane_check_failure(e):
            raise
    status = np.zeros(size, np.int32)
    types = [program.var_types[name].tensors for name in program.vars_out]
    blank = lambda t: np.zeros((size, *t.shape), t.dtype)
    outputs = [map_pattern(blank, t) for t in types]
    for i in range(size):
        row = [map_pattern(lambda x, i=i: x[i : i + 1] if np.ndim(x) else x, a) for a in args]
        try:
            got = run(program, row)
        except StackOverflowError:
            status[i] = LaneStatus.STACK_OVERFLOW
            continue
        except StepLimitError:
            status[i] = LaneStatus.STEP_LIMIT
            continue
        except Exception as e:  # noqa: BLE001
            if not is_lane_check_failure(e):
                raise
            status[i] = LaneStatus.ERROR
            continue
        got = got if len(types) > 1 else (got,)
        for out, value in zip(outputs, got):
            for leaf, v in zip(flatten(out), flatten(value)):
                leaf[i] = np.asarray(v)[0]
    outputs = staged.poison(NumpyBackend(), outputs, status == LaneStatus.OK)
    return (outputs[0] if len(types) == 1 else tuple(outputs)), status
