"""studies/: every study's script runs end to end (``--quick``: a tiny random BERT, made-up data, a few steps), writes
records that name their study, table, row and column, and prints the study's own numbers beside cea's; the study's
numbers (``studies/published.jsonl``) are well formed; the page draws them side by side."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "studies").glob("s[0-9][0-9][0-9]_*.py"))
PUBLISHED = [json.loads(line) for line in (ROOT / "studies" / "published.jsonl").read_text().splitlines() if line]


def _hook():
    spec = importlib.util.spec_from_file_location("records_hook", ROOT / "docs" / "hooks" / "records.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_is_a_script_for_each_of_the_five_studies():
    assert [p.name[:4] for p in SCRIPTS] == ["s000", "s001", "s002", "s003", "s004"]


def test_the_studies_numbers_are_data():
    keys = {"study", "table", "row", "column", "value", "where"}
    assert all(keys <= set(row) and isinstance(row["value"], (int, float)) for row in PUBLISHED)
    assert {row["study"] for row in PUBLISHED} == {"000", "002", "003", "004"}  # 001 publishes figures only
    cells = [(r["study"], r["table"], r["row"], r["column"], r.get("model")) for r in PUBLISHED]
    assert len(cells) == len(set(cells))
    results = {(r["row"], r["column"], r["model"]): r["value"] for r in PUBLISHED if r["table"] == "results"}
    assert results["CEA + datapoint memory", "trec50", "bert-base"] == 92.4


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_a_study_runs_quick_and_writes_its_records(script, tmp_path):
    study = script.name[1:4]
    env = {**os.environ, "CEA_RECORDS": str(tmp_path / "records"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(script), "--quick", "--output", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "records" / f"study{study}.jsonl").read_text().splitlines()]
    figures = [r for r in records if "table" in r]
    assert figures and all(r["figure"].startswith(f"study {study}: ") and r["study"] == study for r in records)
    assert all(isinstance(r["value"], (int, float)) and {"row", "column", "model"} <= set(r) for r in figures)
    claims = [r for r in records if "claim" in r]  # one seed: never enough for a verdict
    assert claims and {r["value"] for r in claims} == {"cannot tell"} and {r["seeds"] for r in claims} == {1}
    assert all(len(r["difference"]) == len(r["interval"]) >= 1 for r in claims)
    assert any(r["figure"] == f"study {study}: wall time" and r["value"] > 0 for r in records)
    for row in PUBLISHED:  # the study's own numbers printed beside cea's
        if row["study"] == study and row["table"] in {r["table"] for r in figures}:
            assert f"{row['value']}" in done.stdout, (row, done.stdout[-2000:])


def test_study_000_runs_the_rows_asked_of_each_table(tmp_path):
    env = {**os.environ, "CEA_RECORDS": str(tmp_path / "records"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(SCRIPTS[0]), "--quick", "--output", str(tmp_path / "out"), "--tables", "negatives"]
    done = subprocess.run(
        command + ["--rows", "batch-all,mixed,batch"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "records" / "study000.jsonl").read_text().splitlines()]
    figures = {r["row"]: r["value"] for r in records if "table" in r}
    assert [(r["table"], r["row"]) for r in records if "table" in r] == [
        ("all negatives", "CEA (batch-level) + all negatives"),
        ("all negatives", "CEA (batch-level)"),
    ]
    claims = [r for r in records if "claim" in r]  # the follow-up's, from the one pair of rows that ran
    assert [r["claim"] for r in claims] == ["all negatives ahead of one sampled pair (trec50, tiny-bert)"]
    gap = figures["CEA (batch-level) + all negatives"] - figures["CEA (batch-level)"]
    assert claims[0]["value"] == "cannot tell" and claims[0]["seeds"] == 1  # one seed, whatever the gap
    assert abs(claims[0]["difference"][0] - gap) < 0.01 and claims[0]["interval"] == [[None, None]]
    finished = sorted((tmp_path / "out").rglob("results.json"))
    for path in finished:  # each run as if it had taken 5000 s: the rerun reuses both and counts their times
        path.write_text(json.dumps({**json.loads(path.read_text()), "total_seconds": 5000.0}))
    again = subprocess.run(
        command + ["--rows", "batch-all,batch"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr[-3000:]
    timed = [
        json.loads(line)
        for line in (tmp_path / "records" / "study000.jsonl").read_text().splitlines()
        if json.loads(line)["figure"] == "study 000: wall time"
    ]
    assert len(finished) == 2 and timed[-1]["value"] >= 10_000 and "2 runs reused" in timed[-1]["note"]
    wrong = subprocess.run(
        command + ["--rows", "batch,al"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert wrong.returncode == 2 and wrong.stderr.strip().splitlines() == [
        "--rows: no row 'al'; the rows are fine-tuning, batch, memory, mixed, batch-shuffle, datapoint, batch-all, "
        "memory-all, datapoint-all"
    ]


def test_study_000_runs_mixed_memory_beside_batch_level_in_shuffled_batches(tmp_path):
    env = {**os.environ, "CEA_RECORDS": str(tmp_path / "records"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(SCRIPTS[0]), "--quick", "--output", str(tmp_path / "out"), "--tables", "results"]
    command += ["--datasets", "trec6", "--rows", "batch,mixed,batch-shuffle"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    samplers = {
        path.parent.name.split("-e10-")[0]: json.loads(path.read_text())["config"]["sampler"]
        for path in (tmp_path / "out").rglob("results.json")
    }
    assert samplers == {
        "trec6-cea-sampled": "pk",
        "trec6-cea-sampled-mixed-shuffle": "shuffle",
        "trec6-cea-sampled-shuffle": "shuffle",
    }
    records = [json.loads(line) for line in (tmp_path / "records" / "study000.jsonl").read_text().splitlines()]
    claims = {r["claim"]: r for r in records if "claim" in r}
    # no fine-tuning or datapoint row ran: the one claim is mixed memory's, beside batch-level in the same batches
    assert set(claims) == {"mixed memory ahead of batch-level, shuffled batches (trec6, tiny-bert)"}
    figures = {r["row"]: r["value"] for r in records if r.get("table") == "results"}
    mixed = claims["mixed memory ahead of batch-level, shuffled batches (trec6, tiny-bert)"]
    gap = figures["CEA + mixed memory, shuffled batches"] - figures["CEA (batch-level), shuffled batches"]
    assert abs(mixed["difference"][0] - gap) < 0.01 and mixed["value"] == "cannot tell"  # one seed


def test_a_study_run_in_parts_joins_its_seeds_under_join(tmp_path):
    env = {**os.environ, "CEA_RECORDS": str(tmp_path / "records"), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(SCRIPTS[2]), "--quick", "--output", str(tmp_path / "out")]
    for seeds in (["--seeds", "0"], ["--seeds", "1", "--join"]):
        done = subprocess.run(command + seeds, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "records" / "study002.jsonl").read_text().splitlines()]
    first, joined = [[r for r in records if r.get("column") == "micse"][i] for i in (0, 1)]
    assert list(first["runs"]) == ["0"] and list(joined["runs"]) == ["0", "1"]
    assert joined["runs"]["0"] == first["runs"]["0"]
    values = [run["value"] for run in joined["runs"].values()]
    assert joined["value"] == round(sum(values) / 2, 2) and joined["unit"].endswith("mean of 2 seeds")
    assert joined["note"].startswith("seeds 0,1: " + " / ".join(f"{v:.2f}" for v in values))
    assert "(--join)" in [r for r in records if r["figure"] == "study 002: wall time"][-1]["note"]


def test_the_page_sets_the_studys_number_beside_ceas():
    hook = _hook()
    published = [
        {
            "study": "000",
            "table": "results",
            "row": "fine-tuning",
            "column": "trec6",
            "value": 96.2,
            "model": "electra-small",
            "unit": "% test accuracy",
            "where": "Results",
        }
    ]
    record = {
        "figure": "study 000: results, fine-tuning, trec6, m",
        "value": 95.87,
        "unit": "% test accuracy",
        "study": "000",
        "table": "results",
        "row": "fine-tuning",
        "column": "trec6",
        "model": "m",
        "section": "study-000",
        "date": "2026-12-01",
    }
    newer = {**record, "value": 96.01, "date": "2026-12-02"}
    page = hook.replace("<!-- records: study 000 -->", [record, newer], published)
    lines = [line for line in page.splitlines() if line.startswith("| fine-tuning")]
    assert lines == [
        "| fine-tuning | the study, electra-small | 96.20 | % test accuracy |",
        "| fine-tuning | cea, m | 96.01 | % test accuracy |",
    ]
    assert hook.replace("<!-- records: study 001 -->", [record], published) == "*No records yet.*"


def test_the_studies_page_draws_every_study():
    hook = _hook()
    page = (ROOT / "docs" / "studies.md").read_text()
    for study in ("000", "001", "002", "003", "004"):
        assert f"<!-- records: study {study} -->" in page and f"<!-- records: current study-{study}-claims -->" in page
    drawn = hook.replace(
        page, hook.load(ROOT / "docs" / "records"), hook.load_published(ROOT / "studies" / "published.jsonl")
    )
    assert "<!-- records:" not in drawn and "| CEA + datapoint memory | the study, bert-base |" in drawn


def _shared():
    sys.path.insert(0, str(ROOT / "studies"))
    import shared

    return shared


def test_a_claim_inside_the_noise_cannot_tell_and_one_outside_it_holds():
    shared = _shared()
    # made-up figures of three seeds: a ahead by 0.34 on average, the seeds' gaps spanning -0.8 to +1.6
    noisy = shared.difference({0: 92.4, 1: 91.0, 2: 92.6}, {0: 91.8, 1: 91.8, 2: 91.0})
    assert noisy.seeds == 3 and noisy.low < 0 < noisy.mean < noisy.high
    assert shared.verdict([noisy]) == "cannot tell"
    clear = shared.difference({0: 93.1, 1: 93.0, 2: 93.3}, {0: 91.0, 1: 91.2, 2: 91.1})
    assert clear.low > 0 and shared.verdict([clear]) == "holds"
    behind = shared.difference({0: 91.0, 1: 91.2, 2: 91.1}, {0: 93.1, 1: 93.0, 2: 93.3})
    assert shared.verdict([behind]) == "does not hold"
    assert shared.verdict([clear, noisy]) == "cannot tell" and shared.verdict([clear, behind]) == "does not hold"
    # the interval is Student's t over the paired differences: 3 seeds, t(0.975, 2) = 4.303
    diffs = [0.6, -0.8, 1.6]
    sd = (sum((d - sum(diffs) / 3) ** 2 for d in diffs) / 2) ** 0.5
    assert abs((noisy.high - noisy.low) / 2 - 4.3027 * sd / 3**0.5) < 1e-3
    # two seeds, however far apart the means: cannot tell
    assert shared.verdict([shared.difference({0: 99.0, 1: 99.0}, {0: 1.0, 1: 2.0})]) == "cannot tell"


def test_level_is_two_sided():
    shared = _shared()
    level = shared.difference({0: 91.9, 1: 92.0, 2: 92.1}, {0: 92.0, 1: 92.0, 2: 92.0})
    ahead = shared.difference({0: 93.4, 1: 93.5, 2: 93.6}, {0: 92.0, 1: 92.0, 2: 92.0})  # 1.5 ahead: not level
    behind = shared.difference({0: 90.4, 1: 90.5, 2: 90.6}, 92.0)  # a fixed reference (a frozen model) as b
    assert shared.verdict([level], shared.LEVEL, margin=1.0) == "holds"
    assert shared.verdict([ahead], shared.LEVEL, margin=1.0) == "does not hold"
    assert shared.verdict([behind], shared.LEVEL, margin=1.0) == "does not hold"
    straddles = shared.difference({0: 92.0, 1: 93.5, 2: 92.8}, {0: 92.0, 1: 92.0, 2: 92.0})
    assert shared.verdict([straddles], shared.LEVEL, margin=1.0) == "cannot tell"


def test_the_page_shows_a_claims_difference_and_interval():
    hook = _hook()
    record = {
        "figure": "study 000: claim, x",
        "value": "cannot tell",
        "section": "s",
        "difference": [0.34],
        "interval": [[-0.8, 1.48]],
        "seeds": 3,
    }
    one = {
        "figure": "study 000: claim, y",
        "value": "cannot tell",
        "section": "s",
        "difference": [0.5],
        "interval": [[None, None]],
        "seeds": 1,
    }
    none = {
        "figure": "study 000: claim, z",
        "value": "cannot tell",
        "section": "s",
        "difference": [],
        "interval": [],
        "seeds": 0,
    }
    page = hook.render([record, one, none], sections=["s"])
    assert "| +0.34 [-0.8, +1.48], 3 |" in page and "| +0.5 [-inf, +inf], 1 |" in page
    assert "| study 000: claim, z | cannot tell | no runs |" in page


def test_a_study_cell_shows_its_seeds_spread():
    hook = _hook()
    seeded = {
        "figure": "study 002: t, r, c",
        "study": "002",
        "table": "t",
        "row": "r",
        "column": "c",
        "model": "m",
        "value": 82.38,
        "unit": "u",
        "runs": {"0": {"value": 82.44}, "1": {"value": 82.47}, "2": {"value": 82.22}},
    }
    alone = {
        **seeded,
        "figure": "study 002: t, one seed, c",
        "row": "one seed",
        "value": 80.5,
        "runs": {"0": {"value": 80.5}},
    }
    page = hook.study([seeded, alone], [], "002")
    assert "| 82.38 ± 0.14 (3) |" in page and "| 80.50 |" in page


def test_a_claim_its_models_cannot_test_is_not_tested_never_refuted(monkeypatch):
    shared = _shared()
    monkeypatch.setenv("CEA_RECORD", "0")  # the record returned, nothing written

    class Args:
        study = "002"

    behind = shared.difference({0: 81.0, 1: 81.1, 2: 81.2}, {0: 82.0, 1: 82.1, 2: 82.2})
    said = shared.claim(
        Args, "x ahead of y", [behind], "at 1000: x 81.10, y 82.10", untested="neither beat the frozen model (82.03)"
    )
    assert said["value"] == "not tested by this rerun" and said["note"].startswith("neither beat the frozen model")
    assert said["interval"] == [[behind.low, behind.high]]  # the figures kept, the verdict withheld
    assert shared.claim(Args, "x ahead of y", [behind], "at 1000")["value"] == "does not hold"


def test_study_001_draws_its_curve_from_the_records(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    lines = [
        {
            "figure": f"study 001: truncated fine-tuning, {d} of 3 blocks, stsb test Spearman, m",
            "study": "001",
            "table": "truncated fine-tuning",
            "row": f"{d} of 3 blocks",
            "column": "stsb test Spearman",
            "model": "m",
            "value": v,
            "parameters": p,
        }
        for d, v, p in ((1, 68.2, 13.7e6), (2, 80.6, 15.5e6), (3, 84.1, 17.4e6))
    ]
    (records / "study001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    env = {**os.environ, "CEA_RECORDS": str(records)}
    done = subprocess.run(
        [sys.executable, str(SCRIPTS[1]), "--quick", "--plot", "--output", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    png = (tmp_path / "out" / "curve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert not list((tmp_path / "out").rglob("results.json"))  # nothing trained


def _made_up_record(figure: str, value, **keys) -> dict:
    return {
        "figure": figure,
        "value": value,
        "machine": {"name": "M"},
        "date": "2026-12-01",
        "study": "000",
        "section": "study-000",
        **keys,
    }


def test_from_records_joins_one_seed_records_trains_nothing_and_judges_the_encoder_choice(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    lines = []
    for model, frozen in (("a", 70.2), ("b", 65.1)):  # table 2: a ranks first before training
        lines.append(
            _made_up_record(
                f"study 000: frozen mean, {model}, trec6",
                frozen,
                table="frozen mean",
                row=model,
                column="trec6",
                model=model,
                unit="% kNN-5 accuracy",
            )
        )
    batch = {"table": "results", "row": "CEA (batch-level)", "column": "trec6"}
    for seed, value in ((0, 96.2), (1, 96.4), (2, 96.3)):  # a's seeds run apart, one record each, before runs kept
        lines.append(
            _made_up_record(
                "study 000: results, CEA (batch-level), trec6, a",
                value,
                model="a",
                unit="% test accuracy, mean of 1 seeds",
                **batch,
                command=f"python studies/s000_cea.py --rows batch --seeds {seed}",
            )
        )
    runs = {str(seed): {"value": v, "machine": "M", "precision": "fp32"} for seed, v in enumerate((93.0, 93.2, 93.1))}
    lines.append(
        _made_up_record(
            "study 000: results, CEA (batch-level), trec6, b",
            93.1,
            model="b",
            runs=runs,
            unit="% test accuracy, mean of 3 seeds",
            **batch,
            command="python s000",
        )
    )
    lines.append(
        _made_up_record(
            "study 000: results, fine-tuning, trec6, a",
            96.6,
            model="a",
            table="results",
            row="fine-tuning",
            column="trec6",
            unit="% test accuracy, mean of 3 seeds",
            command="python studies/s000_cea.py --seeds 0,1,2",
        )
    )  # a mean alone: no seeds
    (records / "study000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    env = {**os.environ, "CEA_RECORDS": str(records)}
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS[0]),
            "--from-records",
            "--tables",
            "results",
            "--datasets",
            "trec6",
            "--rows",
            "fine-tuning,batch",
            "--models",
            "a,b",
            "--output",
            str(tmp_path / "out"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = [json.loads(line) for line in (records / "study000.jsonl").read_text().splitlines()][len(lines) :]
    joined = next(r for r in written if r["figure"] == "study 000: results, CEA (batch-level), trec6, a")
    assert {s: r["value"] for s, r in joined["runs"].items()} == {"0": 96.2, "1": 96.4, "2": 96.3}
    assert joined["value"] == 96.3 and joined["note"].startswith("seeds 0,1,2: 96.20 / 96.40 / 96.30 (M, not recorded)")
    assert not [r for r in written if r["figure"] == "study 000: results, fine-tuning, trec6, a"]
    choice = next(r for r in written if r.get("claim") == "frozen kNN ranks the encoders as training does")
    assert choice["value"] == "holds" and abs(choice["difference"][0] - 3.2) < 1e-6 and choice["seeds"] == 3
    assert (tmp_path / "out" / "results.png").read_bytes()[:4] == b"\x89PNG"  # aside from the page's pictures
    assert not [r for r in written if r["figure"] == "study 000: wall time"]  # a judge's time is not the study's
    assert not list((tmp_path / "out").rglob("results.json"))  # nothing trained


def test_attention_shares_split_the_words_attention_by_their_part_of_speech(tmp_path):
    shared = _shared()
    import s004_entity_swap as s004

    from cea.encoders import load_encoder

    encoder = load_encoder(shared.tiny_bert(tmp_path / "tiny"))
    texts = ["the dog will pay the bank", "a cat is in the river"]

    class Quick:
        quick = True

    tagged = s004.tagged_words(Quick, texts)
    assert [p for _, _, p in tagged[0]] == ["NOUN", "NOUN", "VERB", "VERB", "NOUN", "NOUN"]
    shares = s004.attention_shares(encoder, texts, tagged)
    assert 0 < shares["predicates"] < 100 and abs(shares["predicates"] + shares["keywords"] - 100) < 0.02
    every_verb = [[(a, b, "VERB") for a, b, _ in spans] for spans in tagged]
    assert s004.attention_shares(encoder, texts, every_verb) == {"predicates": 100.0, "keywords": 0.0}


def test_the_attention_claim_needs_the_predicates_up_and_the_keywords_down(monkeypatch):
    _shared()
    import s004_entity_swap as s004

    monkeypatch.setenv("CEA_RECORD", "0")  # the record returned, nothing written

    class Args:
        study = "004"

    base = {"predicates": 23.0, "keywords": 40.0}
    moved = {
        0: {"predicates": 25.1, "keywords": 38.0},
        1: {"predicates": 25.3, "keywords": 37.8},
        2: {"predicates": 25.2, "keywords": 38.1},
    }
    assert s004.judge_attention(Args, base, moved)["value"] == "holds"
    added = {seed: {**s, "keywords": 40.0 + d} for (seed, s), d in zip(moved.items(), (0.2, -0.3, 0.1))}
    said = s004.judge_attention(Args, base, added)  # more on the predicates, the keywords' share as it was
    assert said["value"] == "cannot tell" and said["interval"][1][0] < 0 < said["interval"][1][1]
