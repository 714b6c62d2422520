"""Unit tests of the analyses and passes: liveness with loops, allocation, tail calls,
pop-push fusion, jump threading, type-inference errors, and the VM's argument checks."""

from __future__ import annotations

import numpy as np
import pytest

import pcbatch
from pcbatch import dsl
from pcbatch.analysis.liveness import block_liveness
from pcbatch.ir.nodes import Block, BranchOp, GotoOp, PopOp, PrimOp, PushGotoOp, sync_label
from pcbatch.ir.types import TensorType, VariableAllocation
from pcbatch.passes import order_blocks, pipeline, thread_jumps
from pcbatch.vm import machine, reference, runner
from tests.backends import backend, backend_param
from tests.programs.corpus import CORPUS_BY_NAME

INT = TensorType(np.dtype(np.int64), ())


def _lowered(program, *sig):
    return pipeline.compile_program(program, list(sig), pcbatch.NumpyBackend())


def test_liveness_carries_loop_variables_around_the_back_edge():
    program = CORPUS_BY_NAME["collatz"].build()
    fn = program.function(program.main)
    live_in, _ = block_liveness(fn)
    loop_heads = [label for label in live_in if ".loop" in label]
    assert loop_heads
    for head in loop_heads:
        assert "main.cur" in live_in[head] and "main.steps" in live_in[head]


def test_allocation_gives_stacks_only_to_variables_live_across_clobbering_calls():
    lowered = _lowered(CORPUS_BY_NAME["fib"].build(), INT)
    alloc = lowered.var_alloc
    assert alloc["fib.n"] == VariableAllocation.FULL  # needed after fib(n - 1)
    assert alloc["fib.__ret0"] == VariableAllocation.REGISTER
    temporaries = [v for v, a in alloc.items() if a == VariableAllocation.TEMPORARY]
    assert temporaries  # e.g. the branch condition never leaves its block
    full = {v for v, a in alloc.items() if a == VariableAllocation.FULL}
    assert full == {"fib.n", "fib.t3"}  # n, and the first call's result


def test_caller_variables_a_callee_cannot_touch_stay_registers():
    mb = dsl.ModuleBuilder()
    with mb.define("double", params=("x",), returns=1) as f:
        f.return_(f.prim(lambda x: 2 * x, "x", name="twice"))
    with mb.define("main", params=("a",), returns=1) as f:
        d = f.call("double", "a")
        f.return_(f.prim(np.add, d, "a"))
    lowered = _lowered(mb.program("main"), INT)
    assert lowered.var_alloc["main.a"] == VariableAllocation.REGISTER
    assert not any(isinstance(op, PopOp) for b in lowered.graph for op in b.instructions)


def _recursive_sum(passes_scale_on: bool, mutual: bool):
    """sum(n, scale) = scale * n + sum(n - 1, scale'), recursing through ``helper`` when
    ``mutual``; ``scale'`` is ``scale`` itself or ``scale + 1``."""
    mb = dsl.ModuleBuilder()
    target = "helper" if mutual else "sum"
    total = mb.declare("sum", params=("n", "scale"), returns=1)
    helper = mb.declare("helper", params=("n", "scale"), returns=1) if mutual else None
    with mb.define(total) as f:
        with f.if_(f.prim(lambda n: n <= 0, "n", name="done")):
            f.return_(f.prim(lambda s: 0 * s, "scale", name="zero"))
        fewer = f.prim(lambda n: n - 1, "n", name="fewer")
        passed = "scale" if passes_scale_on else f.prim(lambda s: s + 1, "scale", name="inc")
        rest = f.call(target, fewer, passed)
        f.return_(f.prim(lambda r, s, n: r + s * n, rest, "scale", "n", name="add"))
    if mutual:
        with mb.define(helper) as f:
            f.return_(f.call("sum", "n", "scale"))
    return mb.program("sum")


@pytest.mark.parametrize(
    "passes_scale_on, mutual, saved",
    [(True, False, False), (False, False, True), (True, True, True)],
)
def test_a_parameter_passed_on_unchanged_is_not_saved(passes_scale_on, mutual, saved):
    program = _recursive_sum(passes_scale_on, mutual)
    lowered = _lowered(program, INT, INT)
    expected = VariableAllocation.FULL if saved else VariableAllocation.REGISTER
    assert lowered.var_alloc["sum.scale"] == expected


