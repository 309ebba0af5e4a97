"""Issue 90's loop from zero in a real Label Studio 1.23: test accuracy after 0 (the label names alone), 1, 2, 4, 8
and 16 annotations a class, gold labels standing in for the annotator, with instant learning alone and with the
background fits.

    CEA_LABEL_STUDIO=.../label-studio python bench/label_studio_zero.py banking77 [--seeds 0,1,2]
        [--modes instant,fits] [--shots 1,2,4,8,16] [--budget 15m]

An empty all-MiniLM-L6-v2 bundle (``cea bundle MODEL -o B``, no data set) is served by ``cea serve`` and connected to a
new project as its ML backend: Label Studio's setup hands it the label config, and each Choice becomes a class whose
name is its first example. The seed draws 16 train texts a class, imported as tasks. At each checkpoint the next
ones are annotated through Label Studio's API (its webhook teaches the backend at once). ``instant``: ``cea serve
--no-train``. ``fits``: ``cea serve --train-from 0``, and at each checkpoint the bench presses Label Studio's Start
Training (``POST /api/ml/ID/train``) as a user would, and waits for the background fit to end (swapped in where it
beat the live bundle on the held-back annotations, else kept out). Then the test split is predicted through ``cea
serve``'s ``/predict`` (the live encoder and head; an answer of "unknown" counted by its closest class).

At 8 a class, ``cea fit`` also runs offline on the same annotations (its dev carved from them, the data set's test
judging), the goal's comparison (within 1 point). At 0, the baseline is a frozen encoder's nearest label name.

Records (``docs/records/label_studio_zero.jsonl``, section ``label-studio-zero``): per data set and count a class, the
fits' test accuracy against instant learning's (means over the seeds), 0 against the nearest label name, and 8 a
class with fits against the offline ``cea fit``. Each seed's figures are saved
(``bench/results/label-studio-zero/seeds``) and read, not run again, by a later run of the same setting (``--again``
reruns them): seeds can run apart, one a core in copies of the tree, and one run over all of them writes the records.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from label_studio import TOKEN, annotate, import_pool, port, project, start_studio, unlabelled
from serve_load import crash, start

from common import R, commit, record, table

SECTION = "label-studio-zero"
MODEL = "all-MiniLM-L6-v2"
SHOTS = (1, 2, 4, 8, 16)
OFFLINE_AT = 8  # the count a class at which cea fit runs offline on the same annotations
BATCH = 256  # texts a /predict request (cea serve's max_texts)


def drawn(labels: np.ndarray, most: int, seed: int) -> dict[str, list[int]]:
    """Per class, ``most`` train rows in the order the seed draws them (all where the class has fewer)."""
    rng = np.random.default_rng(seed)
    return {c: rng.permutation(np.flatnonzero(labels == c))[:most].tolist() for c in sorted(set(labels))}


def test_accuracy(service: httpx.Client, texts: list[str], gold: np.ndarray) -> float:
    """The test split's accuracy through ``/predict``: the label, or the closest class where it says unknown."""
    said = []
    for a in range(0, len(texts), BATCH):
        answer = service.post("/predict", json={"texts": texts[a : a + BATCH]})
        answer.raise_for_status()
        said += [
            p["closest"] if p["label"] == "unknown" and p.get("closest") else p["label"]
            for p in answer.json()["predictions"]
        ]
    return round(100 * float(np.mean(np.asarray(said) == gold)), 2)


def fitted(service: httpx.Client, studio: httpx.Client, backend_id: int, budget: float) -> dict:
    """Label Studio's Start Training pressed, then the background fit's outcome once it has ended."""
    before = service.get("/health").json()["training"]["last"]
    answer = studio.post(f"/api/ml/{backend_id}/train", json={})
    assert answer.status_code in (200, 201), answer.text
    deadline = time.monotonic() + budget + 600
    while time.monotonic() < deadline:
        training = service.get("/health").json()["training"]
        if training["state"] == "idle" and training["last"] not in (None, before):
            return training["last"]
        time.sleep(2)
    raise RuntimeError("the background fit did not end within its budget and 10 minutes")


