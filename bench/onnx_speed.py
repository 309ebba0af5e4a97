"""Issues 6 and 107: encode throughput of all-MiniLM-L6-v2 with PyTorch, ONNX fp32 and ONNX int8 (cea's: static
scales calibrated on the references; and the dynamic quantisation it replaced), the kNN accuracy each keeps on
banking77 (train split as references, test split as queries, k = 5), and whether a text's embedding depends on the
texts beside it.

The backends alternate inside each repeat on the same texts (banking77's test split, batch 64) and the medians are
reported; single-text latency is the median over 200 texts encoded one by one. The batch check encodes each of 64
test texts alone and inside a batch of the 64: the least cosine of the two (1.000000: the batch changes nothing).
Run it alone: the figures are wall time on a shared 2-core machine.

    python bench/onnx_speed.py [--repeats 3] [--threads 2]

Its figures are records (``docs/records/onnx_speed.jsonl``): int8 ONNX's texts/s against PyTorch's and against the
dynamic int8's, and the least cosine of a text alone and in a batch, static against dynamic.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time

import numpy as np

from common import R, record

STATIC, DYNAMIC = "onnx int8", "onnx int8, dynamic"


def exported(model, texts: list[str]):
    """all-MiniLM-L6-v2's export in ``bench/results/onnx-minilm`` (int8 calibrated on ``texts``) and, beside it, the
    fp32 graph quantised dynamically as cea did before issue 107 (``onnx-minilm-dynamic``): their two folders."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from cea.encoders.onnx import export_onnx

    folder, dynamic = R / "onnx-minilm", R / "onnx-minilm-dynamic"
    shutil.rmtree(folder, ignore_errors=True)
    model.save(str(folder))
    started = time.perf_counter()
    export_onnx(model, folder, int8=True, calibration=texts)
    print(f"export + static int8: {time.perf_counter() - started:.1f} s", flush=True)
    shutil.rmtree(dynamic, ignore_errors=True)
    shutil.copytree(folder, dynamic)
    quantize_dynamic(
        str(folder / "onnx/model.onnx"),
        str(dynamic / "onnx/model_int8.onnx"),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return folder, dynamic


def batch_cosine(encoder, texts: list[str]) -> float:
    """The least cosine between a text's embedding alone and inside a batch of ``texts``."""
    together = encoder.encode(texts, batch_size=len(texts), convert_to_numpy=True)
    alone = np.vstack([encoder.encode([t], batch_size=1, convert_to_numpy=True) for t in texts])
    norms = np.linalg.norm(together, axis=1) * np.linalg.norm(alone, axis=1)
    return float(((together * alone).sum(1) / norms).min())


def timed(encoders: dict, test: list[str], repeats: int) -> tuple[dict, dict]:
    """Seconds to encode ``test`` (batch 64) and single-text seconds, each backend in turn inside each repeat."""
    times = {name: [] for name in encoders}
    single = {name: [] for name in encoders}
    for _ in range(repeats):
        for name, encoder in encoders.items():
            started = time.perf_counter()
            encoder.encode(test, batch_size=64, convert_to_numpy=True)
            times[name].append(time.perf_counter() - started)
            for text in test[:200]:
                started = time.perf_counter()
                encoder.encode([text], batch_size=1, convert_to_numpy=True)
                single[name].append(time.perf_counter() - started)
        print({k: [round(x, 2) for x in v] for k, v in times.items()}, flush=True)
    return times, single


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from cea.data import load_dataset
    from cea.encoders import load_encoder
    from cea.encoders.onnx import OnnxEncoder
    from cea.knn import KNNClassifier

    ds = load_dataset("banking77")
    train, test = list(ds["train"]["text"]), list(ds["test"]["text"])
    model = load_encoder("all-MiniLM-L6-v2")
    folder, dynamic = exported(model, train)
    encoders = {
        "torch": model,
        "onnx fp32": OnnxEncoder(folder, "fp32", threads=args.threads),
        STATIC: OnnxEncoder(folder, "int8", threads=args.threads),
        DYNAMIC: OnnxEncoder(dynamic, "int8", threads=args.threads),
    }
    times, single = timed(encoders, test, args.repeats)
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
                "alone_vs_batch_cosine_min": round(batch_cosine(encoder, test[:64]), 6),
                "seconds": [round(x, 2) for x in times[name]],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    sizes = {p.name: round(p.stat().st_size / 2**20, 1) for p in (folder / "onnx").glob("*.onnx")}
    out = {"threads": args.threads, "texts": len(test), "batch_size": 64, "file_mb": sizes, "rows": rows}
    (R / "onnx_speed.json").write_text(json.dumps(out, indent=2))
    table(rows)
    records({r["backend"]: r for r in rows})


def table(rows: list[dict]) -> None:
    print("| backend | texts / s (batch 64) | vs PyTorch | one text, p50 ms | kNN accuracy | alone vs batch |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['texts_per_s']} | {r['speed_vs_torch']}x | {r['single_text_ms_p50']} | "
            f"{r['knn_accuracy']:.2f} | {r['alone_vs_batch_cosine_min']:.6f} |"
        )


def records(at: dict) -> None:
    static, dynamic = at[STATIC], at[DYNAMIC]
    record(
        "ONNX int8 encoding, banking77 test, batch 64",
        static["texts_per_s"],
        baseline=at["torch"]["texts_per_s"],
        unit="texts/s",
        section="speed",
        baseline_is="PyTorch",
        note=f"{static['speed_vs_torch']}x; kNN {static['knn_accuracy']:.2f} % against "
        f"{at['torch']['knn_accuracy']:.2f} %",
    )
    record(
        "ONNX int8 encoding against the dynamic int8 it replaced, banking77 test, batch 64",
        static["texts_per_s"],
        baseline=dynamic["texts_per_s"],
        unit="texts/s",
        section="speed",
        baseline_is="dynamic int8",
        note=f"{static['texts_per_s'] / dynamic['texts_per_s']:.2f}x; kNN {static['knn_accuracy']:.2f} % against "
        f"{dynamic['knn_accuracy']:.2f} %",
    )
    record(
        "ONNX int8, a text alone against in a batch of 64, least cosine",
        static["alone_vs_batch_cosine_min"],
        baseline=dynamic["alone_vs_batch_cosine_min"],
        unit="cosine",
        section="speed",
        baseline_is="dynamic int8",
        note="64 banking77 test texts; 1.000000: the batch changes nothing",
    )


if __name__ == "__main__":
    main()
