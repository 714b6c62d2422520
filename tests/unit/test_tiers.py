"""The fast tier's choice of one compiled backend per test (`tests.tiers.compiled_in_turn`)."""

from types import SimpleNamespace

from tests.tiers import compiled_in_turn

COMPILED = ["jax", "tensorflow"]


def _item(case: str, backend: str, test: str = "test_f"):
    param_id = f"{case}-{backend}" if case else backend
    return SimpleNamespace(
        callspec=SimpleNamespace(id=param_id, params={"backend_name": backend}),
        path="tests/t.py", originalname=test, nodeid=f"tests/t.py::{test}[{param_id}]",
        backend=backend,
    )


def _left_out(items):
    return compiled_in_turn(items, lambda item: item.backend, COMPILED)


def test_each_case_keeps_one_compiled_backend_and_every_eager_one():
    cases = [f"case{k}" for k in range(40)]
    items = [_item(c, b) for c in cases for b in ["numpy", "torch", *COMPILED]]
    left_out = _left_out(items)
    assert len(left_out) == len(cases)
    assert {item.backend for item in left_out} == set(COMPILED)  # both take turns
    kept = [item for item in items if item not in left_out]
    for case in cases:
        on = sorted(i.backend for i in kept if i.callspec.id.startswith(case + "-"))
        assert on in (["jax", "numpy", "torch"], ["numpy", "tensorflow", "torch"])


def test_the_choice_is_the_same_in_every_process_and_order():
    items = [_item(f"c{k}", b) for k in range(10) for b in COMPILED]
    first = {item.nodeid for item in _left_out(items)}
    assert {item.nodeid for item in _left_out(items[::-1])} == first


def test_a_case_already_on_one_compiled_backend_and_a_test_of_its_own_are_kept():
    alone = _item("only", "tensorflow")
    bare = [_item("", b, test="test_g") for b in COMPILED]  # the id is the backend
    other_test = [_item("c", b, test="test_h") for b in COMPILED]
    left_out = _left_out([alone, *bare, *other_test])
    assert alone not in left_out
    assert len([i for i in left_out if i in bare]) == 1
    assert len([i for i in left_out if i in other_test]) == 1
