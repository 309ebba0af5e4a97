"""Issue 6: encode throughput of all-MiniLM-L6-v2 with PyTorch, ONNX fp32 and ONNX int8, and the kNN
accuracy each keeps on banking77 (train split as references, test split as queries, k = 5).

The three backends alternate inside each repeat on the same texts (banking77's test split, batch 64)
and the medians are reported; single-text latency is the median over 200 texts encoded one by one.
Run it alone: the figures are wall time on a shared 2-core machine.

    python bench/onnx_speed.py [--repeats 3] [--threads 2]

Its figure is a record (``docs/records/onnx_speed.jsonl``): int8 ONNX's texts/s against PyTorch's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from common import R, record


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.encoders.onnx import OnnxEncoder, export_onnx
    from cea.knn import KNNClassifier

    folder = R / "onnx-minilm"
    model = load_encoder("all-MiniLM-L6-v2")
    if not (folder / "onnx" / "model_int8.onnx").exists():
        model.save(str(folder))
        t0 = time.perf_counter()
        export_onnx(model, folder, int8=True)
        print(f"export + int8: {time.perf_counter() - t0:.1f} s", flush=True)
    encoders = {
        "torch": model,
        "onnx fp32": OnnxEncoder(folder, "fp32", threads=args.threads),
        "onnx int8": OnnxEncoder(folder, "int8", threads=args.threads),
    }
    ds = load_dataset("banking77")
    train, test = list(ds["train"]["text"]), list(ds["test"]["text"])
    times = {name: [] for name in encoders}
    single = {name: [] for name in encoders}
    for _ in range(args.repeats):
        for name, encoder in encoders.items():
            t0 = time.perf_counter()
            encoder.encode(test, batch_size=64, convert_to_numpy=True)
            times[name].append(time.perf_counter() - t0)
            for text in test[:200]:
                t0 = time.perf_counter()
                encoder.encode([text], batch_size=1, convert_to_numpy=True)
                single[name].append(time.perf_counter() - t0)
        print({k: [round(x, 2) for x in v] for k, v in times.items()}, flush=True)
    rows = []
    base = statistics.median(times["torch"])
    base_acc = None
    for name, encoder in encoders.items():
        refs = encoder.encode(train, batch_size=64, convert_to_numpy=True)
        queries = encoder.encode(test, batch_size=64, convert_to_numpy=True)
        predicted = KNNClassifier(5).fit(refs, ds["train"]["label"]).predict(queries)
        accuracy = 100 * float(np.mean(predicted == ds["test"]["label"].to_numpy()))
        base_acc = base_acc or accuracy
        median = statistics.median(times[name])
        rows.append(
            {
                "backend": name,
                "texts_per_s": round(len(test) / median, 1),
                "speed_vs_torch": round(base / median, 2),
                "single_text_ms_p50": round(1000 * statistics.median(single[name]), 2),
                "knn_accuracy": round(accuracy, 2),
                "accuracy_kept_pct": round(100 * accuracy / base_acc, 2),
                "seconds": [round(x, 2) for x in times[name]],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    sizes = {p.name: round(p.stat().st_size / 2**20, 1) for p in (folder / "onnx").glob("*.onnx")}
    out = {
        "threads": args.threads,
        "texts": len(test),
        "batch_size": 64,
        "file_mb": sizes,
        "rows": rows,
        "torch": torch.__version__,
        "onnxruntime": __import__("onnxruntime").__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    (R / "onnx_speed.json").write_text(json.dumps(out, indent=2))
    print("| backend | texts / s (batch 64) | vs PyTorch | one text, p50 ms | kNN accuracy | accuracy kept |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['texts_per_s']} | {r['speed_vs_torch']}x | {r['single_text_ms_p50']} | "
            f"{r['knn_accuracy']:.2f} | {r['accuracy_kept_pct']:.2f}% |"
        )
    print(f"files: {sizes}")
    at = {r["backend"]: r for r in rows}
    record(
        "ONNX int8 encoding, banking77 test, batch 64",
        at["onnx int8"]["texts_per_s"],
        baseline=at["torch"]["texts_per_s"],
        unit="texts/s",
        section="speed",
        baseline_is="PyTorch",
        note=f"{at['onnx int8']['speed_vs_torch']}x; kNN {at['onnx int8']['knn_accuracy']:.2f} % against "
        f"{at['torch']['knn_accuracy']:.2f} %",
    )


if __name__ == "__main__":
    main()
