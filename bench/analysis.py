"""Issue 5 benchmarks: what the space looks like after each objective (the questions of the
"classification vs metric learning" study: cohesion, imbalance, transfer).

    python bench/analysis.py [cohesion] [imbalance] [transfer] [report]

1. cohesion: frozen, softmax, cea (all pairs) and triplet on trec6 and banking77 (the seed-0 models of
   bench/train_compare.sh): mean cohesion, centroid cosine (mean, max), test kNN accuracy;
2. imbalance: trec6 with LOC and NUM kept at 10% of their train examples, 1 epoch, seed 0, softmax vs
   cea vs triplet: accuracy, recall of the reduced labels, the three indicators;
3. transfer: a 32-dim bag of embeddings trained from scratch on dbpedia219 (softmax or triplet,
   10 epochs, batch 64, lr 1e-2), then fine-tuned on yahoo with softmax (5 epochs), against the same
   encoder trained on yahoo alone; yahoo test kNN accuracy;
4. report: the banking77 comparison (softmax beside cea all pairs, seed 0) as one HTML page, and a
   screenshot of it in headless Chromium (docs/report-banking77.png).
"""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np

from common import R, results

SETTINGS = {"softmax": "softmax", "cea all": "cea_pairs=all_", "triplet": "triplet"}


def _analyze(model_name, ds, small=None):
    from cea.encoders import load_encoder
    from cea.evaluation.classification import evaluate_encoder
    from cea.evaluation.geometry import analyze

    test = ds["test"]
    result = evaluate_encoder(
        load_encoder(model_name),
        ds["train"]["text"],
        ds["train"]["label"].to_numpy(),
        {"test": (test["text"], test["label"].to_numpy())},
        k=5,
        retrieval=(),
    )["test"]
    emb, pred = result.embeddings, result.predicted
    out = analyze(emb, test["label"].to_numpy(), small)
    out["accuracy"] = result.metrics()["knn_accuracy"]
    if small:
        gold = test["label"].to_numpy()
        out["small_recall"] = {s: round(100 * float(np.mean(pred[gold == s] == s)), 2) for s in small}
    return out


def _save(name: str, rows: list[dict], header: str, line) -> None:
    """Write the rows as JSON and print them as a markdown table (``line`` formats one row)."""
    (R / f"{name}.json").write_text(json.dumps(rows, indent=2))
    print("\n" + header)
    for r in rows:
        print(line(r))


