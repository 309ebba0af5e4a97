"""Issue 4: top-1/2/3 accuracy and MRR (train indexed, test queries) on banking77 and clinc150, for
the frozen all-MiniLM-L6-v2 and after `cea` training (pairs all, 1 epoch, seed 0), exact and HNSW.

    python bench/retrieval.py   # reuses bench/results/compare-banking77/cea_pairs=all_/seed-0/model

Its figures are records (``docs/records/retrieval.jsonl``): exact top-1 after cea against frozen.
"""

from __future__ import annotations

import json
import time

from cea.data import load_dataset
from cea.encoders import load_encoder
from cea.evaluation.retrieval import evaluate_retrieval
from cea.training import TrainConfig, train
from common import R, record, save, table


def cea_model(dataset: str) -> str:
    for folder in (R / f"compare-{dataset}" / "cea_pairs=all_" / "seed-0", R / f"retrieval-cea-{dataset}"):
        if (folder / "model").exists():
            return str(folder / "model")
    folder = R / f"retrieval-cea-{dataset}"
    train(
        TrainConfig(dataset=dataset, objective="cea", options={"pairs": "all"}, epochs=1, output=str(folder)),
        progress=False,
    )
    return str(folder / "model")


def main():
    rows = []
    for dataset in ("banking77", "clinc150"):
        ds = load_dataset(dataset)
        for name, model in (("frozen", "all-MiniLM-L6-v2"), ("cea", cea_model(dataset))):
            encoder = load_encoder(model)
            for index in ("exact", "hnsw"):
                t0 = time.perf_counter()
                scores = evaluate_retrieval(encoder, ds, index=index)
                rows.append(
                    {
                        "dataset": dataset,
                        "model": name,
                        "index": index,
                        **scores,
                        "seconds": round(time.perf_counter() - t0, 1),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    save("retrieval", rows)
    print()
    table(
        ["data set", "model", "index", "top-1", "top-2", "top-3", "MRR"],
        [
            [
                r["dataset"],
                r["model"],
                r["index"],
                *(f"{r[k]:.2f}" for k in ("top1_accuracy", "top2_accuracy", "top3_accuracy", "mrr")),
            ]
            for r in rows
        ],
        left=3,
    )
    for dataset in ("banking77", "clinc150"):
        at = {r["model"]: r for r in rows if r["dataset"] == dataset and r["index"] == "exact"}
        record(
            f"top-1 retrieval after 1 epoch of cea, {dataset}",
            round(at["cea"]["top1_accuracy"], 2),
            baseline=round(at["frozen"]["top1_accuracy"], 2),
            unit="% top-1",
            section="studies",
            baseline_is="frozen",
            note=f"MRR {at['cea']['mrr']:.2f} against {at['frozen']['mrr']:.2f}",
        )


if __name__ == "__main__":
    main()
