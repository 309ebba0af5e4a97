"""What the benchmarks share: where results go, the records of the figures (``record``), a run's ``results.json``,
Markdown tables, timed commands, a grid of ``cea train`` runs, and the frozen encoder's splits with the logistic
regression chosen on dev (the baseline of the figures page).

A figure the docs show is a record: one JSON line in ``docs/records/NAME.jsonl`` (``record``), with the command,
machine, versions, commit and date that made it. The site's pages are generated from the records when it builds
(``docs/hooks/records.py``): a new figure is a new record, never an edit of prose.

Scripts run from the repository root as ``python bench/NAME.py``, so ``bench/`` is on the path and they import
this module as ``common``.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np

R = Path("bench/results")  # git-ignored
CS = (0.1, 1.0, 10.0, 100.0)  # the baseline's C, chosen on dev
ROOT = Path(__file__).resolve().parent.parent
RECORDS = Path(os.environ.get("CEA_RECORDS", ROOT / "docs" / "records"))  # the figures, one JSON line each
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")  # what moves our figures
PACKAGES = ("torch", "sentence-transformers", "transformers", "scikit-learn", "cea")


# what turns AVX-512 and VNNI off in each library a benchmark loads (torch, FAISS, OpenBLAS, numpy's own kernels)
AVX2_ONLY = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "FAISS_SIMD_LEVEL": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL",
    "CEA_AVX2_ONLY": "1",
}
BEYOND_AVX2 = ("avx512", "amx", "avx_vnni")  # the flags (by prefix) an AVX2-only CPU lacks


def avx2_only() -> None:
    """Run this script again with an AVX2-only CPU's kernels in every library (:data:`AVX2_ONLY`) and
    ``cea.hardware.cpu_flags`` (what the kNN kernel's choice reads) without AVX-512, VNNI or AMX: the figure of a CPU
    without them, on one that has them (its records' machine says so). ONNX Runtime picks its kernels itself: only
    cea's int8 search would use them."""
    if os.environ.get("CEA_AVX2_ONLY") != "1":
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **AVX2_ONLY})
    import cea.hardware

    flags = cea.hardware.cpu_flags()
    cea.hardware.cpu_flags = lambda: frozenset(f for f in flags if not f.startswith(BEYOND_AVX2))