def cohesion():
    from cea.data import load_dataset

    rows = []
    for dataset in ("trec6", "banking77"):
        ds = load_dataset(dataset)
        models = {"frozen": "all-MiniLM-L6-v2"}
        models.update({k: str(R / f"compare-{dataset}" / v / "seed-0" / "model") for k, v in SETTINGS.items()})
        for name, model in models.items():
            a = _analyze(model, ds)
            rows.append(
                {
                    "dataset": dataset,
                    "model": name,
                    "cohesion": round(a["cohesion"]["mean"], 3),
                    "centroid_cos_mean": round(a["separation"]["mean"], 3),
                    "centroid_cos_max": round(a["separation"]["max"], 3),
                    "accuracy": a["accuracy"],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    _save(
        "analysis-cohesion",
        rows,
        "| data set | model | cohesion | centroid cosine mean | centroid cosine max | "
        "kNN accuracy |\n|---|---|---:|---:|---:|---:|",
        lambda r: (
            f"| {r['dataset']} | {r['model']} | {r['cohesion']:.3f} | {r['centroid_cos_mean']:.3f} | "
            f"{r['centroid_cos_max']:.3f} | {r['accuracy']:.2f} |"
        ),
    )


def imbalance():
    from cea.data import load_dataset
    from cea.training import TrainConfig, train

    ds = load_dataset("trec6")
    small = ["LOC", "NUM"]
    rows = []
    for name, opts in (("softmax", {}), ("cea all", {"pairs": "all"}), ("triplet", {})):
        objective = name.split()[0]
        folder = R / "analysis-imbalance" / objective
        if results(folder) is None:
            train(
                TrainConfig(
                    dataset="trec6",
                    objective=objective,
                    imbalance="LOC:0.1,NUM:0.1",
                    epochs=1,
                    output=str(folder),
                    options=opts,
                ),
                progress=False,
            )
        a = _analyze(str(folder / "model"), ds, small)
        rows.append(
            {
                "model": name,
                "accuracy": a["accuracy"],
                "recall": a["small_recall"],
                **a["imbalance"],
                "cohesion_all": a["cohesion"]["mean"],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    _save(
        "analysis-imbalance",
        rows,
        "| model | accuracy | recall LOC | recall NUM | small cohesion (higher better) "
        "| small to large | small to small (lower better) |\n|---|---:|---:|---:|---:|---:|---:|",
        lambda r: (
            f"| {r['model']} | {r['accuracy']:.2f} | {r['recall']['LOC']:.2f} | {r['recall']['NUM']:.2f} | "
            f"{r['small_cohesion']:.3f} | {r['small_to_large']:.3f} | {r['small_to_small']:.3f} |"
        ),
    )


def transfer():
    from cea.data import load_dataset
    from cea.training import TrainConfig, train

    yahoo = load_dataset("yahoo")
    base = {"epochs": 10, "batch_size": 64, "lr": 1e-2, "k_per_class": 4}
    rows = []

    def run(folder, **kw):
        folder = R / "analysis-transfer" / folder
        if results(folder) is not None:
            return results(folder)
        return train(TrainConfig(output=str(folder), **{**base, **kw}), progress=False)

    alone = run("yahoo-alone", dataset="yahoo", model="bag:32", objective="softmax", epochs=5)
    rows.append({"pre-training": "none (yahoo alone)", "yahoo": alone["metrics"]["test"]["knn_accuracy"]})
    for objective in ("softmax", "triplet"):
        pre = run(f"dbpedia-{objective}", dataset="dbpedia219", model="bag:32", objective=objective)
        then = run(
            f"dbpedia-{objective}-then-yahoo",
            dataset="yahoo",
            objective="softmax",
            epochs=5,
            model=str(R / "analysis-transfer" / f"dbpedia-{objective}" / "model"),
        )
        frozen = _analyze(str(R / "analysis-transfer" / f"dbpedia-{objective}" / "model"), yahoo)
        rows.append(
            {
                "pre-training": f"dbpedia219 {objective}",
                "dbpedia219": pre["metrics"]["test"]["knn_accuracy"],
                "yahoo_frozen": frozen["accuracy"],
                "yahoo": then["metrics"]["test"]["knn_accuracy"],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    _save(
        "analysis-transfer",
        rows,
        "| pre-training | dbpedia219 test kNN | yahoo kNN, pre-trained encoder as it "
        "is | yahoo kNN after 5 epochs of softmax |\n|---|---:|---:|---:|",
        lambda r: f"| {r['pre-training']} | {r.get('dbpedia219', '-')} | {r.get('yahoo_frozen', '-')} | {r['yahoo']} |",
    )


def report():
    from cea.reports.html import build_report

    runs = [R / "compare-banking77" / "softmax" / "seed-0", R / "compare-banking77" / "cea_pairs=all_" / "seed-0"]
    page = build_report(runs, R / "report-banking77.html", title="banking77: softmax beside cea (all pairs), seed 0")
    browser_path = shutil.which("chromium")
    if browser_path:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=browser_path, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
            )
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.goto(page.resolve().as_uri())
            tab.screenshot(path="docs/report-banking77.png", full_page=True)
            browser.close()
    print(f"written {page} ({page.stat().st_size / 1024:.0f} KB) and docs/report-banking77.png")


if __name__ == "__main__":
    steps = sys.argv[1:] or ["cohesion", "imbalance", "transfer", "report"]
    for step in steps:
        globals()[step]()
