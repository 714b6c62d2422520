"""Every misuse ends in a clear error at the user's own line, before anything runs."""

from __future__ import annotations

import gc
import inspect
import traceback

import numpy as np
import pytest

import pcbatch
from tests import backends
from tests.frontend import errors_src


def _error_lines(fn) -> list:
    lines, first = inspect.getsourcelines(fn)
    return [first + i for i, line in enumerate(lines) if "# ERROR" in line]


def _batched(fn):
    return pcbatch.Context().batch(fn)


SYNTAX_CASES = [
    ("uses_try", "try/except"),
    ("uses_with", "with"),
    ("uses_yield", "yield"),
    ("uses_global", "global"),
    ("uses_nested_def", "a def inside an if"),
    ("calls_through_variable", "variable"),
    ("comprehension_over_batched", "comprehension"),
    ("item_assignment", "item assignment to parameter"),
    ("item_alias", "would share it"),
    ("item_range", "bounds known when compiling"),
    ("range_rebound", "binds the name 'range' itself"),
    ("no_return_value", "return a value"),
    ("falls_off_end", "without returning"),
    ("varargs", "*args"),
    ("walrus", ":="),
    ("prints", "pcbatch.host_callback(print"),
    ("checks_isinstance", "isinstance() of a per-example value"),
    ("checks_type", "type() of a per-example value"),
    ("uses_del", "del is not supported"),
    ("uses_import", "import at module level"),
    ("uses_class", "class definitions are not supported"),
    ("checks_id", "id() of a per-example value"),
]


@pytest.mark.parametrize(("name", "words"), SYNTAX_CASES, ids=[c[0] for c in SYNTAX_CASES])
def test_unsupported_syntax_is_rejected_at_the_users_line(name, words):
    fn = _batched(getattr(errors_src, name))
    with pytest.raises(pcbatch.AutobatchSyntaxError) as info:
        fn(np.array([1.0, 2.0]))
    err = info.value
    assert isinstance(err, SyntaxError)
    assert err.filename == errors_src.__file__
    assert err.lineno == _error_lines(getattr(errors_src, name))[0]
    assert err.text.strip() and err.offset >= 1
    assert words in str(err) and repr(name) in str(err)


def test_syntax_errors_are_raised_before_anything_runs():
    calls = []

    def tracer(x):
        calls.append(x)
        return x

    ctx = pcbatch.Context()
    ctx.batch(errors_src.uses_try)
    with pytest.raises(pcbatch.AutobatchSyntaxError):
        ctx.module()
    assert not calls


def test_type_conflict_names_the_variable_and_both_lines():
    fn = _batched(errors_src.type_conflict)
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        fn(np.array([1.0, -1.0]))
    message = str(info.value)
    assert "'type_conflict.y'" in message
    for line in _error_lines(errors_src.type_conflict):
        assert f"errors_src.py:{line}" in message


@backends.backend_param
def test_a_condition_with_several_values_per_example_is_an_error_at_the_users_line(
    backend_name,
):
    fn = _batched(errors_src.vector_condition)
    with pytest.raises(pcbatch.TypeInferenceError) as info:
        fn(np.ones((4, 3)), backend=backends.backend(backend_name))
    message = str(info.value)
    (line,) = _error_lines(errors_src.vector_condition)
    assert message.startswith(f"the condition at {errors_src.__file__}:{line} in vector_condition")
    assert "single value per example" in message and "np.all(...) or np.any(...)" in message
    assert isinstance(info.value.__cause__, pcbatch.ConditionShapeError)


def test_run_time_exception_ends_in_the_users_code():
    fn = _batched(errors_src.raises_at_run_time)
    with pytest.raises(ValueError, match="negative input") as info:
        fn(np.array([1.0, -10.0]))
    frames = traceback.extract_tb(info.value.__traceback__)
    innermost = frames[-1]
    assert innermost.filename == errors_src.__file__ and innermost.name == "checked_sqrt"
    assert any(
        f.filename == errors_src.__file__
        and f.lineno == _error_lines(errors_src.raises_at_run_time)[0]
        for f in frames
    )
    # Only the API entry (the frame that re-raises) remains of pcbatch's frames.
    internal = [f for f in frames if "/pcbatch/" in f.filename.replace("\\", "/")]
    assert [(f.name, f.filename.endswith("api.py")) for f in internal] == [("__call__", True)]
    assert any("pcbatch primitive" in note for note in getattr(info.value, "__notes__", []))


def test_a_plain_helper_with_python_control_flow_still_gives_right_answers():
    fn = _batched(errors_src.raises_at_run_time)
    x = np.array([1.0, 4.0, -4.0])
    with pytest.warns(UserWarning, match="one example at a time"):
        np.testing.assert_allclose(fn(x), np.sqrt(np.abs(x)))


def test_each_new_context_warns_about_its_slow_helper_again():
    """The warning is once per compiled primitive: a primitive freed and another made at
    the same address (as Python reuses memory) still warns."""
    for _ in range(6):
        fn = _batched(errors_src.raises_at_run_time)
        with pytest.warns(UserWarning, match="one example at a time"):
            fn(np.array([1.0, 4.0]))
        del fn
        gc.collect()


def test_lambda_cannot_be_batched():
    with pytest.raises(ValueError, match="def"):
        pcbatch.Context().batch_uncurried(lambda x: x)


def test_a_failing_expression_is_named_as_written_not_as_rewritten():
    # the conditional runs as a helper call (__pcb_select) inside the compiled line
    fn = _batched(errors_src.rewritten_expression_fails)
    with pytest.raises(TypeError) as info:
        fn(np.array([1.0, -2.0]))
    message = str(info.value)
    assert "primitive '(1 if x > 0 else 2) + len(x)'" in message, message
    assert "__pcb" not in message
    line = _error_lines(errors_src.rewritten_expression_fails)[0]
    assert f"{errors_src.__file__}:{line}" in message
