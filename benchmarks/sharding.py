"""Scale-out: per-shard scheduling against one global scheduler, ``python benchmarks/sharding.py``.

One run: a divergent workload (Collatz over 1e6 inputs; NUTS with 4,096 chains on
a 10-D correlated Gaussian) on 1, 2 and 4 devices. ``global`` is one VM over the
whole batch, its inputs laid out over the devices (XLA partitions the loop, and
the scheduler's minimum program counter is taken over every device at every step,
so every device runs every block execution); ``sharded`` is
``JaxBackend(mesh=..., axis=...)``: each device runs its own VM on its share.
Printed per row: block executions of each device, wall time of a warm call
(median of ``--repeats``), and the ratios global / sharded of the busiest
device's block executions and of wall time.

Without ``--platform gpu`` the devices are forced CPU host devices
(``--xla_force_host_platform_device_count``, set before JAX starts), sharing the
machine's cores: wall time is bounded by the cores, and block executions per
device is the figure that carries to a machine with one accelerator per device.
``--scale 0.01`` runs everything 100x smaller (a smoke run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="1,2,4", help="device counts to compare")
    parser.add_argument("--scale", type=float, default=1.0, help="batch sizes times this")
    parser.add_argument("--workloads", default="collatz,nuts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=100, help="NUTS warmup draws")
    parser.add_argument("--samples", type=int, default=100, help="NUTS draws kept")
    parser.add_argument("--platform", default="cpu", help="cpu (forced host devices) or gpu")
    return parser.parse_args()


def configure(args) -> None:
    """Forced host devices must be asked for before JAX starts."""
    if "jax" in sys.modules:
        raise RuntimeError("benchmarks/sharding.py must configure XLA before JAX is imported")
    if args.platform == "cpu":
        most = max(int(d) for d in args.devices.split(","))
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={most}"
    os.environ["JAX_PLATFORMS"] = args.platform


def collatz_workload(scale: float):
    import numpy as np

    from pcbatch.examples import collatz

    size = max(int(1_000_000 * scale), 1)
    x = np.random.RandomState(0).randint(1, 1_000_000, size=size)
    # JAX runs these as int32 (jax_enable_x64 off): the few starts whose trajectories
    # pass 2**31 would wrap around and never reach 1, so they are swapped for starts
    # below 100,000, whose trajectories all stay under 1.6e9.
    x = np.where(_collatz_fits_int32(x), x, x % 100_000 + 1).astype(np.int32)
    return f"collatz x{size}", lambda backend, place: collatz(place(x), backend=backend)


def _collatz_fits_int32(x):
    """Per start, whether its Collatz trajectory stays within int32 (computed in int64)."""
    import numpy as np

    value, fits = x.astype(np.int64), np.ones(x.shape, bool)
    while (value != 1).any():
        value = np.where(value % 2 == 0, value // 2, np.where(value == 1, 1, 3 * value + 1))
        fits &= value <= np.iinfo(np.int32).max
    return fits


def nuts_workload(scale: float, warmup: int, samples: int):
    import jax.numpy as jnp
    import numpy as np

    from pcbatch.demo import correlated_gaussian
    from pcbatch.mcmc import nuts

    chains = max(int(4096 * scale), 1)
    mean, cov, _ = correlated_gaussian(10)
    precision = jnp.asarray(np.linalg.inv(cov), jnp.float32)
    mean = jnp.asarray(mean, jnp.float32)

    def log_prob(x):
        centered = x - mean
        return -0.5 * jnp.sum(centered * (precision @ centered))

    start = np.random.RandomState(1).normal(size=(chains, 10)).astype(np.float32)
    options = dict(
        num_samples=samples, num_warmup=warmup, seed=0, max_tree_depth=8, progress_bar=False
    )

    def call(backend, place):
        return nuts.sample(log_prob, place(start), backend=backend, **options).samples

    return f"nuts {chains} chains", call


def timed(call, repeats: int):
    """(median wall seconds of warm calls, the profile of one call)."""
    import jax

    import pcbatch

    jax.block_until_ready(call())  # compiles
    with pcbatch.profile() as prof:
        jax.block_until_ready(call())
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        walls.append(time.perf_counter() - start)
    return statistics.median(walls), prof


def compare(name: str, call, devices: int, repeats: int) -> None:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from pcbatch.backends.jax import JaxBackend

    mesh = Mesh(np.array(jax.devices()[:devices]), ("batch",))
    spread = lambda x: jax.device_put(x, NamedSharding(mesh, P("batch")))
    # The baseline's inputs laid out over the same devices (when they split evenly).
    whole = lambda x: spread(x) if np.shape(x)[0] % devices == 0 else x
    one_vm = JaxBackend()  # one instance: its compile cache lives across the calls
    global_wall, global_prof = timed(lambda: call(one_vm, whole), repeats)
    sharded_backend = JaxBackend(mesh=mesh, axis="batch")
    shard_wall, shard_prof = timed(lambda: call(sharded_backend, jax.numpy.asarray), repeats)
    per_shard = [shard_prof.shard_block_executions[d] for d in range(devices)]
    blocks = global_prof.block_executions
    for scheduler, wall, counts in (
        ("global", global_wall, [blocks] * devices),
        ("sharded", shard_wall, per_shard),
    ):
        ratio_blocks = blocks / max(max(counts), 1)
        print(
            f"{name:<22} {devices:>7} {scheduler:<8} {max(counts):>10} "
            f"{' '.join(map(str, counts)):<28} {wall:>9.3f} "
            f"{ratio_blocks:>8.2f}x {global_wall / wall:>7.2f}x",
            flush=True,
        )


def main() -> None:
    args = parse_args()
    configure(args)
    import jax

    counts = [int(d) for d in args.devices.split(",")]
    available = len(jax.devices())
    kind = jax.devices()[0].device_kind
    print(f"platform={args.platform} devices available={available} ({kind})")
    print(
        f"{'workload':<22} {'devices':>7} {'schedule':<8} {'max blocks':>10} "
        f"{'blocks per device':<28} {'wall s':>9} {'blocks':>9} {'wall':>8}"
    )
    workloads = {
        "collatz": lambda: collatz_workload(args.scale),
        "nuts": lambda: nuts_workload(args.scale, args.warmup, args.samples),
    }
    for workload in args.workloads.split(","):
        name, call = workloads[workload]()
        for devices in counts:
            if devices > available:
                print(f"{name:<22} {devices:>7} skipped: only {available} devices")
                continue
            compare(name, call, devices, args.repeats)


if __name__ == "__main__":
    main()
