"""The CLI end to end, in a subprocess: results on disk, one-line errors with exit code 2."""

import json
import os
import re
import socket
import subprocess
import sys

import pytest

from cea.defaults import DISCOVER_OVER as OVER


def run(*args, cwd=None):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "cea", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_probe_on_a_local_file(tiny_bert_dir, intents_csv, tmp_path):
    out = tmp_path / "run"
    proc = run(
        "probe",
        "--dataset",
        intents_csv,
        "--models",
        tiny_bert_dir,
        "--layers",
        "1,2",
        "--pooling",
        "mean",
        "--k",
        "3",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "results.json").read_text())
    assert [(r["layer"], r["pooling"]) for r in data["rows"]] == [(1, "mean"), (2, "mean")]
    assert [r["accuracy"] for r in data["rows"]] == [100.0, 100.0]  # the classes share their words
    assert data["meta"]["dataset"] == "intents" and data["format"] == "cea.probe/1"
    assert (out / "results.csv").read_text().splitlines()[0].startswith("model,layer,pooling,accuracy")
    assert "best:" in proc.stdout
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary leftovers


@pytest.mark.parametrize(
    "args, message",
    [
        (["probe", "--dataset", "bankin77"], "did you mean banking77"),
        (["probe", "--dataset", "missing.csv"], "file not found: missing.csv"),
        (["probe", "--dataset", "{csv}", "--text-column", "utterance"], "no column 'utterance'"),
        (["probe", "--dataset", "{csv}", "--models", "{model}", "--k", "500"], "k = 500 is larger than"),
        (["probe", "--dataset", "{csv}", "--models", "{model}", "--layers", "9"], "outside the model's 0..2"),
        (["probe", "--dataset", "{csv}", "--models", "./nope"], "model folder not found"),
        (
            ["probe", "--dataset", "{csv}", "--models", "{model}", "--max-seq-length", "1"],
            "--max-seq-length must be at least 2 tokens",
        ),
        (["datasets", "show", "stsbb"], "did you mean stsb"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(args, message, intents_csv, tiny_bert_dir):
    args = [a.format(csv=intents_csv, model=tiny_bert_dir) for a in args]
    proc = run(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1


def test_datasets_list_and_show_local_file(intents_csv):
    proc = run("datasets", "list")
    assert proc.returncode == 0
    for name in ("trec6", "banking77", "clinc150", "stsb", "sst5", "go_emotions"):
        assert name in proc.stdout
    proc = run("datasets", "show", intents_csv)
    assert proc.returncode == 0, proc.stderr
    assert "3 labels" in proc.stdout and "card" in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--dataset", "{csv}", "--model", "{model}", "--objective", "tripplet"], "did you mean triplet"),
        (
            ["train", "--dataset", "{csv}", "--model", "{model}", "--objective", "softmax", "--memory", "class"],
            "only applies to --objective cea",
        ),
        (["compare", "--dataset", "{csv}", "--objectives", "cea[pairz=all]"], "unknown option 'pairz'"),
        (
            ["train", "--dataset", "{csv}", "--model", "{model}", "--objective", "cea", "--memory-size", "0"],
            "--memory-size must be at least 1, got 0",
        ),
        (
            ["train", "--dataset", "{csv}", "--model", "{model}", "--memory-size", "8"],
            "--memory-size only applies to --objective cea, not softmax (softmax is the objective for intents when "
            "none is named)",
        ),
        (
            ["compare", "--dataset", "{csv}", "--objectives", "triplet[memory=bank]"],
            "--memory only applies to --objective cea",
        ),
        (
            ["train", "--dataset", "{csv}", "--model", "{model}", "--device", "gpu"],
            "unknown device 'gpu'; use auto, cpu",
        ),
        (
            ["train", "--dataset", "{csv}", "--model", "{model}", "--device", "cpu", "--precision", "fp16"],
            "precision fp16 needs a CUDA GPU",
        ),
        (
            ["train", "--dataset", "{csv}", "--model", "{model}", "--chunk-size", "-2"],
            "--chunk-size must be at least 1",
        ),
        (["probe", "--dataset", "{csv}", "--models", "{model}", "--precision", "half"], "unknown precision 'half'"),
    ],
)
def test_training_errors(args, message, intents_csv, tiny_bert_dir):
    proc = run(*[a.format(csv=intents_csv, model=tiny_bert_dir) for a in args])
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--lr", "-1"], "--lr must be positive, got -1.0"),
        (["--batch-size", "0"], "--batch-size must be positive, got 0"),
        (["--epochs", "-2"], "--epochs must be positive, got -2.0"),
        (["--shots", "0"], "--shots must be at least 1, got 0"),
        (["--limit", "0"], "--limit must be at least 1, got 0"),
        (["--max-steps", "0"], "--max-steps must be positive (or -1: run --epochs), got 0"),
        (["--output", "{file}"], "is a file; name a folder"),
        (["--label-names", "maybe"], "--label-names must be one of auto, on, off, got 'maybe'"),
        (["--frozen-layers", "-1"], "--frozen-layers must be 0 or more, auto or none, got -1"),
        (["--frozen-layers", "some"], "cannot read --frozen-layers 'some'; use auto, none or a number of blocks"),
        (["--frozen-layers", "3"], "--frozen-layers is 3 but the model has 2 blocks; choose 0..2"),
        (["--max-seq-length", "1"], "--max-seq-length must be at least 2 tokens, got 1"),
    ],
)
def test_bad_run_values_write_nothing(args, message, intents_csv, tiny_bert_dir, tmp_path):
    """New users' mistakes: one line, exit code 2, no traceback, and no run folder left behind."""
    file = tmp_path / "taken.txt"
    file.write_text("")
    proc = run(
        "train", "--dataset", intents_csv, "--model", tiny_bert_dir, *[a.format(file=file) for a in args], cwd=tmp_path
    )
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["intents.csv", "taken.txt"]  # no cea-runs/ folder


