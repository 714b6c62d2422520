"""The backend Protocol: the array operations the VM is written against.

The VM needs a small core: variables (register/stack storage with masked
update, push and pop; a full stack raises `StackFull`), a way to name the threads
at a block (`Lanes`, and those of them where a condition holds), placing a
primitive's result into those lanes, choosing each thread's next block
(``select``), and copying values out of the machine (``copy_out`` for results,
``to_host`` for the host's bookkeeping: errors, profiles). The eager machine
(``pcbatch/vm/machine.py``) uses nothing else, so any eager array library runs it
by implementing this core. The rest of the surface
(``equal``, ``cond``, ``merge_shapes``, ...) is the seed API's NumpyBackend
surface, kept for users of that API and for the type-inference pass.

Capability flags let the VM choose a strategy per backend:
``gathers_active_rows`` means `Lanes` index only the active threads, so a
block's cost scales with its active threads and primitives never see other
threads' rows; compiled backends run full width under a mask instead.
``measures_stack_depth`` means variables count their deepest stack
(``high_water``), so a stack overflow's error can say what depth suffices.

Backends with ``staged = True`` (JAX, TensorFlow) are driven by
``pcbatch/vm/staged.py`` instead of the eager machine: they provide array
operations on whole loop states (``zeros``, ``where``, ``scatter_rows``,
``gather_rows``, ``while_loop``, ``switch``, ``jit``, ...; see `JaxBackend`),
``adapt`` (run a NumPy-written primitive on their arrays) and ``vectorize``
(map a per-example primitive over the batch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pcbatch.ir.types import TensorType, Type, VariableAllocation

#: Under XLA on CPU every kernel costs about 7 ms to compile (10-25 ms of CPU time,
#: however small), so small programs compile in time proportional to their kernels. A
#: stack of at most this many entries is pushed to by one select over all of it (one
#: kernel, fused with what computes the row's depth and value) rather than a scatter
#: (three: its indices, its updates, itself); the select's cost per push grows with the
#: stack, the scatter's with the batch.
SELECT_WRITE_MAX = 1 << 14
#: A bincount of at most this many entries times bins is a product with a one-hot
#: table (one kernel; the product is a library call) rather than a scatter-add (four).
ONE_HOT_MAX = 1 << 14
#: A staged program whose zeroed registers and stacks take at most this many bytes
#: gets them as an argument, made once per compiled signature, instead of zeroing them
#: in its trace: XLA compiles no kernel to fill them (`pcbatch.vm.staged`).
BLANK_ARGUMENT_MAX = 1 << 20


class StackFull(Exception):
    """Internal signal: a push found a full stack. The VM turns it into a user error.

    ``rows`` are the batch rows whose stack was full (host integers).
    """

    def __init__(self, name: str, rows: Any):
        super().__init__(name)
        self.name = name
        self.rows = rows


class Lanes(Protocol):
    """The threads that execute one block: a row index or a mask."""

    count: Any


class Variable(Protocol):
    """Storage for one tensor-valued VM variable over the whole batch.

    Methods return the updated variable (a backend may mutate in place and
    return ``self``; a functional backend returns a new value).
    """

    def read(self, lanes: Lanes) -> Any: ...

    def update(self, value: Any, lanes: Lanes) -> Variable: ...

    def push(self, value: Any, lanes: Lanes, saved: Any = None) -> Variable:
        """Saves the top (or ``saved``: the machine's return addresses) on the lanes'
        stacks and sets the top to ``value``; a full stack raises `StackFull`."""
        ...

    def pop(self, lanes: Lanes) -> Variable: ...

    def clear_stack(self, lanes: Lanes) -> Variable:
        """Empties the lanes' stacks (threads starting afresh, `pcbatch.vm.refill`); a
        register has none."""
        ...

    def assign_items(self, assignment: Any, value: Any, indices: list, lanes: Lanes) -> Variable:
        """Writes ``top[index] = value`` for the lanes' threads only (``assignment``: the
        `pcbatch.ir.setitem.SetItem` naming the index; ``indices``: its per-thread parts)."""
        ...


class Backend(Protocol):
    """What the virtual machine and the passes need from an array library."""

    name: str
    gathers_active_rows: bool
    measures_stack_depth: bool

    # -- the VM core -------------------------------------------------------
    def create_variable(
        self,
        name: str,
        alloc: VariableAllocation,
        type_: TensorType,
        max_stack_depth: int,
        batch_size: int,
    ) -> Variable: ...

    def all_lanes(self, batch_size: int) -> Lanes: ...

    def lanes_at(self, program_counter: Any, block_index: int) -> Lanes: ...

    def lanes_of(self, rows: Any, batch_size: int) -> Lanes:
        """The lanes of the threads in ``rows`` (sorted host ints), of ``batch_size``."""
        ...

    def place(self, value: Any, lanes: Lanes, type_: TensorType) -> Any: ...

    def truth(self, condition: Any) -> Any:
        """``condition`` (one value per lane) as bools: a number is true where nonzero."""
        ...

    def count_true(self, mask: Any) -> int:
        """How many of ``mask``'s bools are true, on the host."""
        ...

    def lanes_where(self, lanes: Lanes, mask: Any) -> Lanes:
        """The lanes of ``lanes`` where ``mask`` (a bool per lane, from `truth`) holds."""
        ...

    def select(self, condition: Any, if_true: Any, if_false: Any) -> Any:
        """``if_true`` where ``condition`` is true (for a number: nonzero), else ``if_false``."""
        ...

    def to_host(self, value: Any) -> Any:
        """``value`` as a NumPy array on the host (for errors, profiles, scheduling)."""
        ...

    def copy_out(self, value: Any) -> Any:
        """A run's result: ``value`` as an array of this backend that no VM storage shares."""
        ...

    def vectorize(self, function: Callable) -> Callable: ...

    def next_block(self, program_counter: Any) -> Any: ...

    def while_loop(self, cond: Callable, body: Callable, loop_vars: Any) -> Any: ...

    def switch_case(self, branch_selector: Any, branch_callables: Sequence[Callable]) -> Any: ...

    # -- types ---------------------------------------------------------------
    def type_of(self, t: Any, preferred_dtype: Any = None) -> TensorType: ...

    def run_on_dummies(self, primitive_callable: Callable, input_types: Sequence[Type]) -> Any: ...

    def merge_dtypes(self, dt1: Any, dt2: Any) -> Any: ...

    def merge_shapes(self, s1: Any, s2: Any) -> Any: ...