def machine() -> dict:
    """This machine as a record names it: a short ``name`` (the CPU's family, ``-AVX2`` where it lacks AVX-512 or
    :func:`avx2_only` turned it off, the GPU where torch sees one; ``CEA_MACHINE`` overrides it), the CPU model, the
    flags of ``FLAGS`` it has (or runs with), its cores and memory."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
        platform.processor() or platform.machine(),
    )
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    if os.environ.get("CEA_AVX2_ONLY") == "1":
        flags, model = {f for f in flags if not f.startswith(BEYOND_AVX2)}, f"{model} (AVX-512 off)"
    family = next((w for w in ("EPYC", "Xeon", "Ryzen", "Core") if w in model), model.split()[0] if model else "?")
    name = family + ("" if "avx512f" in flags or not flags else "-AVX2")
    gpu = None
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        gpu = sys.modules["torch"].cuda.get_device_name(0)
        name = f"{gpu.split()[-1] if 'NVIDIA' in gpu else gpu} ({family})"
    mem = Path("/proc/meminfo")
    gb = round(int(mem.read_text().split()[1]) / 2**20) if mem.exists() else None
    out = {
        "name": os.environ.get("CEA_MACHINE", name),
        "cpu": model,
        "flags": [f for f in FLAGS if f in flags],
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": gb,
    }
    return out | ({"gpu": gpu} if gpu else {})


def versions() -> dict:
    """Python's version and those of ``PACKAGES`` installed (None where one is not)."""

    def version(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    return {"python": platform.python_version()} | {name: version(name) for name in PACKAGES}


def commit() -> str | None:
    """The checkout's commit (``git rev-parse HEAD``), ``+`` where the tree has changes; None outside git."""

    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src").stdout.strip()
    return head.stdout.strip() + ("+" if dirty else "")


def record(
    figure: str, value, *, baseline=None, unit: str = "", command: str | None = None, name: str | None = None, **extra
) -> dict:
    """Append one figure to ``docs/records/NAME.jsonl`` (NAME: the running script's, unless given) and return it.

    ``figure`` names what is measured in a few words and stays the same from one run to the next (the pages show the
    newest record of each figure as today's); ``value`` and ``baseline`` are numbers or a few words, ``unit`` says
    what they count (``"% accuracy"``, ``"s"``, ``"texts/s"``); ``command`` is the command line that made it (this
    process's by default). ``extra`` keeps anything else short a reader needs (``section``: where the pages show
    it; ``note``: a few words). The machine, versions, commit and date are filled in; the line is written under a
    lock, to a copy swapped into place, so that concurrent scripts never interleave nor leave half a line.
    ``CEA_RECORD=0`` in the environment prints the record and writes nothing (a quick or trial run).
    """
    rec = {
        "figure": figure,
        "value": value,
        "baseline": baseline,
        "unit": unit,
        "command": command or " ".join(["python", *sys.argv]),
        "machine": machine(),
        "versions": versions(),
        "commit": commit(),
        "date": datetime.date.today().isoformat(),
        **extra,
    }
    if os.environ.get("CEA_RECORD") == "0":
        print(f"record (not written, CEA_RECORD=0): {figure} = {value}", flush=True)
        return rec
    RECORDS.mkdir(parents=True, exist_ok=True)
    path = RECORDS / f"{name or Path(sys.argv[0]).stem or 'records'}.jsonl"
    folder = os.open(RECORDS, os.O_RDONLY)  # the lock: the folder itself
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        old = path.read_text() if path.exists() else ""
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text(old + ("" if not old or old.endswith("\n") else "\n") + json.dumps(rec, default=str) + "\n")
        os.replace(tmp, path)
    finally:
        os.close(folder)
    print(f"record: {figure} = {value} ({path})", flush=True)
    return rec


def results(folder: str | Path) -> dict | None:
    """A finished run's ``results.json`` (``cea train``, ``cea probe``, ``cea compare`` seeds), or None."""
    path = Path(folder) / "results.json"
    return json.loads(path.read_text()) if path.exists() else None


def save(name: str, data, indent: int = 2) -> Path:
    """Write ``data`` as JSON to ``bench/results/NAME`` (``.json`` added where missing)."""
    path = R / (name if name.endswith(".json") else f"{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=indent, default=str) + "\n")
    return path


def table(header: list[str], rows, left: int = 1) -> str:
    """A Markdown table: the first ``left`` columns aligned left, the others right; printed and returned."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def timed(cmd: list[str], **kwargs) -> float:
    """Run a command to its end (exit with its stderr's tail if it fails); its wall seconds."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{proc.stderr[-3000:]}")
    return round(time.perf_counter() - t0, 1)


def cea(*args: str) -> list[str]:
    """The command line of ``cea ARGS`` in this interpreter."""
    return [sys.executable, "-m", "cea", *map(str, args)]


def grid(runs: list[tuple[list[str], Path]]) -> list[Path]:
    """Run ``cea train ARGS --output OUT`` for each ``(args, out)`` not finished yet (finished runs are reused, so a
    grid can be stopped and started again); the output folders."""
    for args, out in runs:
        if results(out) is None:
            print(f"cea train {' '.join(args)} --output {out}", flush=True)
            subprocess.run(cea("train", *args, "--output", out), check=True)
    return [out for _, out in runs]


def labelling_loop_arguments(description: str):
    """An argument parser with the labelling loops' own arguments: the data set, ``--seeds``, ``--rounds`` of 2 x
    (number of classes) labels, and ``--start`` labelled texts a class (active_learning.py, label_studio.py)."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("dataset")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--start", type=int, default=8)
    return parser


def minilm_splits(ds, name: str) -> dict[str, np.ndarray]:
    """all-MiniLM-L6-v2's embeddings of the train and test texts of ``ds`` (data set ``name``), encoded once and
    cached in bench/results/active-learning/ (the labelling benchmarks read them instead of encoding)."""
    from cea.bundle.examples import encode
    from cea.encoders import load_encoder

    out = {}
    for split in ("train", "test"):
        path = R / "active-learning" / f"{name}-{split}.npy"
        if not path.exists() or len(np.load(path)) != len(ds[split]):
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, encode(load_encoder("all-MiniLM-L6-v2", device="cpu"), list(ds[split]["text"])))
        out[split] = np.load(path)
    return out


def accuracy(pred, gold) -> float:
    """Accuracy in percent, two decimals."""
    return round(100 * float(np.mean(np.asarray(pred) == np.asarray(gold))), 2)


def accuracy_f1(pred, gold) -> str:
    """``"accuracy / macro-F1"`` in percent."""
    from sklearn.metrics import f1_score

    return f"{accuracy(pred, gold):.2f} / {100 * f1_score(gold, pred, average='macro'):.2f}"


def encoded(model, frames: dict) -> tuple[dict, dict]:
    """Unit-length embeddings and label arrays of each ``{name: frame}`` (texts and labels of a split or sample)."""
    from cea.encoders.embeddings import encode
    from cea.knn.search import normalize

    x = {s: normalize(encode(model, list(f["text"]))) for s, f in frames.items()}
    return x, {s: f["label"].to_numpy() for s, f in frames.items()}


def logreg_on_dev(x: dict, y: dict, refit: bool = True, max_iter: int = 3000):
    """The baseline: a logistic regression with C (``CS``) chosen on dev, fitted on train, then refitted on train + dev
    (``refit``; few-shot runs keep the sample alone). Returns the classifier, C and its dev accuracy."""
    from sklearn.linear_model import LogisticRegression

    dev = {
        c: float(
            np.mean(
                LogisticRegression(C=c, max_iter=max_iter).fit(x["train"], y["train"]).predict(x["dev"]) == y["dev"]
            )
        )
        for c in CS
    }
    c = max(dev, key=dev.get)
    X, Y = (
        (np.vstack([x["train"], x["dev"]]), np.concatenate([y["train"], y["dev"]]))
        if refit
        else (x["train"], y["train"])
    )
    return LogisticRegression(C=c, max_iter=max_iter).fit(X, Y), c, dev[c]
