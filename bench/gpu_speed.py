"""Issue 62 on one CUDA GPU: training and encoding throughput, accuracy at the GPU's batch, the service, discover.

    python bench/gpu_speed.py --data DIR --model DIR [--seconds 500] [--steps encode,train,accuracy,probe,serve,...]

``--data``: a folder holding banking77/ (train, dev and test files, as ``cea.data.load_dataset`` reads a folder);
``--model``: all-MiniLM-L6-v2's folder. all-mpnet-base-v2's weights (418 MB) cannot travel to a lent card (64 MiB a
call), so its throughput is measured on a model of its shape (12 layers, 768 wide, MPNet's relative attention) with
random weights and MiniLM's tokenizer (the same uncased WordPiece vocabulary): a step's work does not depend on the
weights' values; its accuracy is not measured here.

Steps, each skipped where fewer than its seconds are left of ``--seconds``:
  train     one epoch of the defaults' objective (softmax from the probe's head) on banking77 per (model, batch,
            precision, loader workers), without dev judgements; texts/s over the steps after the first 5 (the GPU
            synchronised at both ends), so loading, the head's start and the final evaluation are not counted;
  encode    ``model.encode`` of every banking77 text per (model, weights' precision, batch), after a warm-up pass;
  accuracy  the whole default run (judgements, early stopping, the test set) at batch 32 fp32 and at the GPU's batch
            in fp32 and bf16: test accuracy and the run's seconds;
  probe     every layer with mean and CLS pooling in fp32 and bf16 weights: the largest gap between a cell's two
            kNN accuracies, and the last layer's mean cell's;
  serve     a bundle of banking77 served on the GPU to 64 one-text clients (bench/serve_load.py) on the other cores;
  discover  ``cea discover`` with 75 % known classes and 10 % labelled.
Writes one record per figure (``docs/records/gpu_speed.jsonl``, each naming the card) and bench/results/gpu/speed.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import R, record  # noqa: E402

START = time.perf_counter()
MPNET = dict(
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=514,
    relative_attention_num_buckets=32,
    layer_norm_eps=1e-5,
)
# (batch, precision) of each throughput row
ROWS = {
    "MiniLM": [(32, "fp32"), (256, "fp32"), (256, "tf32"), (256, "bf16"), (512, "tf32"), (512, "bf16")],
    "mpnet-shaped": [(32, "fp32"), (256, "fp32"), (256, "tf32"), (256, "bf16"), (512, "bf16")],
}
ENCODES = [
    ("MiniLM", "fp32", 512),
    ("MiniLM", "tf32", 512),
    ("MiniLM", "tf32", 1024),
    ("MiniLM", "bf16", 1024),
    ("mpnet-shaped", "tf32", 512),
    ("mpnet-shaped", "bf16", 1024),
]
ACCURACY = [(256, "tf32"), (512, "tf32"), (512, "bf16")]
NEEDS = {"train": 100, "encode": 40, "accuracy": 60, "probe": 60, "serve": 90, "discover": 120}
COMMAND = "bash bench/gpu_check.sh (bench/gpu_speed.py)"


class Measured(Exception):
    """Raised at the end of a throughput run: the final evaluation and the saving are not measured."""


def card() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def mpnet_shaped(minilm: str, folder: Path) -> str:
    """A SentenceTransformer of all-mpnet-base-v2's shape (random weights, mean pooling) with ``minilm``'s tokenizer."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, MPNetConfig, MPNetModel

    if (folder / "modules.json").exists():
        return str(folder)
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    body = MPNetModel(MPNetConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **MPNET))
    (folder / "hf").mkdir(parents=True, exist_ok=True)
    body.save_pretrained(folder / "hf")
    tokenizer.save_pretrained(folder / "hf")
    transformer = models.Transformer(str(folder / "hf"), max_seq_length=384)
    model = SentenceTransformer(modules=[transformer, models.Pooling(768, "mean"), models.Normalize()])
    model.save(str(folder))
    return str(folder)


