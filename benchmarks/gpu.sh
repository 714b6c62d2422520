#!/usr/bin/env bash
# The GPU columns of benchmarks/README.md, in one run of a few minutes.
#
# Needs a CUDA GPU with JAX's CUDA plugin and Torch built for CUDA, BlackJAX and NumPyro
# for the NUTS rows (a missing one is reported by nuts.py), Pyro for torch.py's model, and
# pytest-xdist for the tests. TensorFlow is not needed: the TF-XLA rows are skipped where
# it is absent. Each step has its own time limit, so one slow step
# cannot take the others' time. Output: one file per step in $OUT (default
# /tmp/pcbatch-gpu), each also printed.
#
#   PYTHONPATH=. bash benchmarks/gpu.sh
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/pcbatch-gpu}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
export XLA_PYTHON_CLIENT_PREALLOCATE=false

step() {  # step NAME SECONDS COMMAND...: runs COMMAND, output to $out/NAME.txt
    # SIGINT first: Python prints what it has (pytest its summary), then a kill 15 s later
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*" | tee "$out/$name.txt"
    timeout -s INT -k 15 "$limit" "$@" 2>&1 | grep -v -e '^W0' -e '^I0' | tee -a "$out/$name.txt"
}

step machine 60 sh -c "nvidia-smi -L; uptime; $py -c 'import jax, torch; print(jax.__version__, \
jax.devices(), torch.__version__, torch.cuda.get_device_name())'; $py benchmarks/vm_step_probe.py"
# NUTS at a fixed step size (no warmup), identity mass, same starts: issue 28's setting.
step nuts_gaussian 150 "$py" benchmarks/nuts.py --backends jax,jax/loops,blackjax,gradient,numpyro \
    --chains 1000 --warmup 0 --samples 100 --target gaussian
step nuts_logistic 100 "$py" benchmarks/nuts.py --backends jax,blackjax,gradient,numpyro \
    --chains 1000 --warmup 0 --samples 100 --target logistic
step nuts_profile 90 "$py" benchmarks/sweep_profile_probe.py 1000 1
step loops 120 "$py" benchmarks/loops.py --platform gpu --contenders pcbatch-jax,pcbatch-jax-loops,jax-vmap
# Torch's eager VM pays the device's launch and sync costs per block: a few repeats only
step torch_loops 60 "$py" benchmarks/loops.py --platform gpu --repeats 3 \
    --contenders pcbatch-torch,jax-vmap
step torch_nuts 60 "$py" benchmarks/torch.py --device cuda --skip-backends --skip-pyro \
    --chains 1000 --draws 50
step backends 45 "$py" benchmarks/backends.py --backends jax --repeats 5 --first-calls 1
# Semantics on the GPU: JAX's float64 kernels there are not the CPU's
step jax_tests 65 "$py" -m pytest -p no:cacheprovider -n 8 -rf --timeout 120 \
    tests/semantics -k jax
