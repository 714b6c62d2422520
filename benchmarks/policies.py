"""Work done by each scheduling policy over the corpus: ``python benchmarks/policies.py``.

Counts only (``pcbatch.profile()``: primitive executions and block executions,
no timing), on NumPy, for every program of ``pcbatch/examples.py``, of
``tests/programs/python_corpus.py`` and the NUTS program (``pcbatch.mcmc.nuts``,
small sizes). Every policy computes the same results (checked here too). Prints
one row per program: primitive executions per policy (and block executions),
then, per policy, the programs where it executes more primitives than
``lowest_pc`` and its total. Run from the repository root
(``PYTHONPATH=. python benchmarks/policies.py [--batch 64]``).
"""

from __future__ import annotations

import argparse

import numpy as np

import pcbatch
from pcbatch import examples
from pcbatch.passes import order_blocks


def _example_workloads(rng, batch: int) -> dict:
    n_fib = rng.randint(5, 16, size=batch)
    x = rng.randint(1, 3000, size=batch)
    depth = rng.randint(0, 6, size=batch)
    n_traj = rng.randint(1, 8, size=batch)
    deep = {"max_stack_depth": 40}
    return {
        "examples.fib": lambda s: examples.fib(n_fib, schedule=s, **deep),
        "examples.fib_peer": lambda s: examples.fib_peer(n_fib, schedule=s, **deep),
        "examples.collatz": lambda s: examples.collatz(x, schedule=s),
        "examples.build_tree": lambda s: examples.build_tree(depth, x, schedule=s, **deep),
        "examples.trajectories": lambda s: examples.trajectories(x, n_traj, schedule=s, **deep),
        "examples.is_even": lambda s: examples.is_even(rng_copy(n_fib), schedule=s, **deep),
    }


def rng_copy(a):
    return np.array(a, copy=True)


def _corpus_workloads(batch: int) -> dict:
    from tests.programs.python_corpus import PY_CORPUS

    workloads = {}
    for entry in PY_CORPUS:
        args = entry.make_args(np.random.RandomState(batch), batch)

        def call(s, entry=entry, args=args):
            return entry.fn(*[rng_copy(a) for a in args], max_stack_depth=entry.max_stack_depth,
                            schedule=s)

        workloads[f"corpus.{entry.name}"] = call
    return workloads


def _nuts_workload(chains: int) -> dict:
    from pcbatch.demo import correlated_gaussian
    from pcbatch.mcmc import nuts

    _, _, value_and_grad = correlated_gaussian(5)
    start = np.random.RandomState(1).normal(size=(chains, 5))

    def call(s):
        result = nuts.sample(None, start, value_and_grad=value_and_grad, num_samples=4,
                             num_warmup=4, seed=0, max_tree_depth=5, schedule=s,
                             progress_bar=False)
        return result.samples

    return {"nuts (5-D gaussian)": call}


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def measure(workloads: dict, policies) -> dict:
    """name -> policy -> (primitive executions, block executions)."""
    table = {}
    for name, call in workloads.items():
        row, first = {}, None
        for policy in policies:
            with pcbatch.profile() as prof:
                result = call(policy)
            if first is None:
                first = result
            elif not _same(result, first):
                raise AssertionError(f"{name}: {policy} gave a different result")
            row[policy] = (prof.primitive_executions, prof.block_executions)
        table[name] = row
    return table


def report(table: dict, policies) -> str:
    width = max(len(n) for n in table)
    lines = [f"{'program':<{width}}  " + "  ".join(f"{p:>22}" for p in policies)]
    for name, row in table.items():
        cells = [f"{row[p][0]:>10} ({row[p][1]:>9})" for p in policies]
        lines.append(f"{name:<{width}}  " + "  ".join(cells))
    lines.append("")
    lines.append("primitive executions (block executions); per policy, programs with more")
    lines.append("primitive executions than lowest_pc, and the total over the corpus:")
    for p in policies:
        worse = [n for n, row in table.items() if row[p][0] > row["lowest_pc"][0]]
        total = sum(row[p][0] for row in table.values())
        lines.append(f"  {p}: worse on {len(worse)} {worse[:6]}; total {total}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--policies", default=",".join(order_blocks.POLICIES))
    args = parser.parse_args()
    policies = args.policies.split(",")
    rng = np.random.RandomState(0)
    workloads = {
        **_example_workloads(rng, args.batch),
        **_corpus_workloads(args.batch),
        **_nuts_workload(args.chains),
    }
    print(report(measure(workloads, policies), policies))


if __name__ == "__main__":
    main()
