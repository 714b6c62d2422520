"""The eager machine's shortcuts (`pcbatch.vm.machine`, `pcbatch.backends.batched_array`)
compute what the general path computes, and are taken where they should be."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch import examples
from pcbatch.backends import batched_array

SCALES = np.array([1.0, 2.0, 3.0])


def _prims(fn, *args):
    """The per-example primitives of ``fn``'s lowered program, by label."""
    program = fn.context.lowered_for_args(fn.__name__, list(args))
    return {
        op.label: op
        for block in program.graph
        for op in block.instructions
        if getattr(op, "per_example", False)
    }


def _count_wrappers(monkeypatch) -> list:
    made = []
    original = batched_array.BatchedArray.__init__

    def counting(self, data):
        made.append(1)
        original(self, data)

    monkeypatch.setattr(batched_array.BatchedArray, "__init__", counting)
    return made


def test_an_expression_of_operators_runs_on_the_raw_batch(monkeypatch):
    ctx = pcbatch.Context()

    @ctx.batch
    def newton(a):
        x = a + 1.0
        y = 0.5 * (x + a / x)
        while y < x:
            x = y
            y = 0.5 * (x + a / x)
        return x

    a = np.array([1.0, 4.0, 9.0, 1e6])
    prims = _prims(newton, a)
    assert hasattr(prims["0.5 * (x + a / x)"].function, "batch_rule")
    made = _count_wrappers(monkeypatch)
    np.testing.assert_allclose(newton(a), np.sqrt(a))
    assert made == []  # no BatchedArray: operators and truthy ran on the raw rows


@pytest.mark.parametrize(
    "source_line, has_rule",
    [
        ("x ** 2", False),  # NumPy's ndarray power takes shortcuts for some exponents
        ("x * SCALES", False),  # a global: its shape is per example
        ("np.sqrt(x)", False),  # a call
        ("0 < x < 2", False),  # a chain
        ("-x + 3 // 2 - (x % 2) * 1.5", True),
    ],
)
def test_only_operators_over_parameters_and_numbers_get_the_rule(source_line, has_rule, tmp_path):
    namespace = {"np": np, "SCALES": SCALES, "pcbatch": pcbatch}
    ctx = pcbatch.Context()
    code = f"def f(x):\n    return {source_line}\n"
    path = tmp_path / "f.py"
    path.write_text(code)
    exec(compile(code, str(path), "exec"), namespace)
    fn = ctx.batch(namespace["f"])
    x = np.array([0.5, 1.0, 3.0])
    prims = _prims(fn, x)
    ruled = [label for label, op in prims.items() if hasattr(op.function, "batch_rule")]
    assert bool(ruled) == has_rule, prims
    want = np.stack([fn(x[i : i + 1])[0] for i in range(3)])
    np.testing.assert_array_equal(fn(x), want)
    np.testing.assert_array_equal(fn(x), fn(x, dry_run=True))


def test_mixed_ranks_broadcast_per_example_on_the_raw_rows(monkeypatch):
    ctx = pcbatch.Context()

    @ctx.batch
    def scale(v, s, m):
        return v * s + s - (m < s) * m

    v, s = np.arange(6.0).reshape(2, 3), np.array([10.0, 20.0])
    m = np.arange(12.0).reshape(2, 2, 3)
    want = scale(v, s, m, dry_run=True)
    made = _count_wrappers(monkeypatch)
    got = scale(v, s, m)
    assert made == []
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(
        got, v[:, None] * s[:, None, None] + s[:, None, None] - (m < s[:, None, None]) * m
    )


def test_truthy_of_a_vector_with_one_element_still_reduces_its_shape():
    ctx = pcbatch.Context()

    @ctx.batch
    def pick(v):
        if v:  # per-example shape (1,): Python's bool(array) of one element
            return 1
        return 0

    np.testing.assert_array_equal(pick(np.array([[0.0], [2.0], [np.nan]])), [0, 1, 1])