def loop(
    mode: str, url: str, data: dict, seed: int, shots: list[int], budget: str, folder: Path, at: int
) -> tuple[list[float], list[dict], list[int]]:
    """One project from zero: the test accuracy at 0 and after each count of ``shots``, the fits' outcomes, and
    the train rows annotated at :data:`OFFLINE_AT` a class."""
    bundle = folder / "bundle"
    subprocess.run(
        [sys.executable, "-m", "cea", "bundle", MODEL, "-o", str(bundle)], check=True, stdout=subprocess.DEVNULL
    )
    training = (
        ["--no-train"]
        if mode == "instant"
        else ["--train-from", "0", "--train-budget", budget, "--train-work", str(folder / "fits")]
    )
    process = start([sys.executable, "-m", "cea", "serve", str(bundle), "--port", str(at), *training], at)
    service = httpx.Client(base_url=f"http://127.0.0.1:{at}", timeout=600)
    studio = httpx.Client(base_url=url, headers={"Authorization": f"Token {TOKEN}"}, timeout=600)
    try:
        made, backend_id = project(studio, data["classes"], f"http://127.0.0.1:{at}/label-studio", connect=True)
        named = service.get("/health").json()["examples"]  # the label names setup made examples of
        picks = drawn(data["labels"], max(shots), seed)
        order = [picks[c][n] for n in range(max(shots)) for c in data["classes"] if n < len(picks[c])]
        import_pool(studio, made, [data["texts"][row] for row in order])
        task_of = dict(zip(order, sorted(t["id"] for t in unlabelled(studio, made, 1_000_000))))
        scores, outcomes, done, offline = [test_accuracy(service, data["test"], data["test_labels"])], [], set(), []
        print(f"{data['name']} {mode} seed {seed}: 0 a class {scores[0]}", flush=True)
        for n in shots:
            rows = [r for c in data["classes"] for r in picks[c][:n] if r not in done]
            annotate(studio, [{"id": task_of[r], "data": {"text": data["texts"][r]}} for r in rows], data["gold"])
            done.update(rows)
            wait_learned(service, named + len(done))
            if mode == "fits":
                outcomes.append(fitted(service, studio, backend_id, data["budget"]))
            scores.append(test_accuracy(service, data["test"], data["test_labels"]))
            if n == OFFLINE_AT:
                offline = sorted(done)
            print(
                f"{data['name']} {mode} seed {seed}: {n} a class {scores[-1]}"
                + (f"; fit {short(outcomes[-1])}" if outcomes else ""),
                flush=True,
            )
        return scores, outcomes, offline
    finally:
        studio.close()
        service.close()
        crash(process)


def wait_learned(service: httpx.Client, count: int) -> None:
    """Until the backend holds ``count`` examples (the label names and the annotations its webhook has had)."""
    for _ in range(600):
        if service.get("/health").json()["examples"] >= count:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the backend did not reach {count} examples within a minute")


def short(outcome: dict) -> str:
    return (
        f"{outcome['outcome']} (held-back {outcome.get('fitted_accuracy')} fitted vs "
        f"{outcome.get('live_accuracy')} live, {outcome.get('seconds')} s)"
    )