def guarded_switch(
    ops,
    index: Any,
    branches: Sequence[Callable],
    state: Any,
    fan_out: int = 2,
    narrow: bool = False,
    offset: int = 0,
):
    """Runs ``branches[index - offset](state)`` as a tree of loops that run at most once.

    XLA gives every output of a conditional a buffer of its own, so a branch that
    passes a register through, or updates a stack in place, copies it. A while
    loop's state is updated in place instead: a loop whose body runs once or not at
    all is a conditional that copies nothing. Measured on NUTS (1,000 chains x
    20 draws, 100-D, JAX on CPU, warm): 3.7 s against 13.6 s with two-way ``lax.cond``
    and write ports, and no ports or posted writes are needed.

    A node of the tree splits its branches into ``fan_out`` runs, each in such a loop,
    entered when ``index`` lies in that run. A step tests about ``fan_out`` predicates
    per level: ``fan_out=2`` gives about 2 log2(N), ``fan_out >= N`` one flat row of N
    loops (TensorFlow's choice: tf2xla's cost grows steeply with the loops' nesting).

    With ``narrow``, the loop around a single branch carries only the branch's `Part` of
    the state (its ``part`` attribute, if it has one); the rest bypasses the loop.
    ``offset`` is folded into the predicates' constants (an ``index - offset`` computed
    first would cost XLA a kernel of its own).
    """

    def once(enter, branch: Callable, state):
        # The flag is made inside the body: a constant captured from outside would be
        # one more loop input for TensorFlow to carry.
        part = getattr(branch, "part", None) if narrow else None
        if part is None:
            body = lambda carry: (ops.false(), branch(carry[1]))
            return ops.while_loop(lambda carry: carry[0], body, (enter, state))[1]
        body = lambda carry: (ops.false(), part.of(branch(part.widen(state, carry[1]))))
        carried = ops.while_loop(lambda carry: carry[0], body, (enter, part.of(state)))[1]
        return part.widen(state, carried)

    def run(lo: int, hi: int, state):
        if hi - lo == 1:
            return branches[lo](state)
        parts = min(fan_out, hi - lo)
        bounds = [lo + (hi - lo) * j // parts for j in range(parts + 1)]
        for start, stop in zip(bounds, bounds[1:]):
            enter = _within(ops, index, start + offset, stop + offset, lo + offset, hi + offset)
            if stop - start == 1:  # a loop around one branch (which may carry a part)
                state = once(enter, branches[start], state)
            else:
                state = once(enter, lambda s, a=start, b=stop: run(a, b, s), state)
        return state

    return run(0, len(branches), state)


def _within(ops, index, start: int, stop: int, lo: int, hi: int):
    """``start <= index < stop``, given ``lo <= index < hi`` (bounds that hold are not tested)."""
    if start == lo:
        return index < stop
    if stop == hi:
        return index >= start
    if stop - start == 1:
        return ops.equal(index, start)
    return (index >= start) & (index < stop)


class Part(Protocol):
    """The part of a loop state that a branch of `guarded_switch` reads or writes."""

    def of(self, state: Any) -> Any:
        """The part, taken from a whole state."""

    def widen(self, state: Any, part: Any) -> Any:
        """``state`` with ``part`` (taken from it, then changed) put back."""