@backend_param
@pytest.mark.parametrize("passes_scale_on, mutual", [(True, False), (False, False), (True, True)])
def test_an_unsaved_parameter_keeps_its_value_across_calls(backend_name, passes_scale_on, mutual):
    program = _recursive_sum(passes_scale_on, mutual)
    args = [np.array([0, 3, 5, 1]), np.array([2, 7, 1, 4])]
    typed = pipeline.compile_program(
        program, [INT, INT], pcbatch.NumpyBackend(), stop_after="infer_types"
    )
    np.testing.assert_array_equal(
        np.asarray(runner.run(program, args, backend=backend(backend_name))),
        reference.run_batch(typed, args),
    )


def test_mutual_tail_calls_jump_without_pushing():
    program = CORPUS_BY_NAME["even_odd"].build()
    backend_ = pcbatch.NumpyBackend()
    jumps = pipeline.compile_program(program, [INT], backend_, stop_after="stack_opt")
    assert sum(isinstance(b.terminator, GotoOp) for b in jumps.graph) >= 2
    # Jump threading then takes each callee's entry test into the jump: no goto is left.
    lowered = _lowered(program, INT)
    assert not any(isinstance(b.terminator, (PushGotoOp, GotoOp)) for b in lowered.graph)
    result = runner.run(CORPUS_BY_NAME["even_odd"].build(), [np.arange(200)], max_stack_depth=1)
    np.testing.assert_array_equal(result, np.arange(200) % 2 == 0)


def _two_calls_program():
    """``v`` is saved around both calls and untouched between them: fusable."""
    mb = dsl.ModuleBuilder()
    with mb.define("inc", params=("x",), returns=1) as f:
        f.return_(f.prim(lambda x: x + 1, "x", name="inc"))
    rec = mb.declare("rec", params=("v", "k"), returns=1)
    with mb.define(rec) as f:
        with f.if_(f.prim(lambda k: k <= 0, "k", name="done")):
            f.return_("v")
        a = f.call("inc", "k")
        km = f.prim(lambda k: k - 1, "k", name="dec")
        b = f.call(rec, a, km)
        c = f.call(rec, b, km)
        f.return_(f.prim(lambda v, c: v + c, "v", c, name="plus"))
    return mb.program("rec")


def test_pop_push_fusion_removes_a_restore_and_a_save():
    program = _two_calls_program()
    sig = [INT, INT]
    before = pipeline.compile_program(
        program, sig, pcbatch.NumpyBackend(), stop_after="lower_calls"
    )
    after = _lowered(program, *sig)

    def stack_ops(p):
        pops = sum(len(op.vars) for b in p.graph for op in b.instructions if isinstance(op, PopOp))
        pushes = sum(
            len(op.vars_in)
            for b in p.graph
            for op in b.instructions
            if isinstance(op, PrimOp) and op.is_copy and not op.skip_push_mask
        )
        return pops, pushes

    (pops_before, pushes_before), (pops_after, pushes_after) = stack_ops(before), stack_ops(after)
    assert pops_after < pops_before and pushes_after < pushes_before
    args = [np.arange(-2, 6), np.array([0, 1, 2, 3, 1, 2, 3, 4])]
    typed = pipeline.compile_program(program, sig, pcbatch.NumpyBackend(), stop_after="infer_types")
    np.testing.assert_array_equal(
        runner.run(program, args, max_stack_depth=10), reference.run_batch(typed, args)
    )


def test_type_conflict_names_the_variable_and_both_places():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("x",), returns=1) as f:
        with f.if_(f.prim(lambda x: x > 0, "x", name="pos")):
            f.const(np.zeros(3), out="y")
        with f.else_():
            f.const(np.zeros(2), out="y")
        f.return_("y")
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        runner.run(mb.program("main"), [np.arange(3)])
    message = str(info.value)
    assert "'main.y'" in message and "test_passes.py" in message
    assert message.count("test_passes.py:") == 2


def test_unknown_type_names_the_variable():
    mb = dsl.ModuleBuilder()
    loop = mb.declare("loop", params=("x",), returns=1)
    with mb.define(loop) as f:
        f.return_(f.call(loop, "x"))  # no base case: the result type is never known
    with pytest.raises(pcbatch.TypeInferenceError, match="loop"):
        runner.run(mb.program("loop"), [np.arange(3)])