def throughput(
    data: str, model: str, batch: int, precision: str, workers: int, max_steps: int, profile: Path | None = None
) -> dict:
    """Texts/s of ``max_steps`` steps of the defaults' objective (its head started at random: the probe's start
    costs a logistic regression, not steps; no checkpoints), the first 5 not counted; ``profile``: the PyTorch
    profiler's table of steps 6-15 (self CPU and CUDA time per op) written there, and the steps after counted."""
    from transformers import TrainerCallback

    from cea.training import TrainConfig, train

    train_module = importlib.import_module("cea.training.train")

    class Clock(TrainerCallback):
        t0 = steps = None

        def on_step_end(self, args, state, control, **kwargs):
            if profile and state.global_step == 5:
                self.profiler = torch.profiler.profile()
                self.profiler.__enter__()
            if profile and state.global_step == 15:
                sync()
                self.profiler.__exit__(None, None, None)
                table = self.profiler.key_averages().table
                device = "self_device_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
                profile.write_text(
                    table(sort_by=device, row_limit=25) + "\n" + table(sort_by="self_cpu_time_total", row_limit=25)
                )
            if state.global_step == first:  # after the profiler's own work
                sync()
                self.t0 = time.perf_counter()
            if state.global_step >= state.max_steps:
                sync()
                self.steps, self.seconds = state.global_step - first, time.perf_counter() - self.t0

        def on_train_end(self, args, state, control, **kwargs):
            raise Measured

    saved, train_module.LOADER_WORKERS = train_module.LOADER_WORKERS, {"cuda": workers}
    torch.backends.cuda.matmul.allow_tf32 = False  # a tf32 run before set it for the process
    first, clock = 15 if profile else 5, Clock()
    with tempfile.TemporaryDirectory() as out:
        config = TrainConfig(
            dataset=data,
            model=model,
            epochs=1,
            batch_size=batch,
            precision=precision,
            select="last",
            patience=None,
            max_steps=max_steps,
            output=out,
            device=ARGS.device,
            options={"head_init": "random"},
            save_steps=10**6,
        )
        try:
            train(config, progress=False, callbacks=[clock])
        except Measured:
            pass
    train_module.LOADER_WORKERS = saved
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0
    torch.cuda.reset_peak_memory_stats() if torch.cuda.is_available() else None
    return {
        "texts_per_s": round(clock.steps * batch / clock.seconds, 1),
        "steps": clock.steps,
        "seconds": round(clock.seconds, 2),
        "peak_gib": round(peak, 2),
    }


def encode_rate(model, texts: list[str], batch: int) -> float:
    model.encode(texts[:2048], batch_size=batch)  # warm-up
    sync()
    t0 = time.perf_counter()
    model.encode(texts, batch_size=batch)
    sync()
    return len(texts) / (time.perf_counter() - t0)


def attempt(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or None with the error printed: one failed measurement does not lose the others."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        print(f"FAILED {getattr(fn, '__name__', fn)}: {exc}", flush=True)
        return None


def left() -> float:
    return ARGS.seconds - (time.perf_counter() - START)


def due(step: str) -> bool:
    """Whether ``step`` is in ``--steps`` and more than its seconds (:data:`NEEDS`) are left."""
    return step in ARGS.steps.split(",") and left() > NEEDS[step]


class Notes:
    """Each figure as a record naming the card, and all of them so far in speed.json (bench/results/gpu/ and $OUT)."""

    def __init__(self, gpu: str):
        self.gpu = gpu
        self.results = {"card": gpu}

    def __call__(self, figure, value, baseline=None, unit="", **extra):
        self.results[figure] = {"value": value, "baseline": baseline, **extra}
        record(
            figure,
            value,
            baseline=baseline,
            unit=unit,
            command=COMMAND,
            name="gpu_speed",
            section="gpu",
            card=self.gpu,
            **extra,
        )
        for folder in (R / "gpu", Path(os.environ.get("OUT") or R / "gpu")):  # $OUT: back even if the call is cut
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "speed.json").write_text(json.dumps(self.results, indent=1))


