"""``cea report``: a self-contained page from fixture runs, checked in headless Chromium; bad folders."""

import json
import re
import shutil

import pytest

from cea.errors import CeaError
from cea.reports.html import build_report


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_bert_dir):
    import pandas as pd

    from cea.data import load_dataset
    from cea.evaluation import probe
    from cea.training import TrainConfig, train

    root = tmp_path_factory.mktemp("runs")
    rows = []
    for i in range(12):
        rows += [
            (f"my card is lost {'a' * (i % 4 + 1)}", "card"),
            (f"transfer money to my account {i}", "transfer"),
            (f"what is the capital city {'c' * (i % 3 + 1)}", "geo"),
        ]
    data = root / "intents.csv"
    pd.DataFrame(rows, columns=["text", "label"]).to_csv(data, index=False)
    folders = []
    for objective in ("softmax", "cea"):
        folder = root / objective
        train(
            TrainConfig(
                dataset=str(data),
                model=tiny_bert_dir,
                objective=objective,
                output=str(folder),
                epochs=2,
                batch_size=6,
                k_per_class=2,
                lr=1e-3,
                knn_k=3,
            ),
            progress=False,
        )
        folders.append(folder)
    probe(load_dataset(str(data)), models=[tiny_bert_dir], layers="all", poolings=("mean",), k=3, progress=False).save(
        root / "probe"
    )
    return [*folders, root / "probe"]


def test_report_is_self_contained(runs, tmp_path):
    page = build_report(runs, tmp_path / "report.html", title="fixture report").read_text()
    assert page.startswith("<!DOCTYPE html>") and "fixture report" in page
    assert not re.search(r"(src|href)=\"(https?:|//|/)", page)  # no external asset
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,', page)
    # per training run: training curve, map, confusions; the probe: its layer curve
    assert len(images) == 7
    assert page.count("<table>") == 5 and "knn_accuracy" in page and "head_accuracy" in page
    assert "Settings" in page and "objective" in page


def test_maps_come_from_the_runs_kept_embeddings(runs, tmp_path, monkeypatch):
    import cea.encoders.store as store_mod

    def no_encoding(*args, **kwargs):
        raise AssertionError("the report encoded the test split although the run kept its embeddings")

    monkeypatch.setattr(store_mod, "encode_texts", no_encoding)
    page = build_report(runs[:1], tmp_path / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3  # training curve, map, confusions
    (tmp_path / "old").mkdir()
    shutil.copytree(runs[0], tmp_path / "old" / "run")
    shutil.rmtree(tmp_path / "old" / "run" / "embeddings")  # a run that kept none
    with pytest.raises(AssertionError, match="encoded the test split"):
        build_report([tmp_path / "old" / "run"], tmp_path / "old.html")


def test_report_opens_in_headless_chromium(runs, tmp_path):
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        pytest.skip("no Chromium on this machine (CI installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    page_path = build_report(runs, tmp_path / "report.html")
    flags = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=flags)
        page = browser.new_page()
        page.goto(page_path.as_uri())
        tables = page.locator("table").count()
        loaded = page.evaluate("Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")
        headings = page.locator("h2").all_inner_texts()
        browser.close()
    assert tables == 5
    assert len(loaded) == 7 and all(loaded)
    assert {"softmax", "cea", "probe", "Test results"} <= set(headings)


def test_foreign_or_newer_runs_are_refused(runs, tmp_path):
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "results.json").write_text(json.dumps({"format": "cea.train/9"}))
    with pytest.raises(CeaError, match="holds format 'cea.train/9', not cea.train/1 or cea.probe/1"):
        build_report([runs[0], newer], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "results.json").write_text("[1, 2]")
    with pytest.raises(CeaError, match="format None"):
        build_report([foreign], tmp_path / "r.html")
    with pytest.raises(CeaError, match="holds no cea run"):
        build_report([tmp_path], tmp_path / "r.html")


def test_runs_with_the_same_folder_name_are_told_apart(runs, tmp_path):
    """Two seed-0 folders under different settings keep their parent's name; small rates keep their digits."""
    twins = []
    for objective in ("softmax", "cea"):
        twin = tmp_path / objective / "seed-0"
        shutil.copytree(runs[0 if objective == "softmax" else 1], twin)
        twins.append(twin)
    page = build_report(twins, tmp_path / "r.html", maps=False).read_text()
    assert "<h2>softmax/seed-0</h2>" in page and "<h2>cea/seed-0</h2>" in page
    assert "<tr><td>lr</td><td>0.001</td><td>0.001</td></tr>" in page  # not rounded to 0.00
