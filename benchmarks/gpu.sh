#!/usr/bin/env bash
# The GPU columns of benchmarks/README.md, in one run of a few minutes.
#
# Needs a CUDA GPU with JAX's CUDA plugin, and BlackJAX and NumPyro for the NUTS rows
# (a missing one is reported by nuts.py). TensorFlow is not needed: the TF-XLA rows
# are skipped where it is absent. Each step has its own time limit, so one slow step
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
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*" | tee "$out/$name.txt"
    timeout "$limit" "$@" 2>&1 | grep -v -e '^W0' -e '^I0' | tee -a "$out/$name.txt"
}

step machine 40 sh -c "nvidia-smi -L; uptime; $py -c 'import jax; print(jax.__version__, jax.devices())'"
# NUTS at a fixed step size (no warmup), identity mass, same starts: issue 28's setting.
step nuts_gaussian 140 "$py" benchmarks/nuts.py --backends jax,blackjax,numpyro,gradient \
    --chains 10,1000 --warmup 0 --samples 100 --target gaussian
step nuts_logistic 110 "$py" benchmarks/nuts.py --backends jax,blackjax,numpyro,gradient \
    --chains 10,1000 --warmup 0 --samples 100 --target logistic
step loops 80 "$py" benchmarks/loops.py --platform gpu --contenders pcbatch-jax,jax-vmap
step loops_x10 60 "$py" benchmarks/loops.py --platform gpu --contenders pcbatch-jax,jax-vmap \
    --scale 10 --only collatz
step backends 60 "$py" benchmarks/backends.py --backends jax --repeats 5 --first-calls 1