def test_a_planned_step_chooses_from_counts_kept_as_threads_move(monkeypatch):
    """Under a `policy` plan (most_threads, a loop), no step counts every thread's program
    counter: the machine keeps the counts as threads move (one block moves few threads)."""
    from pcbatch.vm import policy

    def refuse(self, pc):
        raise AssertionError("a pass over every program counter")

    monkeypatch.setattr(policy.Scheduler, "next_block", refuse)
    chosen = []
    choose = policy.Scheduler.choose

    def recording(self, counts):
        assert counts.sum() == 7  # every thread counted once, halted ones included
        chosen.append(choose(self, counts))
        return chosen[-1]

    monkeypatch.setattr(policy.Scheduler, "choose", recording)
    collatz = examples.collatz
    x = np.array([1, 2, 3, 6, 7, 9, 27])
    np.testing.assert_array_equal(collatz(x), collatz(x, dry_run=True))
    assert len(chosen) > 10


_BUFFERS: dict = {}  # `_double_into_buffer`'s one output array per shape and dtype


def test_a_new_whole_width_result_is_kept_not_copied(monkeypatch):
    """A primitive's result for every thread that nothing else holds becomes the
    register's storage as it is (no full-width copy); later writes of some threads go
    into it in place, and the results are what they were."""
    from pcbatch.backends.eager_storage import Register

    kept = []
    adopt = Register.adopt

    def recording(self, value, lanes):
        kept.append(value)
        return adopt(self, value, lanes)

    monkeypatch.setattr(Register, "adopt", recording)
    ctx = pcbatch.Context()

    @ctx.batch
    def f(x):
        y = x * 2  # kept in a register: it lives across the loop
        while x < 3:
            x = x + 1
            y = y + x
        return y

    x = np.array([1, 2, 3, 4])
    np.testing.assert_array_equal(f(x), [2 + 2 + 3, 4 + 3, 6, 8])
    assert kept and all(type(v) is np.ndarray and v.shape == (4,) for v in kept)


@pcbatch.batched_primitive
def _double_into_buffer(x):
    out = _BUFFERS.setdefault((x.shape, x.dtype), np.empty(x.shape, x.dtype))
    np.multiply(x, 2, out=out)  # reuses its output array: the result is not the VM's
    return out


def test_a_result_the_primitive_keeps_is_copied():
    """A result its primitive still holds (a reused output buffer) is copied into the
    register: the next call overwrites the buffer, and the first result must not change
    with it."""
    ctx = pcbatch.Context()

    @ctx.batch
    def f(x):
        y = _double_into_buffer(x)  # kept in a register: it lives across the branch
        z = x
        if x > 0:
            z = _double_into_buffer(x + 10)
        return y * 1000 + z

    _BUFFERS.clear()
    np.testing.assert_array_equal(f(np.array([1, 2, 3])), [2022, 4024, 6026])


def test_a_programs_blocks_are_compiled_once_for_its_runs(monkeypatch):
    """The eager machine compiles a program's blocks on its first NumPy run and reuses
    them (a short run would pay that on every call), with the same results."""
    from pcbatch.vm import machine

    compiled = []
    block_runner = machine.block_runner

    def counting(program, block, backend):
        compiled.append(block.label)
        return block_runner(program, block, backend)

    monkeypatch.setattr(machine, "block_runner", counting)
    ctx = pcbatch.Context()

    @ctx.batch
    def collatz(x):
        steps = 0
        while x != 1:
            x = x // 2 if x % 2 == 0 else 3 * x + 1
            steps += 1
        return steps

    x = np.array([1, 2, 3, 6, 7, 9, 27])
    first = collatz(x)
    blocks = len(compiled)
    assert blocks > 0
    np.testing.assert_array_equal(collatz(x[::-1]), first[::-1])
    np.testing.assert_array_equal(collatz(x), first)
    assert len(compiled) == blocks
