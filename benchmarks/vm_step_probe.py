"""What one VM step's block choice costs on this device, without pcbatch.

A `lax.while_loop` of 2,000 iterations over a float64 vector (1,000 and 100,000 lanes)
whose body is one of 20 trivial blocks, in four forms:

- ``fused``: one body, no choice (the hand-written loop's floor);
- ``switch``: the block chosen by one `lax.switch` on a carried index (one device-side
  choice per step);
- ``select``: every block computed, the carried index selecting (no data-dependent
  control flow, 20x the arithmetic);
- ``per_lane_switch``: each lane its own index, the step running the smallest one's block
  on the lanes at it (`jnp.where`), as pcbatch's VM does.

Prints microseconds per iteration (the best of 3 warm calls). pcbatch's own VM step
costs are `benchmarks/backends.py`'s ``us/block``; the gap between the two is what the
VM's block choice adds (on a GPU, XLA reads every while loop's predicate back on the
host). Usage: ``python benchmarks/vm_step_probe.py``.
"""

import time

import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)
BLOCKS, ITERATIONS = 20, 2000


def _blocks():
    return [lambda x, i=i: x * (1.0 + 1e-6 * i) + 1e-3 for i in range(BLOCKS)]


def _loop(body, *state):
    def step(carry):
        return (carry[0] + 1, *body(*carry[1:]))

    return lax.while_loop(lambda carry: carry[0] < ITERATIONS, step, (0, *state))[-1]


def fused(x):
    return _loop(lambda x: (x * (1.0 + 1e-6) + 1e-3,), x)


def switch(x):
    blocks = _blocks()
    return _loop(lambda pc, x: ((pc + 7) % BLOCKS, lax.switch(pc, blocks, x)), 0, x)


def select(x):
    blocks = _blocks()
    return _loop(lambda pc, x: ((pc + 7) % BLOCKS, jnp.stack([b(x) for b in blocks])[pc]), 0, x)


def per_lane_switch(x):
    blocks = _blocks()

    def body(pc, x):
        chosen = jnp.min(pc)
        at = pc == chosen
        return jnp.where(at, (pc + 7) % BLOCKS, pc), jnp.where(at, lax.switch(chosen, blocks, x), x)

    return _loop(body, jnp.zeros(x.shape, jnp.int32), x)


def main() -> None:
    print(f"device: {jax.devices()[0]}; {ITERATIONS} iterations, {BLOCKS} blocks")
    for lanes in (1000, 100_000):
        x = jnp.ones(lanes)
        for form in (fused, switch, select, per_lane_switch):
            call = jax.jit(form)
            call(x).block_until_ready()
            times = []
            for _ in range(3):
                start = time.perf_counter()
                call(x).block_until_ready()
                times.append(time.perf_counter() - start)
            per_iteration = min(times) / ITERATIONS * 1e6
            print(f"{form.__name__:<16} lanes {lanes:>7}: {per_iteration:8.1f} us/iteration")


if __name__ == "__main__":
    main()