def test_fit_from_split_files_then_predict(intents, tiny_bert_dir, tmp_path):
    """`cea fit --train --dev --test -o BUNDLE`, then the bundle predicts; bad input ends in one line, nothing
    written."""
    files = {}
    for split, rows in (("train", slice(0, 12)), ("dev", slice(12, 18)), ("test", slice(18, 24))):
        files[split] = tmp_path / f"{split}.csv"
        intents.iloc[rows].to_csv(files[split], index=False)
    bundle = tmp_path / "bundle"
    args = [
        "--train",
        str(files["train"]),
        "--dev",
        str(files["dev"]),
        "--test",
        str(files["test"]),
        "--models",
        tiny_bert_dir,
        "--work",
        str(tmp_path / "work"),
    ]
    proc = run("fit", *args, "-o", str(bundle), "--budget", "5m", "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert "test figures" in proc.stdout and f"cea serve {bundle}" in proc.stdout
    # the 24 examples and the names of their three labels (card, geo, transfer)
    assert json.loads((bundle / "fit.json").read_text())["references"] == 24 + 3 and (bundle / "report.html").exists()
    queries = tmp_path / "q.txt"
    queries.write_text("my card is lost aa\n")
    proc = run("predict", str(bundle), "--input", str(queries))
    assert json.loads(proc.stdout.splitlines()[0])["label"] == "card", proc.stderr
    before = sorted(p.name for p in tmp_path.iterdir())
    for bad, message in (
        (["--budget", "soon"], "--budget must be a duration"),
        (["--budget", "0s"], "--budget must be positive"),
        (["-o", str(bundle)], "already exists; name a new folder"),
        (["--latency", "-1"], "--latency must be a positive number of milliseconds"),
    ):
        proc = run("fit", *args, *(bad if "-o" in bad else [*bad, "-o", str(tmp_path / "new")]))
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    proc = run("fit", "--dev", str(files["dev"]), "-o", str(tmp_path / "new"))
    assert proc.returncode == 2 and "--dev and --test go with --train FILE" in proc.stderr
    sets = tmp_path / "sets.csv"  # label sets ("a|b") that name one label only
    sets.write_text("text,label\n" + "my card is lost,card\nmy card is gone,card|\n" * 6)
    proc = run("fit", str(sets), "--label-separator", "|", "--models", tiny_bert_dir, "-o", str(tmp_path / "new"))
    assert proc.returncode == 2 and "fit needs texts of at least two labels" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "new").exists()


