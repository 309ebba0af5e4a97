"""What the benchmarks share: where results go, a run's ``results.json``, Markdown tables, timed commands, a grid
of ``cea train`` runs, and the frozen encoder's splits with the logistic regression chosen on dev (the baseline of
the figures page).

Scripts run from the repository root as ``python bench/NAME.py``, so ``bench/`` is on the path and they import
this module as ``common``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

R = Path("bench/results")  # git-ignored
CS = (0.1, 1.0, 10.0, 100.0)  # the baseline's C, chosen on dev


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
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|"]
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


def accuracy(pred, gold) -> float:
    """Accuracy in percent, two decimals."""
    return round(100 * float(np.mean(np.asarray(pred) == np.asarray(gold))), 2)


def accuracy_f1(pred, gold) -> str:
    """``"accuracy / macro-F1"`` in percent."""
    from sklearn.metrics import f1_score

    return f"{accuracy(pred, gold):.2f} / {100 * f1_score(gold, pred, average='macro'):.2f}"


def encoded(model, frames: dict) -> tuple[dict, dict]:
    """Unit-length embeddings and label arrays of each ``{name: frame}`` (texts and labels of a split or sample)."""
    from cea.evaluation.classification import encode
    from cea.knn.search import normalize

    x = {s: normalize(encode(model, list(f["text"]))) for s, f in frames.items()}
    return x, {s: f["label"].to_numpy() for s, f in frames.items()}


def logreg_on_dev(x: dict, y: dict, refit: bool = True, max_iter: int = 3000):
    """The baseline: a logistic regression with C (``CS``) chosen on dev, fitted on train, then refitted on train + dev
    (``refit``; few-shot runs keep the sample alone). Returns the classifier, C and its dev accuracy."""
    from sklearn.linear_model import LogisticRegression

    dev = {c: float(np.mean(LogisticRegression(C=c, max_iter=max_iter).fit(x["train"], y["train"]).predict(x["dev"])
                            == y["dev"])) for c in CS}
    c = max(dev, key=dev.get)
    X, Y = ((np.vstack([x["train"], x["dev"]]), np.concatenate([y["train"], y["dev"]])) if refit
            else (x["train"], y["train"]))
    return LogisticRegression(C=c, max_iter=max_iter).fit(X, Y), c, dev[c]