def offline_fit(data: dict, rows: list[int], budget: str, folder: Path) -> float:
    """``cea fit`` on the train ``rows`` (its dev carved from them), the data set's test judging: test accuracy."""
    files = folder / "offline"
    files.mkdir(parents=True)
    (files / "train.csv").write_text(frame(data["texts"], data["labels"], rows))
    (files / "test.csv").write_text(frame(data["test"], data["test_labels"], range(len(data["test"]))))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cea",
            "fit",
            "--train",
            str(files / "train.csv"),
            "--test",
            str(files / "test.csv"),
            "--budget",
            budget,
            "-o",
            str(folder / "offline-bundle"),
            "--work",
            str(folder / "offline-work"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return round(json.loads((folder / "offline-bundle" / "fit.json").read_text())["test"]["accuracy"], 2)


def frame(texts, labels, rows) -> str:
    import pandas as pd

    return pd.DataFrame({"text": [texts[r] for r in rows], "label": [labels[r] for r in rows]}).to_csv(index=False)


def nearest_name(dataset, name: str) -> float:
    """A frozen encoder's nearest label name on the test split (bench/cold_start.py's baseline)."""
    from cea.bundle.examples import encode
    from cea.data.label_names import name_text
    from cea.encoders import load_encoder
    from common import accuracy, minilm_splits

    x = minilm_splits(dataset, name)
    labels = sorted(set(dataset["train"]["label"].astype(str)))
    named = {label: text for label in labels if (text := name_text(label))}
    names = encode(load_encoder(MODEL, device="cpu"), list(named.values()))
    return accuracy(np.array(list(named))[(x["test"] @ names.T).argmax(1)], dataset["test"]["label"].astype(str))


def one_seed(url: str, data: dict, seed: int, setting: dict, work: Path) -> dict:
    """Every mode's loop for one seed, and the offline ``cea fit`` at :data:`OFFLINE_AT` a class; saved (a seed
    takes 12-17 minutes on one core: seeds run apart, one a core, then one run of all reads what they saved)."""
    run = {"setting": setting, "commit": commit(), "curves": {}, "outcomes": [], "offline": None}
    name = data["name"]
    for mode in setting["modes"]:
        folder = work / f"{name}-{mode}-{seed}"
        shutil.rmtree(folder, ignore_errors=True)
        scores, fits, rows = loop(mode, url, data, seed, setting["shots"], setting["budget"], folder, port())
        run["curves"][mode] = scores
        run["outcomes"] += fits
        if mode == "fits" and rows:
            run["offline"] = offline_fit(data, rows, setting["budget"], folder)
            print(f"{name} seed {seed}: cea fit offline at {OFFLINE_AT} a class {run['offline']}", flush=True)
    (work / "seeds").mkdir(parents=True, exist_ok=True)
    (work / "seeds" / f"{name}-{seed}.json").write_text(json.dumps(run))
    return run


def saved(work: Path, name: str, seed: int, setting: dict, again: bool) -> dict | None:
    """A seed's saved run of the same setting, or None where it must run. A run saved at another commit is reused
    all the same: its ``commit`` says where it ran, and the records' notes say so."""
    path = work / "seeds" / f"{name}-{seed}.json"
    if again or not path.exists():
        return None
    run = json.loads(path.read_text())
    return run if run["setting"] == setting else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--modes", default="instant,fits")
    parser.add_argument("--shots", default=",".join(map(str, SHOTS)), help="annotations a class, comma-separated")
    parser.add_argument("--budget", default="15m", help="each fit's budget (cea serve --train-budget)")
    parser.add_argument("--again", action="store_true", help="rerun the seeds a run of the same setting has saved")
    args = parser.parse_args()

    from cea.data import load_dataset
    from cea.progress import parse_duration

    seeds, shots, modes = (
        [int(s) for s in args.seeds.split(",")],
        [int(n) for n in args.shots.split(",")],
        args.modes.split(","),
    )
    work = R / "label-studio-zero"
    for name in args.datasets:
        ds = load_dataset(name)
        labels = ds["train"]["label"].astype(str).to_numpy()
        texts = list(ds["train"]["text"])
        data = {
            "name": name,
            "texts": texts,
            "labels": labels,
            "classes": sorted(set(labels)),
            "gold": dict(zip(texts, labels)),
            "test": list(ds["test"]["text"]),
            "test_labels": ds["test"]["label"].astype(str).to_numpy(),
            "budget": parse_duration(args.budget, "budget"),
        }
        setting = {"modes": modes, "shots": shots, "budget": args.budget}
        runs = {seed: saved(work, name, seed, setting, args.again) for seed in seeds}
        if None in runs.values():
            with tempfile.TemporaryDirectory() as tmp:
                url, studio = start_studio(Path(tmp) / "label-studio")
                try:
                    for seed in [seed for seed, run in runs.items() if run is None]:
                        runs[seed] = one_seed(url, data, seed, setting, work)
                finally:
                    studio.terminate()
                    studio.wait(30)
        curves = {mode: [runs[seed]["curves"][mode] for seed in seeds] for mode in modes}
        outcomes = [o for seed in seeds for o in runs[seed]["outcomes"]]
        offline = [runs[seed]["offline"] for seed in seeds if runs[seed]["offline"] is not None]
        mean = {mode: np.mean(c, axis=0).round(2) for mode, c in curves.items()}
        counts = [0, *shots]
        table(["a class", *modes], [[n, *(mean[m][i] for m in modes)] for i, n in enumerate(counts)])
        ran = sorted({(runs[seed]["commit"] or "?")[:7] for seed in seeds})
        here = [(commit() or "?")[:7]]
        where = f"{name}, {MODEL}, seeds {args.seeds}" + (f" run at {', '.join(ran)}" if ran != here else "")
        first = mean[modes[0]][0]
        record(
            f"Label Studio from zero: 0 annotations, {name}",
            float(first),
            baseline=nearest_name(ds, name),
            baseline_is="a frozen encoder's nearest label name",
            unit="% test accuracy",
            section=SECTION,
            note=f"{where}; the label names alone, served after Label Studio's setup",
        )
        if set(modes) == {"instant", "fits"}:
            swapped = sum(o["outcome"] == "swapped" for o in outcomes)
            for i, n in enumerate(shots, start=1):
                record(
                    f"Label Studio from zero: {n} annotations a class, {name}, with background fits",
                    float(mean["fits"][i]),
                    baseline=float(mean["instant"][i]),
                    baseline_is="instant learning alone",
                    unit="% test accuracy",
                    section=SECTION,
                    note=f"{where}; Start Training at each count, budget {args.budget}",
                )
            if offline and OFFLINE_AT in shots:
                at = shots.index(OFFLINE_AT) + 1
                record(
                    f"Label Studio from zero: {OFFLINE_AT} a class with background fits against cea fit offline, "
                    f"{name}",
                    float(mean["fits"][at]),
                    baseline=round(statistics.mean(offline), 2),
                    baseline_is="cea fit offline on the same annotations",
                    unit="% test accuracy",
                    section=SECTION,
                    note=f"{where}; {swapped} of {len(outcomes)} fits swapped in; goal within 1 point",
                )


if __name__ == "__main__":
    main()