def test_entity_swap_writes_triplets_and_names_a_bad_line(tmp_path):
    good = '{"relation": "P1", "tokens": %s, "head": {"indices": [[0]]}, "tail": {"indices": [[3]]}}'
    path = tmp_path / "rel.jsonl"
    path.write_text("\n".join(good % json.dumps(t.split()) for t in ("Ada lives in Rome", "Bob works near Oslo")))
    out = tmp_path / "rows.csv"
    proc = run("data", "entity-swap", str(path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert (
        lines[0] == "anchor,positive,negative,relation"
        and lines[1] == "Ada lives in Rome,Bob lives in Oslo,Ada works near Rome,P1"
    )
    path.write_text(path.read_text() + '\n{"relation": "P1", "tokens": ["x"], "head": {"indices": [[4]]}}\n')
    proc = run("data", "entity-swap", str(path), "-o", str(tmp_path / "again.jsonl"))
    assert proc.returncode == 2 and "rel.jsonl line 3" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "again.jsonl").exists()


def test_similarity_errors(tmp_path, tiny_bert_dir):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("text1,text2,score\na b,c d,1\nb c,d e,6\n")
    proc = run("train", "--dataset", str(pairs), "--model", tiny_bert_dir, "--objective", "cosine-regression")
    assert proc.returncode == 2 and "outside the declared range 0-5 (first at row 1: 6)" in proc.stderr
    text = tmp_path / "s.txt"
    text.write_text("\n".join(f"the red dog {i}" for i in range(20)))
    proc = run(
        "train",
        "--dataset",
        str(text),
        "--model",
        tiny_bert_dir,
        "--objective",
        "micse",
        "--micse-layers",
        "2,5",
        "--output",
        str(tmp_path / "run"),
    )
    assert proc.returncode == 2 and "--micse-layers 5 lie outside the model's 2 blocks" in proc.stderr
    proc = run(
        "train", "--dataset", str(text), "--model", tiny_bert_dir, "--objective", "simcse", "--micse-lambda", "1"
    )
    assert proc.returncode == 2 and "--micse-lambda only applies to --objective micse, not simcse" in proc.stderr
    proc = run("retrieval", tiny_bert_dir, "--dataset", str(pairs), "--index", "hnsw")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_imbalance_each_makes_one_run_per_label_and_analyze_reads_it(intents_csv, tiny_bert_dir, tmp_path):
    out = tmp_path / "runs"
    proc = run(
        "train",
        "--dataset",
        intents_csv,
        "--model",
        tiny_bert_dir,
        "--objective",
        "cea",
        "--imbalance",
        "each:0.5",
        "--batch-size",
        "6",
        "--k-per-class",
        "2",
        "--max-steps",
        "2",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    folders = sorted(p.name for p in out.iterdir())
    assert folders == ["imbalance-card", "imbalance-geo", "imbalance-transfer"]
    config = json.loads((out / "imbalance-geo" / "results.json").read_text())["config"]
    assert config["imbalance"] == "geo:0.5"
    proc = run(
        "analyze",
        str(out / "imbalance-geo" / "model"),
        "--dataset",
        intents_csv,
        "--split",
        "train",
        "--imbalance",
        "geo:0.5",
        "--perplexity",
        "5",
        "--output",
        str(tmp_path / "an"),
    )
    assert proc.returncode == 0, proc.stderr
    analysis = json.loads((tmp_path / "an" / "analysis.json").read_text())
    assert analysis["imbalance"]["small_labels"] == ["geo"] and len(analysis["cohesion"]["per_label"]) == 3
    cohesion = analysis["cohesion"]
    assert cohesion["mean"] == pytest.approx(sum(cohesion["per_label"].values()) / 3)
    assert analysis["imbalance"]["small_cohesion"] == pytest.approx(cohesion["per_label"]["geo"])
    assert (tmp_path / "an" / "map-tsne.png").exists() and (tmp_path / "an" / "confusions.png").exists()
    proc = run("analyze", tiny_bert_dir, "--dataset", intents_csv, "--output", str(tmp_path / "few"))
    assert proc.returncode == 2 and "pass --perplexity" in proc.stderr
    proc = run("train", "--dataset", intents_csv, "--model", tiny_bert_dir, "--imbalance", "gep:0.5")
    assert proc.returncode == 2 and "did you mean geo" in proc.stderr


def test_bundle_and_predict_from_the_command_line(intents_csv, tiny_bert_dir, tmp_path):
    bundle = tmp_path / "bundle"
    proc = run("bundle", tiny_bert_dir, "--dataset", intents_csv, "-o", str(bundle), "--k", "1", "--classifier", "knn")
    assert proc.returncode == 0, proc.stderr
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"text": "my card is lost a"}\ntransfer money to my account b\n\n')
    proc = run("predict", str(bundle), "--input", str(queries))
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [x["label"] for x in lines] == ["card", "transfer"] and len(lines[0]["neighbours"]) == 1
    proc = run("predict", str(bundle), "--input", str(queries), "--device", "cpu", "--precision", "bf16")
    assert [json.loads(line)["label"] for line in proc.stdout.splitlines()] == ["card", "transfer"], proc.stderr
    proc = run("serve", str(bundle), "--host", "0.0.0.0")
    assert proc.returncode == 2 and "set --token" in proc.stderr
    proc = run("serve", str(bundle), "--train-budget", "soon")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: --train-budget must be a duration such as 15m, 90s or 1h; got 'soon'"
    )
    proc = run("serve", str(bundle), "--train-from", "-1")
    assert proc.returncode == 2 and "--train-from must be at least 0" in proc.stderr
    proc = run("predict", str(bundle), "--input", str(queries), "--threshold", "1.5")  # evidence is at most 1
    assert [(x["label"], x["closest"]) for x in map(json.loads, proc.stdout.splitlines())] == [
        ("unknown", "card"),
        ("unknown", "transfer"),
    ], proc.stderr
    proc = run("bundle", tiny_bert_dir, "--dataset", intents_csv, "-o", str(tmp_path / "open"), "--unknown-rate", "2")
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --unknown-rate must lie between 0 and 1, got 2.0"
    assert not (tmp_path / "open").exists()
    proc = run("bundle", tiny_bert_dir, "--dataset", intents_csv, "-o", str(tmp_path / "w"), "--class-weight", "even")
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --class-weight must be median or none, got 'even'"
    assert not (tmp_path / "w").exists()
    proc = run("bundle", tiny_bert_dir, "--dataset", intents_csv, "-o", str(tmp_path / "w"), "--class-weight", "none")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "w" / "manifest.json").read_text())["classifier"]["class_weight"] is None
    proc = run("bundle", tiny_bert_dir, "-o", str(tmp_path / "empty"))  # no data set: a project's start
    assert proc.returncode == 0 and "empty: 0 examples, 0 labels, 32 dims" in proc.stderr, proc.stderr  # one line
    proc = run("predict", str(tmp_path / "empty"), "--input", str(queries))
    assert proc.returncode == 2 and proc.stderr.strip() == "error: the bundle holds no examples; add some first"
    proc = run("bundle", tiny_bert_dir, "-o", str(tmp_path / "e2"), "--unknown-rate", "0.1")
    assert proc.returncode == 2 and "--unknown-rate needs examples to calibrate on" in proc.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("store", ["folder", "postgresql"])
