"""A block's part of the staged loop state: what a dispatch that carries parts keeps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pcbatch.vm import staged


def test_a_part_keeps_the_named_registers_and_everything_but_registers():
    part = staged._Registers(["x#0"])
    state = {"pc": "pc", "block": 3, "vars": {"x#0": "x", "y#0": "y"}}
    carried = part.of(state)
    assert carried == {"pc": "pc", "block": 3, "vars": {"x#0": "x"}}
    changed = dict(carried, pc="pc2", vars={"x#0": "x2"})
    widened = part.widen(state, changed)
    assert widened == {"pc": "pc2", "block": 3, "vars": {"x#0": "x2", "y#0": "y"}}


def test_a_block_changing_a_register_outside_its_part_fails_at_trace_time():
    block = SimpleNamespace(part=staged._Registers(["x#0"]), block=SimpleNamespace(label="f.2"))
    before = {"x#0": object(), "y#0": object()}
    staged._Block.check_part(block, before, dict(before, **{"x#0": object()}))
    with pytest.raises(AssertionError, match=r"'f.2' changed \['y#0'\]"):
        staged._Block.check_part(block, before, dict(before, **{"y#0": object()}))
