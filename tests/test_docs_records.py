"""The figures' pages are generated from the records (``docs/hooks/records.py``): a record added changes the page,
the newest record of a figure is today's, every cell stays short, and the committed records all render."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hook = _module("docs_records_hook", ROOT / "docs" / "hooks" / "records.py")
PAGE = "# Figures\n\n<!-- records: current accuracy -->\n\nAll of them:\n\n<!-- records: history accuracy -->\n"


def _page(folder: Path) -> str:
    return hook.on_page_markdown(PAGE, None, {"docs_dir": str(folder.parent)}, None)


def _cells(markdown: str) -> list[str]:
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    return [c.strip() for row in rows for c in re.split(r"(?<!\\)\|", row)[1:-1]]


def _write(folder: Path, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _rec(figure, value, date, **extra):
    return {
        "figure": figure,
        "value": value,
        "baseline": 92.95,
        "unit": "% accuracy",
        "command": "cea fit D",
        "machine": {"name": "EPYC", "cpu": "AMD EPYC"},
        "date": date,
        "section": "accuracy",
        **extra,
    }


def test_a_record_added_changes_the_page_and_the_newest_wins(tmp_path):
    folder = tmp_path / "records"
    _write(folder, [_rec("cea fit test accuracy, banking77", 93.67, "2026-11-25")])
    before = _page(folder)
    assert "93.67" in before and "<!--" not in before
    _write(
        folder,
        [
            _rec("cea fit test accuracy, banking77", 93.67, "2026-11-25"),
            _rec("cea fit test accuracy, banking77", 94.10, "2026-11-28"),
        ],
    )
    after = _page(folder)
    assert after != before
    current, history = after.split("All of them:")
    assert "94.1" in current and "93.67" not in current  # one row per figure: today's
    assert history.index("94.1") < history.index("93.67")  # every record, newest first


def test_sections_filter_and_an_empty_section_says_so(tmp_path):
    records = [_rec("a", 1, "2026-11-01"), _rec("b", 2, "2026-11-01", section="speed")]
    assert "| b |" not in hook.render(records, "current", ["accuracy"])
    assert "| b |" in hook.render(records, "current")
    assert "No records" in hook.render(records, "current", ["nothing"])


def test_a_headline_figure_shows_its_newest_record():
    records = [
        _rec("exact kNN", 5.03, "2026-11-22", headline=True),
        _rec("other", 1, "2026-11-22"),
        _rec("exact kNN", 4.80, "2026-11-28"),
    ]  # a script's new record carries no headline mark
    out = hook.render(records, "headline")
    assert "4.8" in out and "5.03" not in out and "other" not in out


def test_cells_are_whole_and_at_most_120_characters():
    command = "python bench/fit.py banking77 " + " ".join(f"--option-{i} {i}" for i in range(20))
    rows = [_rec("banking77", 93.2, "2026-11-27", command=command), _rec("clinc150", 97.1, "2026-11-27")]
    for kind in ("current", "history"):
        out = hook.render(rows, kind)
        assert max(len(c) for c in _cells(out)) <= hook.WIDTH and "…" not in out
        assert "| command 1 (below) |" in out and out.endswith(f"Commands:\n\n1. `{command}`")  # whole, below
        assert "| `cea fit D` |" in out  # a command that fits stays in its row
    with pytest.raises(ValueError, match="a cell of 227 characters \\(at most 120\\)"):
        hook.render([_rec("x", 1.0, "2026-11-27", note="a paragraph " * 19)])


def test_the_committed_records_render_with_short_cells():
    records = hook.load(ROOT / "docs" / "records")
    assert records and all({"figure", "value", "date"} <= r.keys() for r in records)
    for kind in ("current", "history", "headline"):
        assert max(len(c) for c in _cells(hook.render(records, kind))) <= hook.WIDTH


def test_bench_common_record_appends_one_line(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        common = _module("bench_common", ROOT / "bench" / "common.py")
    finally:
        sys.path.remove(str(ROOT / "bench"))
    monkeypatch.setattr(common, "RECORDS", tmp_path)
    common.record(
        "one addition at 1,000,000 references", 0.53, baseline=1.37, unit="ms", name="store_speed", section="speed"
    )
    common.record("one addition at 1,000,000 references", 0.50, unit="ms", name="store_speed", section="speed")
    lines = (tmp_path / "store_speed.jsonl").read_text().splitlines()
    assert len(lines) == 2
    rec = json.loads(lines[1])
    assert {"figure", "value", "baseline", "unit", "command", "machine", "versions", "commit", "date"} <= rec.keys()
    assert rec["machine"]["name"] and rec["versions"]["python"]
    assert "| 0.5 |" in hook.render(hook.load(tmp_path), "current", ["speed"])


def test_every_table_written_by_hand_has_cells_of_at_most_120_characters():
    pages = [ROOT / "README.md", ROOT / "DEVELOPERS.md", *sorted((ROOT / "docs").rglob("*.md"))]
    long = [(page.name, len(c)) for page in pages for c in _cells(page.read_text()) if len(c) > hook.WIDTH]
    assert long == []


def test_the_frontier_plot_draws_each_sets_newest_run(tmp_path):
    old = [
        _rec("f frontier, trec50: trained", 92.0, "2026-11-01", section="frontier", p99_ms=60.0, commit="a"),
        _rec("f frontier, trec50: static", 77.0, "2026-11-01", section="frontier", p99_ms=2.0, commit="a"),
    ]
    new = [
        _rec("f frontier, trec50: trained", 92.5, "2026-11-02", section="frontier", p99_ms=55.0, commit="b"),
        _rec("f frontier, trec50: truncated-3-int8", 91.0, "2026-11-02", section="frontier", p99_ms=12.0, commit="b"),
        _rec("f frontier, hwu64: trained", 92.1, "2026-11-02", section="frontier", p99_ms=70.0, commit="b"),
        _rec("cea fit test accuracy, trec50", 92.8, "2026-11-02"),
    ]  # no p99: not a point
    # the static point of the older run is left out: it is not on the newest run's frontier
    assert hook.series(old + new, ["frontier"]) == {
        "f frontier, trec50": [(12.0, 91.0), (55.0, 92.5)],
        "f frontier, hwu64": [(70.0, 92.1)],
    }
    assert hook.series(new, ["accuracy"]) == {}
    page = hook.replace("<!-- records: plot frontier -->\n", old + new)
    assert page.startswith('<div class="plot"><svg') and page.rstrip().endswith("</svg></div>")
    assert "\n" not in page.strip() and hook.replace("<!-- records: plot none -->", new) == "*No records yet.*"