def test_workers_behind_one_address_predict_what_any_of_them_was_given(
    store, intents_csv, tiny_bert_dir, tmp_path, request
):
    import time

    import httpx

    bundle = tmp_path / f"served-{store}"
    extra = ["--store", request.getfixturevalue("postgres_url")] if store == "postgresql" else []
    proc = run("bundle", tiny_bert_dir, "--dataset", intents_csv, "-o", str(bundle), "--k", "1", *extra)
    assert proc.returncode == 0, proc.stderr
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "cea", "serve", str(bundle), "--port", str(port), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    try:
        pids, deadline = set(), time.time() + 120
        while len(pids) < 2 and time.time() < deadline:  # fresh connections reach both workers in turn
            try:
                pids.add(httpx.get(f"{url}/health", timeout=5).json()["pid"])
            except httpx.TransportError:
                time.sleep(0.5)
        assert len(pids) == 2, "both workers answered /health"
        taken = run("serve", str(bundle), "--port", str(port), "--workers", "2")  # a socket each, but not shared
        assert taken.returncode == 2 and taken.stderr.strip().splitlines() == [
            f"error: cannot listen on 127.0.0.1:{port} (Address already in use); stop what serves there or pass --port"
        ]
        added = httpx.post(f"{url}/examples", json={"texts": ["red dog and blue cat"], "labels": ["animals"]}).json()
        assert added == {"ids": [27]}  # after the 24 examples and the names of their three labels (card, geo, transfer)
        answers = [
            httpx.post(f"{url}/predict", json={"texts": ["red dog and blue cat"]}).json()["predictions"][0]
            for _ in range(16)
        ]
        assert {a["neighbours"][0]["label"] for a in answers} == {"animals"}  # every worker has it
        seen = {httpx.get(f"{url}/health").json()["pid"]: httpx.get(f"{url}/labels").json() for _ in range(16)}
        # the text and, as the bundle was built with label names, the new label's name (id 28)
        assert len(seen) == 2 and all(labels["labels"]["animals"] == 2 for labels in seen.values())
    finally:
        server.terminate()
        server.wait(timeout=30)
    with socket.socket() as sock:  # every worker stopped with the service: nothing listens there
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past closed connections' TIME_WAIT
        sock.bind(("127.0.0.1", port))
    if store == "folder":
        assert run("bundle", "compact", str(bundle)).returncode == 0
        assert json.loads((bundle / "manifest.json").read_text())["generation"] == 1
    else:
        proc = run("bundle", "compact", str(bundle))
        assert proc.returncode == 2 and "no log to fold" in proc.stderr


