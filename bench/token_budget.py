"""Issue 107: the token budget of an encoder pass (texts x the longest one's tokens), per backend: throughput and
peak memory of ``cea.encoders.embeddings.encode`` over passes bounded by tokens, against passes of 64 texts whatever
their lengths (sentence-transformers' way, and cea's before).

    python bench/token_budget.py [--budgets 1024,2048,4096,8192] [--threads 2]

Two corpora: 2,000 texts of 20 to 40 words (banking77 and clinc150 train texts joined, as bench/batch_predict.py) and
400 of yahoo's long answers (cut at the encoder's 256 tokens). Each (backend, corpus, budget) runs in a process of
its own, all-MiniLM-L6-v2 in PyTorch and in ONNX Runtime (fp32, and int8 calibrated on banking77's train split:
bench/onnx_speed.py's export), so its peak RSS (the kernel's high-water mark) is its own: the model loaded, then the
texts encoded once (a warm-up pass of 64 first). Records, per backend, the budget cea uses
(``cea.encoders.device.ENCODE_TOKENS``) against 64 texts a pass on the long texts: texts/s and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_predict import joined  # noqa: E402

from common import R, record  # noqa: E402

BACKENDS = ("torch", "onnx fp32", "onnx int8")
ROWS = 64  # texts a pass at most: cea's default on a CPU (encode_batch)
UNBOUNDED = 10**9  # a budget no pass reaches: passes of ROWS texts whatever their lengths

CHILD = """
import json, resource, sys, time
import numpy as np, torch
torch.set_num_threads({threads})
from cea.encoders import load_encoder
from cea.encoders.embeddings import encode
from cea.encoders.onnx import OnnxEncoder
texts = json.load(open({texts!r}))
backend, rows, tokens = {backend!r}, {rows}, {tokens}
if backend == "torch":
    model = load_encoder("all-MiniLM-L6-v2")
else:
    model = OnnxEncoder({folder!r}, backend.split()[1], threads={threads})
encode(model, texts[:64], batch_size=rows, tokens=tokens)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
encode(model, texts, batch_size=rows, tokens=tokens)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"texts_per_s": len(texts) / seconds, "peak_mb": peak, "loaded_mb": before}}))
"""


def corpora() -> dict[str, list[str]]:
    from cea.data import load_dataset

    short = [t for name in ("banking77", "clinc150") for t in load_dataset(name)["train"]["text"]]
    long = [t for t in load_dataset("yahoo")["train"]["text"] if len(t.split()) >= 150][:400]
    return {"20-40 words": joined(short, 20, 40, count=2000), "long (yahoo)": long}


def one(backend: str, texts: Path, tokens: int, threads: int) -> dict:
    code = CHILD.format(
        threads=threads, texts=str(texts), backend=backend, rows=ROWS, tokens=tokens, folder=str(R / "onnx-minilm")
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="1024,2048,4096,8192")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--from-results", action="store_true", help="record from the last run's results, running nothing")
    args = ap.parse_args()
    if args.from_results:
        records(json.loads((R / "token_budget.json").read_text()), args.threads)
        return
    if not (R / "onnx-minilm" / "onnx" / "model_int8.onnx").exists():
        raise SystemExit("run bench/onnx_speed.py first: it writes the export this reads")
    budgets = [int(b) for b in args.budgets.split(",")] + [UNBOUNDED]
    rows = []
    for kind, texts in corpora().items():
        path = R / f"token-budget-{kind.split()[0]}.json"
        path.write_text(json.dumps(texts))
        for backend in BACKENDS:
            for tokens in budgets:
                got = {"corpus": kind, "backend": backend, "tokens": tokens, **one(backend, path, tokens, args.threads)}
                rows.append(got)
                print(json.dumps(got), flush=True)
    (R / "token_budget.json").write_text(json.dumps(rows, indent=2))
    table(rows)
    records(rows, args.threads)


def records(rows: list[dict], threads: int) -> None:
    """A record per backend: the budget cea uses against 64 texts a pass, on the long texts."""
    from cea.encoders.device import ENCODE_TOKENS

    for backend in BACKENDS:
        chosen = ENCODE_TOKENS["cpu" if backend == "torch" else "onnx"]
        at = {(r["corpus"], r["tokens"]): r for r in rows if r["backend"] == backend}
        mine, before = at["long (yahoo)", chosen], at["long (yahoo)", UNBOUNDED]
        short, short_before = at["20-40 words", chosen], at["20-40 words", UNBOUNDED]
        record(
            f"encoder passes of {chosen} tokens against {ROWS} texts, {backend}, long texts",
            round(mine["texts_per_s"], 1),
            baseline=round(before["texts_per_s"], 1),
            unit="texts/s",
            section="speed",
            baseline_is=f"{ROWS} texts a pass",
            note=f"peak RSS {mine['peak_mb']:.0f} MB against {before['peak_mb']:.0f}; 20-40 words "
            f"{short['texts_per_s']:.0f} against {short_before['texts_per_s']:.0f} texts/s; {threads} threads",
        )


def table(rows: list[dict]) -> None:
    print("| corpus | backend | tokens a pass | texts/s | peak RSS MB |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        tokens = f"{ROWS} texts" if r["tokens"] == UNBOUNDED else r["tokens"]
        print(f"| {r['corpus']} | {r['backend']} | {tokens} | {r['texts_per_s']:.1f} | {r['peak_mb']:.0f} |")


if __name__ == "__main__":
    main()