def encode_rows(note: Notes, texts: list[str], shaped: str) -> None:
    """Step ``encode``: each :data:`ENCODES` row's texts/s, with the tokenizer's own threads off and on."""
    from cea.encoders import load_encoder

    paths = {"MiniLM": ARGS.model, "mpnet-shaped": shaped}
    for parallel in ("false", "true"):  # the tokenizer's own threads: cea's CLI turns them off
        os.environ["TOKENIZERS_PARALLELISM"] = parallel
        for name, precision, batch in ENCODES:
            if name not in ARGS.shapes:
                continue
            torch.backends.cuda.matmul.allow_tf32 = False
            model = attempt(load_encoder, paths[name], device=ARGS.device, precision=precision)
            rate = model and attempt(encode_rate, model, texts, batch)
            del model
            if rate is not None:
                print(name, precision, batch, parallel, round(rate), flush=True)
                note(
                    f"encoding texts/s, {name}, {precision} weights, batch {batch}, tokenizer threads "
                    f"{'on' if parallel == 'true' else 'off'}",
                    round(rate),
                    unit="texts/s",
                )


def train_rows(note: Notes, data: str, shaped: str) -> None:
    """Step ``train``: each :data:`ROWS` row's training texts/s, while a minute is left."""
    grid = [("MiniLM", ARGS.model, b, p, 2, max(25, ARGS.texts // b)) for b, p in ROWS["MiniLM"]]
    grid += [
        ("mpnet-shaped", shaped, b, p, 2, max(25, ARGS.texts // 4 // b))
        for b, p in ROWS["mpnet-shaped"]
        if "mpnet-shaped" in ARGS.shapes
    ]
    for name, path, batch, precision, workers, most in grid:
        if left() < 60:
            break
        traced = R / "gpu" / f"profile-{name}-{batch}-{precision}-{workers}.txt" if ARGS.profile else None
        got = attempt(throughput, data, path, batch, precision, workers, most, traced)
        print(name, batch, precision, workers, got, flush=True)
        if got is None:
            continue
        note(
            f"training texts/s, {name}, batch {batch}, {precision}, {workers} loader workers",
            got["texts_per_s"],
            unit="texts/s",
            steps=got["steps"],
            peak_gib=got["peak_gib"],
        )


def accuracy_runs(note: Notes, data: str) -> None:
    """Step ``accuracy``: the whole default run at each :data:`ACCURACY` batch and precision, while 50 s are left."""
    from cea.training import TrainConfig, train

    for batch, precision in ACCURACY:
        if left() < 50:
            break
        torch.backends.cuda.matmul.allow_tf32 = False
        lr = None if batch == "auto" else 5e-5 * (batch / 32) ** 0.5  # as auto scales it
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            got = attempt(
                train,
                TrainConfig(
                    dataset=data,
                    model=ARGS.model,
                    batch_size=batch,
                    lr=lr,
                    precision=precision,
                    output=out,
                    device=ARGS.device,
                ),
                progress=False,
            )
            if got is None:
                continue
            test = got["metrics"]["test"]
            accuracy = test.get("head_accuracy", test.get("accuracy"))
            print("accuracy", batch, precision, accuracy, got["train_seconds"], flush=True)
            note(
                f"banking77 test accuracy, MiniLM defaults, batch {got['config']['batch_size']}, {precision}",
                round(accuracy, 2),
                unit="% accuracy",
                train_seconds=got["train_seconds"],
                run_seconds=round(time.perf_counter() - t0, 1),
                steps=got["steps"],
                lr=got["config"]["lr"],
            )


def probe_gaps(note: Notes, ds) -> None:
    """Step ``probe``: every layer and pooling in fp32 and bf16 weights, and the gaps between their accuracies."""
    from cea.evaluation.probe import probe

    cells = {}
    for precision in ("fp32", "bf16"):
        rows = probe(
            ds,
            models=(ARGS.model,),
            layers="all",
            poolings=("mean", "cls"),
            cache=False,
            progress=False,
            device=ARGS.device,
            precision=precision,
        ).rows
        cells[precision] = {(r["layer"], r["pooling"]): r["accuracy"] for r in rows}
    gaps = {key: abs(cells["bf16"][key] - cells["fp32"][key]) for key in cells["fp32"]}
    last = max(layer for layer, _ in gaps)
    note(
        "probe cells, bf16 weights against fp32, largest gap",
        round(max(gaps.values()), 2),
        unit="points",
        last_mean=round(gaps[(last, "mean")], 2),
        mean_cells=round(max(g for (_, p), g in gaps.items() if p == "mean"), 2),
    )


def serve_runs(data: str) -> None:
    """Step ``serve``: bench/serve_load.py against a bundle of banking77 on the GPU, one and four workers."""
    bundle = R / "gpu" / "bundle"
    if not (bundle / "manifest.json").exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "cea",
                "bundle",
                ARGS.model,
                "--dataset",
                data,
                "-o",
                str(bundle),
                "--device",
                ARGS.device,
            ],
            check=False,
        )
    cores = os.cpu_count() or 16
    for workers in (1, 4):  # cea serve --workers: processes behind the one address, each with the encoder
        if left() < NEEDS["serve"]:
            break
        attempt(
            subprocess.run,
            [
                sys.executable,
                str(Path(__file__).parent / "serve_load.py"),
                "--bundle",
                str(bundle),
                "--dataset",
                data,
                "--clients",
                "64",
                "--additions",
                "0",
                "--seconds",
                "15",
                "--workers",
                str(workers),
                "--tag",
                f"gpu-w{workers}",
                "--service-cpus",
                ",".join(str(c) for c in range(cores // 4)),
            ],
            timeout=max(30, left() - 60),
            check=False,
        )


def discover_run(note: Notes, data: str) -> None:
    """Step ``discover``: ``cea discover`` with 75 % known classes and 10 % labelled, its seconds and metrics."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "cea",
                "discover",
                "--dataset",
                data,
                "--model",
                ARGS.model,
                "--known-classes",
                "0.75",
                "--labelled",
                "0.1",
                "--output",
                out,
            ],
            timeout=max(30, left() - 10),
            check=False,
            capture_output=True,
            text=True,
        )
        print(done.stdout[-2000:], done.stderr[-2000:], flush=True)
        summary = Path(out) / "results.json"
        summary = summary if summary.exists() else None
        note(
            "cea discover banking77, 75 % known, 10 % labelled, seconds",
            round(time.perf_counter() - t0, 1),
            unit="s",
            returncode=done.returncode,
            result=json.loads(summary.read_text()).get("metrics") if summary else None,
        )


def main():
    from cea.data import load_dataset

    data = str(Path(ARGS.data) / "banking77")
    ds = load_dataset(data)
    texts = [t for split in ("train", "dev", "test") for t in ds[split]["text"]]
    shaped = mpnet_shaped(ARGS.model, R / "gpu" / "mpnet-shaped")
    note = Notes(card())
    if due("encode"):  # first: before the loader workers fork the tokenizer
        encode_rows(note, texts, shaped)
    if due("train"):
        train_rows(note, data, shaped)
    if due("accuracy"):
        accuracy_runs(note, data)
    if due("probe"):
        probe_gaps(note, ds)
    if due("serve"):
        serve_runs(data)
    if due("discover"):
        discover_run(note, data)
    print(json.dumps(note.results, indent=1), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--seconds", type=float, default=500)
    parser.add_argument("--device", default="cuda", help="cpu: a trial of the script itself")
    parser.add_argument("--profile", action="store_true", help="the profiler's tables of each row's steps 6-15")
    parser.add_argument("--shapes", default="MiniLM,mpnet-shaped", help="MiniLM: the mpnet-shaped model left out")
    parser.add_argument("--texts", type=int, default=12_800, help="MiniLM's texts a throughput run (mpnet: a quarter)")
    parser.add_argument("--steps", default="encode,train,accuracy,probe,serve,discover")
    ARGS = parser.parse_args()
    main()