def test_a_store_that_cannot_be_reached_is_one_line(intents_csv, tiny_bert_dir, tmp_path):
    proc = run(
        "bundle",
        tiny_bert_dir,
        "--dataset",
        intents_csv,
        "-o",
        str(tmp_path / "b"),
        "--store",
        "postgresql://127.0.0.1:1/cea",
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: cannot connect to the PostgreSQL store postgresql://127.0.0.1:1/cea")
    assert not (tmp_path / "b").exists()


def test_a_command_imports_only_its_own_module():
    """`cea models list` does not pay for train's flags (the objectives' catalog)."""
    code = (
        "import sys; from cea.cli import _register, app; _register('models'); "
        "print(sorted(m for m in sys.modules if m.startswith(('cea.cli.', 'cea.objectives'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "['cea.cli.catalog']", proc.stderr
    listed = run("--help").stdout  # no command named: every command registers for the help
    assert all(name in listed for name in ("train", "sweep-layers", "bundle", "embed", "retrieval", "datasets"))


def test_a_table_in_a_log_keeps_every_row_on_one_line_at_full_width():
    """Piped (a log, CI, nohup, a notebook's captured cell), a table is Markdown: its title, a header, a row a line,
    no cell cut or wrapped (rich fits a table to 80 columns there)."""
    from cea.data import list_datasets

    lines = run("datasets", "list").stdout.splitlines()
    assert lines[:4] == ["cea data sets", "", "| name | task | description | source |", "|---|---|---|---|"]
    rows = {line.split(" | ")[0][2:]: line for line in lines[4:] if line.startswith("| ")}
    assert set(rows) == {d.name for d in list_datasets()}
    assert all(f"| {d.name} | {d.task} | {d.description} |" in rows[d.name] for d in list_datasets())


def test_verbose_shows_what_the_libraries_print(intents_csv, tiny_bert_dir, tmp_path):
    """Piped, a run says only cea's lines; `cea --verbose` lets the libraries print theirs (the trainer's records)."""
    args = ("train", "--dataset", intents_csv, "--model", tiny_bert_dir, "--epochs", "1", "--batch-size", "8")
    quiet = run(*args, "--output", str(tmp_path / "quiet"))
    loud = run("--verbose", *args, "--output", str(tmp_path / "loud"))
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert "{'loss'" not in quiet.stdout + quiet.stderr and "{'loss'" in loud.stdout + loud.stderr
    assert "\r" not in quiet.stdout + quiet.stderr and max(map(len, (quiet.stdout + quiet.stderr).splitlines())) <= 200


@pytest.mark.parametrize("width, drawn", [(200, True), (60, False)])
def test_a_terminal_too_narrow_for_a_table_gets_it_whole_as_markdown(width, drawn):
    """fit's candidates on a narrow terminal: rich would cut their names ("stati…"); Markdown keeps each row whole."""
    import io

    from rich.console import Console

    from cea.cli import print_table

    buf = io.StringIO()
    row = ["static-of-trained-int8", "linear head, C=10", "90.12", "91.50", "92.33", "91.00", "1.2", "3.4", "5.6"]
    print_table(
        "candidates",
        ["encoder", "classifier", "dev kNN", "dev head", "test", "F1", "p50", "p99", "MB"],
        [row],
        left=2,
        console=Console(file=buf, width=width, force_terminal=True, color_system=None),
    )
    lines = buf.getvalue().splitlines()
    assert ("| " + " | ".join(row) + " |" in lines) != drawn
    assert any("static-of-trained-int8" in line and "5.6" in line for line in lines)  # a row on one line, whole


def test_help_imports_no_torch_and_train_shows_the_objectives_flags():
    """`cea --help` and every command's help start without torch and say what a command does without naming cea's
    modules; train's shows every objective's options (from the torch-free catalog, cea.objectives.catalog)."""
    from cea.cli import MODULES

    code = (
        "import sys; from cea.cli import main\nsys.argv = ['cea', *sys.argv[1:], '--help']\ntry:\n    main()\n"
        "except SystemExit:\n    pass\nprint('torch' in sys.modules, file=sys.stderr)"
    )
    for command in [None, *(c for c in MODULES if c != "bundle-compact")]:
        proc = subprocess.run(
            [sys.executable, "-c", code, *([command] if command else [])], capture_output=True, text=True, timeout=120
        )
        assert proc.stderr.strip().splitlines()[-1] == "False", (command, proc.stderr[-2000:])
        assert "Usage" in proc.stdout, command
        assert not re.search(r"\bcea\.[a-z_]+\.", proc.stdout), (command, "a module path where users read help")
    proc = subprocess.run([sys.executable, "-c", code, "train"], capture_output=True, text=True, timeout=120)
    assert all(f in proc.stdout for f in ("--memory-size", "--micse-layers", "--mlm-probability", "--head-init"))


def test_a_few_shot_run_and_its_bundle_classify_test_alike(intents_csv, tiny_bert_dir, tmp_path):
    """`cea train --shots N --shots-seed S`, then `cea bundle RUN/model --splits train --shots N --shots-seed S`:
    the bundle holds the run's sample and its linear head scores the run's linear-head test accuracy; with
    `--head trained` the run's own head answers, scoring the run's head accuracy."""
    import numpy as np

    from cea.bundle import Bundle
    from cea.data import load_dataset
    from cea.data.dataset import few_shot

    run_dir, bundle = tmp_path / "run", tmp_path / "bundle"
    proc = run(
        "train",
        "--dataset",
        intents_csv,
        "--model",
        tiny_bert_dir,
        "--shots",
        "3",
        "--shots-seed",
        "1",
        "--k-per-class",
        "2",
        "--max-steps",
        "2",
        "--output",
        str(run_dir),
        "--device",
        "cpu",
    )
    assert proc.returncode == 0, proc.stderr
    test = json.loads((run_dir / "results.json").read_text())["metrics"]["test"]
    proc = run(
        "bundle",
        str(run_dir / "model"),
        "--dataset",
        intents_csv,
        "--splits",
        "train",
        "--shots",
        "3",
        "--shots-seed",
        "1",
        "-o",
        str(bundle),
        "--device",
        "cpu",
    )
    assert proc.returncode == 0, proc.stderr
    ds = load_dataset(intents_csv)
    loaded = Bundle.load(bundle)
    # the sample and, as cea train adds them (--label-names auto), the names of its labels
    assert sorted(loaded.texts) == sorted([*few_shot(ds["train"], 3, 1)["text"], "card", "geo", "transfer"])
    predicted = [p.label for p in loaded.predict(list(ds["test"]["text"]))]
    assert (
        round(100 * float(np.mean(np.array(predicted) == ds["test"]["label"].to_numpy())), 2) == test["linear_accuracy"]
    )
    # --head trained: the run's own head (model/head.npz) answers, as the run's head_accuracy says
    proc = run(
        "bundle",
        str(run_dir / "model"),
        "--dataset",
        intents_csv,
        "--splits",
        "train",
        "--shots",
        "3",
        "--shots-seed",
        "1",
        "--head",
        "trained",
        "-o",
        str(tmp_path / "own"),
        "--device",
        "cpu",
    )
    assert proc.returncode == 0, proc.stderr
    predicted = np.array([p.label for p in Bundle.load(tmp_path / "own").predict(list(ds["test"]["text"]))])
    assert round(100 * float(np.mean(predicted == ds["test"]["label"].to_numpy())), 2) == test["head_accuracy"]
    proc = run("bundle", tiny_bert_dir, "--dataset", intents_csv, "--head", "trained", "-o", str(tmp_path / "no"))
    assert proc.returncode == 2 and proc.stderr.startswith("error: --head trained needs one label per text and")
    assert not (tmp_path / "no").exists()


def test_compare_runs_each_objective_at_its_own_lr_unless_told(intents_csv, tiny_bert_dir, tmp_path):
    out = tmp_path / "grid"
    proc = run(
        "compare",
        "--dataset",
        intents_csv,
        "--model",
        tiny_bert_dir,
        "--objectives",
        "softmax,cea",
        "--seeds",
        "0",
        "--epochs",
        "1",
        "--batch-size",
        "6",
        "--k-per-class",
        "2",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["setting"]: r for r in json.loads((out / "compare.json").read_text())["rows"]}
    assert (rows["softmax"]["lr"], rows["cea"]["lr"]) == (5e-5, 2e-5)  # no --lr: the registry's per objective
    assert rows["softmax"]["epochs"] == rows["cea"]["epochs"] == 1  # --epochs given: every setting's
    assert "epochs 1, seeds 0" in " ".join(proc.stdout.split())  # the table's title, wrapped by rich


@pytest.mark.parametrize(
    "args, message",
    [
        (["discover"], "give a file of TEXTS to group, or --dataset NAME --known-classes SHARE"),
        (["discover", "--dataset", "{csv}"], "--dataset runs the benchmark protocol and needs --known-classes SHARE"),
        (["discover", "{csv}", "--known-classes", "0.5"], "--known-classes goes with --dataset"),
        (
            ["discover", "--dataset", "{csv}", "--known-classes", "1.5", "--model", "{model}"],
            "--known-classes must keep at least one of the 3 classes known and one new",
        ),
        (
            ["discover", "--dataset", "{csv}", "--known-classes", "0.5", "--clusters", "1", "--model", "{model}"],
            "--clusters must be auto or a whole number of at least 2",
        ),
        (
            ["discover", "--dataset", "{csv}", "--known-classes", "0.5", "--clusters", "many"],
            "--clusters must be auto, given or a whole number; got 'many'",
        ),
        (["discover", "{csv}", "--clusters", "many"], "--clusters must be auto or a whole number"),
        (["discover", "{csv}", "--estimate", "elbow"], "--estimate must be one of labelled, sizes, silhouette"),
        (["discover", "{csv}", "--over", "0.9"], "--over must be at least 1"),
        (["discover", "{csv}", "--text-column", "utterance"], "has no column 'utterance'; pass --text-column"),
        (["discover", "{csv}", "--model", "{model}"], "nothing to discover: every text is labelled"),
        (["discover", "missing.csv"], "file not found: missing.csv"),
    ],
)
def test_discover_errors_are_one_line_with_exit_code_2_and_write_nothing(
    args, message, intents_csv, tiny_bert_dir, tmp_path
):
    out = tmp_path / "found"
    proc = run(*[a.format(csv=intents_csv, model=tiny_bert_dir) for a in args], "--output", str(out))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1
    assert not out.exists()


def test_discover_groups_a_file_and_refuses_to_overwrite(intents, tiny_bert_dir, tmp_path):
    path = tmp_path / "texts.csv"
    intents.assign(label=[lab if i % 4 == 0 and lab != "geo" else "" for i, lab in enumerate(intents["label"])]).to_csv(
        path, index=False
    )
    out = tmp_path / "found"
    proc = run("discover", str(path), "--model", tiny_bert_dir, "--clusters", "3", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    groups = json.loads((out / "groups.json").read_text())
    assert len(groups["groups"]) == 3 and groups["known"] == ["card", "transfer"]
    results = json.loads((out / "results.json").read_text())
    assert results["format"] == "cea.discover/1" and results["n_labelled"] == 4
    assert not results["config"]["fine_tune"] and not results["config"]["keep_frozen"]  # 4 labelled: auto is off
    assert results["config"]["over"] == OVER
    proc = run("discover", str(path), "--model", tiny_bert_dir, "--output", str(out))
    assert proc.returncode == 2 and "already holds a discovery" in proc.stderr
    proc = run(
        "discover",
        str(path),
        "--model",
        tiny_bert_dir,
        "--clusters",
        "3",
        "--fine-tune",
        "--tuned-only",
        "--over",
        "1",
        "--output",
        str(tmp_path / "tuned"),
    )
    assert proc.returncode == 0, proc.stderr
    config = json.loads((tmp_path / "tuned" / "results.json").read_text())["config"]
    assert config["fine_tune"] and not config["keep_frozen"] and config["over"] == 1


def test_discover_groups_a_bundles_unknowns_and_accepts_a_group(intents, tiny_st_dir, tmp_path):
    from cea.bundle import Bundle
    from cea.bundle.references import FolderStore

    Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False).close()
    proc = run("discover", str(tmp_path / "b"), "--accept", "0")
    assert proc.returncode == 2 and "--accept GROUP and --label NAME go together" in proc.stderr
    hidden = [f"buy bitcoin with my crypto wallet {'z' * (i + 1)}" for i in range(6)]
    FolderStore(tmp_path / "b").keep([{"text": t, "closest": "card", "evidence": 0.1} for t in hidden], 100)
    proc = run("discover", str(tmp_path / "b"), "--clusters", "4")
    assert proc.returncode == 0, proc.stderr
    assert "6 texts answered unknown" in proc.stdout and "--accept GROUP --label NAME" in " ".join(proc.stdout.split())
    group = next(
        g for g in json.loads((tmp_path / "b" / "unknown-groups.json").read_text())["groups"] if g["kind"] == "new"
    )
    others = [
        g for g in json.loads((tmp_path / "b" / "unknown-groups.json").read_text())["groups"] if g["id"] != group["id"]
    ]
    proc = run("discover", str(tmp_path / "b"), "--accept", str(group["id"]), "--label", "crypto")
    assert proc.returncode == 0, proc.stderr
    assert f"added {group['size']} examples of 'crypto'" in proc.stdout
    assert Bundle.load(tmp_path / "b").label_counts["crypto"] == group["size"]
    rest = others[:2]  # a class split in two groups: both at once
    proc = run(
        "discover",
        str(tmp_path / "b"),
        "--accept",
        str(rest[0]["id"]),
        "--accept",
        str(rest[1]["id"]),
        "--label",
        "crypto",
    )
    assert proc.returncode == 0, proc.stderr
    assert Bundle.load(tmp_path / "b").label_counts["crypto"] == group["size"] + rest[0]["size"] + rest[1]["size"]


def test_check_writes_the_flagged_rows_and_a_cleaned_copy_never_the_input(intents, tiny_st_dir, tmp_path):
    noisy = intents.copy()
    noisy.loc[[0, 4], "label"] = ["geo", "card"]  # two flipped labels
    data = tmp_path / "noisy.csv"
    noisy.to_csv(data, index=False)
    before = data.read_bytes()
    from cea.bundle import Bundle

    Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False).close()
    proc = run(
        "check",
        str(data),
        "--model",
        str(tmp_path / "b"),
        "--folds",
        "3",
        "--fix",
        "relabel",
        "-o",
        str(tmp_path / "issues.csv"),
    )  # a bundle: its encoder
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    issues = pd.read_csv(tmp_path / "issues.csv")
    assert list(issues.columns) == ["row", "text", "label", "suggested", "score", "neighbours", "reason"]
    assert set(issues["label"]) <= {"card", "transfer", "geo"} and "probably wrong" in proc.stdout
    assert "--model BUNDLE" not in proc.stdout  # checked on the bundle's encoder: no pointer to one
    copy = pd.read_csv(tmp_path / "issues.fixed.csv")  # every split, in a column cea reads back
    assert len(copy) == len(noisy) and set(copy["split"]) == {"train", "dev", "test"} and data.read_bytes() == before
    changed = {text for text, label in zip(copy["text"], copy["label"]) if label != dict(noisy.values)[text]}
    flagged = issues[issues["reason"].str.startswith("the classifier")]  # the others: duplicates, listed only
    assert changed == set(flagged["text"])  # the flagged rows relabelled, and only they


def test_check_on_an_encoder_that_has_not_seen_the_labels_points_to_the_fit_bundle(intents, tiny_st_dir, tmp_path):
    data = tmp_path / "data.csv"
    intents.to_csv(data, index=False)
    proc = run("check", str(data), "--model", tiny_st_dir, "--folds", "3", "-o", str(tmp_path / "issues.csv"))
    assert proc.returncode == 0 and "(--model BUNDLE) finds wrong labels more precisely" in proc.stdout, proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--fix", "maybe"], "--fix must be drop or relabel"),
        (["-o", "{data}"], "is the input"),
        (["--split", "validation"], "has no 'validation' split"),
    ],
)
def test_check_errors_are_one_line_with_exit_code_2_and_write_nothing(args, message, intents, tiny_st_dir, tmp_path):
    data = tmp_path / "data.csv"
    intents.to_csv(data, index=False)
    before = data.read_bytes()
    proc = run("check", str(data), "--model", tiny_st_dir, *[a.format(data=data) for a in args], cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv"] and data.read_bytes() == before
    one = tmp_path / "one.csv"
    intents.assign(label="card").to_csv(one, index=False)
    proc = run("check", str(one), "--model", tiny_st_dir, cwd=tmp_path)
    assert proc.returncode == 2 and "single label" in proc.stderr


def test_suggest_ranks_a_file_of_texts_and_refuses_bad_input(intents, tiny_st_dir, tmp_path):
    from cea.bundle import Bundle

    Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False).close()
    pool = tmp_path / "pool.txt"
    pool.write_text("my card is lost again\nsend money to my account\nthe capital of the country\nmy card money\n")
    proc = run("suggest", str(tmp_path / "b"), "--texts", str(pool), "--n", "2", "-o", str(tmp_path / "next.csv"))
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    got = pd.read_csv(tmp_path / "next.csv")
    assert list(got.columns) == ["row", "text", "prediction", "runner_up", "score", "reason", "group"] and len(got) == 2
    assert got["score"].is_monotonic_decreasing and set(got["text"]) <= set(pool.read_text().splitlines())
    (tmp_path / "empty.txt").write_text("\n\n")
    for args, message in (
        (["--texts", str(pool), "--n", "0"], "--n must be at least 1"),
        (["--texts", str(tmp_path / "empty.txt")], "holds no texts"),
        (["--texts", str(tmp_path / "none.txt")], "file not found"),
    ):
        proc = run("suggest", str(tmp_path / "b"), *args, cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert not list(tmp_path.glob("suggest-*"))  # nothing written
    proc = run("suggest", str(tmp_path / "b"), cwd=tmp_path)  # no --texts: the kept traffic, and there is none
    assert proc.returncode == 2 and "keeps no traffic" in proc.stderr and "--keep-traffic" in proc.stderr
    assert not list(tmp_path.glob("suggest-*"))


def test_suggest_without_texts_ranks_the_traffic_the_service_kept(intents, tiny_st_dir, tmp_path):
    from cea.bundle import Bundle

    made = Bundle.create(tmp_path / "b", tiny_st_dir, list(intents["text"]), list(intents["label"]), progress=False)
    texts = ["my card is lost again", "send money to my account", "the capital of the country", "my card money"]
    made.store.keep(
        [{"text": t, "prediction": "card", "embedding": v} for t, v in zip(texts, made.embed(texts))], 100, "traffic"
    )
    made.close()
    proc = run("suggest", str(tmp_path / "b"), "--n", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import pandas as pd

    got = pd.read_csv(tmp_path / "suggest-traffic.csv")
    assert list(got.columns) == ["id", "text", "prediction", "runner_up", "score", "reason", "group"] and len(got) == 3
    assert set(got["text"]) <= set(texts) and got["id"].astype(str).str.len().eq(16).all()


def test_distill_writes_a_static_encoder_and_refuses_bad_input(tiny_st_dir, tmp_path):
    proc = run("distill", tiny_st_dir, "-o", str(tmp_path / "static"), "--dims", "8")
    assert proc.returncode == 0 and "--model" in proc.stdout, proc.stderr
    assert proc.stderr == ""  # piped: no model2vec bar ("Encoding tokens", carriage returns), no skeletoken note
    assert "StaticEmbedding" in (tmp_path / "static" / "modules.json").read_text()
    for args, message in (
        ([str(tmp_path / "static"), "-o", str(tmp_path / "x")], "static encoder already"),
        ([str(tmp_path), "-o", str(tmp_path / "x")], "not a sentence-transformers"),
        ([tiny_st_dir, "-o", str(tmp_path / "x"), "--dims", "1"], "--dims must be at least 2"),
    ):
        proc = run("distill", *args)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert not (tmp_path / "x").exists()


def test_train_refuses_an_unknown_tracker_before_anything_runs(intents_csv, tiny_st_dir, tmp_path):
    proc = run(
        "train",
        "--dataset",
        intents_csv,
        "--model",
        tiny_st_dir,
        "--report-to",
        "comet",
        "--output",
        str(tmp_path / "run"),
    )
    assert proc.returncode == 2 and "--report-to must be none, tensorboard, mlflow, wandb or all" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_push_and_pull_refuse_a_repo_id_that_is_not_org_slash_name(tmp_path):
    for args in (["push", str(tmp_path), "just-a-name"], ["pull", "a/b/c", str(tmp_path / "x")]):
        proc = run(*args)
        assert proc.returncode == 2 and "not a hub repo id; write ORG/NAME" in proc.stderr, proc.stderr
    assert not (tmp_path / "x").exists()


def test_help_names_the_extras_to_install():
    env = {**os.environ, "COLUMNS": "400"}  # each option's help on one line
    shown = "".join(
        subprocess.run(
            [sys.executable, "-m", "cea", command, "--help"], capture_output=True, text=True, env=env, timeout=300
        ).stdout
        for command in ("predict", "train")
    )
    assert "pip install 'cea[ray]'" in shown and "pip install 'cea[track]'" in shown  # rich reads [ray] as markup
