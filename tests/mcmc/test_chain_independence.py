"""Whether a chain's draws depend on the chains beside it (issue 26 item 7).

What docs/nuts.md ("Chains beside each other") states, tested: on NumPy a chain's
draws are bit for bit those it has alone or beside any other chains, in float32 and
float64, warmup included. On XLA (JAX, TensorFlow) the arithmetic is compiled for the
batch's shapes, and on x86 CPUs with FMA instructions the vectorized code XLA emits for
one number of chains may fuse a multiply and an add where the code for another does
not; NUTS amplifies that last-bit difference. Without FMA instructions
(``XLA_FLAGS=--xla_cpu_max_isa=AVX``) JAX's draws are again identical: the slow test
runs that in a fresh process (the flag is read when XLA starts).
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import subprocess
import sys

import numpy as np
import pytest

from pcbatch.mcmc import nuts
from tests import tiers

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCALES = np.linspace(0.5, 2.0, 10)


def _value_and_grad(x):  # ONE chain: independent normals of several scales, in x's dtype
    scales = SCALES.astype(x.dtype)
    return -0.5 * np.sum((x / scales) ** 2), -x / scales**2


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=tiers.slow)])
def test_on_numpy_a_chain_does_not_depend_on_the_number_of_chains(dtype):
    start = np.random.RandomState(0).normal(size=(8, 10)).astype(dtype)
    options = dict(
        num_samples=20, num_warmup=60, seed=5, max_tree_depth=6, progress_bar=False,
        value_and_grad=_value_and_grad, save_warmup=True,
    )  # fmt: skip
    eight = nuts.sample(None, start, **options)
    four = nuts.sample(None, start[:4], **options)
    assert eight.samples.dtype == dtype
    for draws_8, draws_4 in ((eight, four), (eight.warmup_draws, four.warmup_draws)):
        np.testing.assert_array_equal(draws_8.samples[:, :4], draws_4.samples)
        np.testing.assert_array_equal(draws_8.step_size[:, :4], draws_4.step_size)
        np.testing.assert_array_equal(draws_8.energy[:, :4], draws_4.energy)


_JAX_RUN = """
import json
import numpy as np
import jax.numpy as jnp
from pcbatch.mcmc import nuts

rng = np.random.RandomState(1)
root = rng.normal(size=(10, 10)).astype(np.float32)
precision = jnp.asarray(root @ root.T / 10 + np.eye(10, dtype=np.float32))

def log_prob(x):  # a correlated Gaussian: a matrix-vector product per chain
    return -0.5 * jnp.sum(x * jnp.matmul(precision, x))

start = np.random.RandomState(0).normal(size=(8, 10)).astype(np.float32)
options = dict(num_samples=50, num_warmup=100, seed=5, progress_bar=False)
eight = nuts.sample(log_prob, jnp.asarray(start), **options)
four = nuts.sample(log_prob, jnp.asarray(start[:4]), **options)
print(json.dumps({
    "dtype": str(eight.samples.dtype),
    "samples": bool(np.array_equal(np.asarray(eight.samples)[:, :4], np.asarray(four.samples))),
    "step_size": bool(np.array_equal(eight.step_size[:, :4], four.step_size)),
}))
"""


@tiers.slow
@pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"), reason="an x86 XLA flag"
)
def test_on_jax_without_fma_a_float32_chain_does_not_depend_on_the_number_of_chains():
    jax = pytest.importorskip("jax")
    if tuple(int(part) for part in jax.__version__.split(".")[:2]) >= (0, 12):
        # docs/nuts.md says so: on JAX 0.12 the two runs differed with the flag too
        pytest.skip("JAX 0.12's XLA: the flag no longer makes the runs agree")
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=AVX", PYTHONPATH=str(ROOT))
    env.pop("JAX_ENABLE_X64", None)
    done = subprocess.run(
        [sys.executable, "-c", _JAX_RUN], env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"dtype": "float32", "samples": True, "step_size": True}