def test_inconsistent_batch_sizes_name_both_arguments():
    program = CORPUS_BY_NAME["gcd_mod"].build()
    with pytest.raises(pcbatch.BatchSizeError) as info:
        runner.run(program, [np.arange(1, 4), np.arange(1, 6)])
    assert "'a'" in str(info.value) and "'b'" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_scalars_and_batch_one_broadcast():
    program = CORPUS_BY_NAME["gcd_mod"].build()
    result = runner.run(program, [np.array(12), np.array([8, 9, 30])])
    np.testing.assert_array_equal(result, [4, 3, 6])
    result = runner.run(program, [np.array([12]), np.array([8, 9, 30])])
    np.testing.assert_array_equal(result, [4, 3, 6])


def test_step_limit_names_where_threads_wait():
    program = CORPUS_BY_NAME["collatz"].build()
    with pytest.raises(pcbatch.StepLimitError, match=r"examples\.py:\d+"):
        runner.run(program, [np.array([27, 97])], max_steps=20)


def test_zero_size_batch_returns_empty():
    program = CORPUS_BY_NAME["fib"].build()
    result = runner.run(program, [np.zeros(0, dtype=np.int64)])
    assert result.shape == (0,)


def test_profiling_off_records_nothing():
    assert pcbatch.profiling.current() is None
    runner.run(CORPUS_BY_NAME["fib"].build(), [np.array([5])])
    assert pcbatch.profiling.current() is None


def test_stackless_parallel_assignment_swaps():
    mb = dsl.ModuleBuilder()
    with mb.define("main", params=("a", "b"), returns=2) as f:
        f.copy("b", "a", out=("a", "b"))
        f.return_("a", "b")
    a, b = np.array([1, 2, 3]), np.array([10, 20, 30])
    for stackless in (False, True):
        x, y = runner.run(mb.program("main"), [a, b], stackless=stackless)
        np.testing.assert_array_equal(x, b)
        np.testing.assert_array_equal(y, a)


def _steps_and_result(lowered, args):
    with pcbatch.profile() as prof:
        result = machine.execute(lowered, args, backend=pcbatch.NumpyBackend())
    return prof.block_executions, result


@pytest.mark.parametrize("name, args", [("fib", [np.arange(14)]), ("collatz", [np.arange(1, 40)])])
def test_jump_threading_saves_steps_and_changes_no_result(name, args):
    """Each call of fib takes the base-case test along (a conditional call); collatz's
    back edge takes the loop test along, so the loop body branches to itself."""
    program, numpy_backend = CORPUS_BY_NAME[name].build(), pcbatch.NumpyBackend()
    sig = runner.signature_of(args)
    threaded = pipeline.compile_program(program, sig, numpy_backend)
    before = pipeline.compile_program(program, sig, numpy_backend, stop_after="stack_opt")
    unthreaded = order_blocks.run(before, pipeline.PassContext(numpy_backend, sig))
    calls = [b.terminator for b in threaded.graph if isinstance(b.terminator, PushGotoOp)]
    assert all(call.cond_var is not None for call in calls)
    steps, result = _steps_and_result(threaded, args)
    steps_before, result_before = _steps_and_result(unthreaded, args)
    typed = pipeline.compile_program(program, sig, numpy_backend, stop_after="infer_types")
    np.testing.assert_array_equal(result, reference.run_batch(typed, args))
    np.testing.assert_array_equal(result, result_before)
    assert steps < 0.8 * steps_before


def test_jump_threading_leaves_sync_points_and_blocks_that_write_registers():
    def block(label, writes_to):
        op = PrimOp(("f.x",), (writes_to,), lambda x: x)
        return Block(label, (op,), BranchOp(writes_to, "f.a", "f.b"))

    program = CORPUS_BY_NAME["fib"].build().replace(
        var_alloc={"f.t": VariableAllocation.TEMPORARY, "f.r": VariableAllocation.REGISTER}
    )
    assert thread_jumps._threadable(program, block("f.test", "f.t"))
    assert not thread_jumps._threadable(program, block(sync_label("f", 1), "f.t"))
    assert not thread_jumps._threadable(program, block("f.test", "f.r"))
