"""``cea report RUN_DIR... -o report.html``: one self-contained HTML page for runs side by side.

Run folders of every kind cea writes are read (:data:`FORMATS`: training runs, probes, layer sweeps, grids and
``cea fit``'s choices); one of an unknown or newer format is refused before anything is written. Images are embedded
as base64 PNG and the style sheet is inline: the page needs no server, no network and no script.
"""

from __future__ import annotations

import base64
import html
import json
import tempfile
from pathlib import Path

import numpy as np

from .. import encoders  # its load_encoder looked up at call time: tests replace it
from ..data import load_dataset
from ..encoders.store import run_store
from ..errors import CeaError
from ..evaluation.classification import evaluate_encoder
from ..paths import read_json, write_text
from .plots import confusion_view, embedding_map, frontier_plot, layer_curve, training_curve

FORMATS = {
    "results.json": ("cea.train/1", "cea.probe/1"),
    "sweep.json": ("cea.sweep/1",),
    "compare.json": ("cea.compare/1",),
    "fit.json": ("cea.fit/1",),
}
STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.runs{display:flex;flex-wrap:wrap;gap:1.5em}.run{flex:1 1 600px;min-width:480px}
img{max-width:100%;border:1px solid #eee}.note{color:#666;font-size:.85em}
"""


def read_run(folder: str | Path) -> dict:
    """The run's main JSON and its kind; an unknown or newer format is a clear error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CeaError(f"run folder not found: {folder}")
    for name, known in FORMATS.items():
        if (folder / name).exists():
            data = read_json(folder / name, known, "re-run it with this version of cea or use the cea that wrote it")
            return {"folder": folder, "format": data["format"], "data": data}
    raise CeaError(f"{folder} holds no cea run (no results.json, sweep.json or compare.json)")


def _image(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(Path(path).stem)}" src="data:image/png;base64,{data}">'


def _page(title: str, body: str) -> str:
    """A self-contained page: ``title`` as its title and heading, the inline style sheet, then ``body``."""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def _table(header: list[str], rows: list[list]) -> str:
    def cell(v):
        if v is None:  # not measured
            return "-"
        if isinstance(v, float):  # metrics with two decimals; a learning rate such as 5e-05 as it is
            return f"{v:.3g}" if 0 < abs(v) < 0.01 else f"{v:.2f}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _set_names(runs: list[dict]) -> None:
    """Give each run the shortest tail of its path that tells it apart (softmax/seed-0, cea/seed-0)."""
    parts = [r["folder"].resolve().parts for r in runs]
    for depth in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            break
    for run, name in zip(runs, names):
        run["name"] = name


def _train_section(run: dict, workdir: Path, maps: bool) -> str:
    data, folder, metrics = run["data"], run["folder"], run["data"]["metrics"]
    columns = list(dict.fromkeys(k for m in metrics.values() for k in m))
    parts = [_table(["split", *columns], [[s, *(m.get(c, "-") for c in columns)] for s, m in metrics.items()])]
    log = folder / "training_log.jsonl"
    if log.exists():
        history = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        try:
            parts.append(_image(training_curve(workdir / f"{id(run)}-curve.png", history, "training")))
        except CeaError as exc:  # a run too short to log a loss: say so instead of a plot
            parts.append(f'<p class="note">no training curve: {html.escape(str(exc))}</p>')
    if maps and (folder / "model").exists() and data.get("kind", "classes") == "classes":
        parts.append(_maps(run, workdir))
    return "".join(parts)


def _maps(run: dict, workdir: Path) -> str:
    """t-SNE of the test embeddings by gold and predicted label, and the largest confusions: the run's model judged
    as its final judgement was, its embeddings read from the store where the run kept them (else encoded)."""
    config = run["data"]["config"]
    ds = load_dataset(
        config["dataset"],
        text_column=config.get("text_column", "text"),
        label_column=config.get("label_column", "label"),
    )
    model, test, k = run["folder"] / "model", ds["test"], config.get("knn_k", 5)
    saved = vars(
        evaluate_encoder(
            encoders.load_encoder(str(model)),
            ds["train"]["text"],
            ds["train"]["label"].to_numpy(),
            {"test": (test["text"], test["label"].to_numpy())},
            k,
            retrieval=(),
            store=run_store(model),
        )["test"]
    )
    emb, pred = saved["embeddings"], np.asarray(saved["predicted"])
    return _image(
        embedding_map(
            emb,
            test["label"],
            workdir / f"{id(run)}-map.png",
            predicted=pred,
            perplexity=min(30.0, max(1.0, (len(emb) - 1) / 3)),
            title="test:",
        )
    ) + _image(confusion_view(workdir / f"{id(run)}-confusions.png", test["label"], pred))


def _probe_section(run: dict, workdir: Path) -> str:
    rows = run["data"]["rows"]
    scores = [k for k in ("accuracy", "micro_f1", "macro_f1", "top_k_accuracy", "subset_accuracy") if k in rows[0]]
    table = _table(
        ["model", "layer", "pooling", *(k.replace("_", "-") for k in scores)],
        [[r["model"], r["layer"], r["pooling"], *(r[k] for k in scores)] for r in rows],
    )
    curves: dict[str, dict[int, float]] = {}
    for r in rows:
        if isinstance(r["layer"], int):
            curves.setdefault(f"{r['model']} {r['pooling']}", {})[r["layer"]] = r[scores[0]]
    return table + (
        _image(layer_curve(workdir / f"{id(run)}-layers.png", curves, f"kNN {scores[0]}", "probe")) if curves else ""
    )


def _sweep_section(run: dict) -> str:
    data = run["data"]
    rows = [
        [
            layer,
            v["dev"],
            v["test"],
            data["fine_tuned"].get(layer, {}).get("dev", "-"),
            data["fine_tuned"].get(layer, {}).get("test", "-"),
        ]
        for layer, v in data["frozen"].items()
    ]
    text = (
        f"<p>best depth {data['best_layer']} by dev: test {data['best_test_mean']:.2f} ± "
        f"{data['best_test_std']:.2f} over seeds {data['seeds']}</p>"
    )
    png = run["folder"] / "layer_curve.png"
    return (
        _table(["layer", "frozen dev", "frozen test", "tuned dev", "tuned test"], rows)
        + text
        + (_image(png) if png.exists() else "")
    )


def _compare_section(run: dict) -> str:
    rows = run["data"]["rows"]
    return _table(
        ["setting", "runs", "accuracy", "± std", "macro-F1", "± std", "s/epoch", "peak MB"],
        [
            [
                r["setting"],
                r["runs"],
                r["accuracy_mean"],
                r["accuracy_std"],
                r["macro_f1_mean"],
                r["macro_f1_std"],
                r["seconds_per_epoch"],
                r["peak_memory_mb"],
            ]
            for r in rows
        ],
    )


def _fit_section(run: dict, workdir: Path) -> str:
    """What ``cea fit`` chose, on what dev evidence, what it skipped to stay in its budget and, with a latency, the
    candidates' accuracy against their served p99."""
    data = run["data"]
    # each candidate's classifier in words, as fit wrote it (a fit.json from before it did: the classifier's kind)
    metric = data.get("metric", "accuracy")  # label sets: micro-F1
    rows = [
        [
            name,
            c.get("described", c["dev"]["classifier"]),
            c["dev"]["knn"][metric],
            c["dev"].get("linear", {}).get(metric, "-"),
            c["dev"].get("macro_f1", "-"),
            c["dev"].get("rare_f1", "-"),
            c["test"][metric],
            c["test"]["macro_f1"],
            c["test"].get("rare_f1", "-"),
            "chosen" if name == data["chosen"] else "",
        ]
        for name, c in data["candidates"].items()
    ]
    rare = (data.get("rare") or {}).get("labels")  # a fit.json from before rare labels were judged: none
    skipped = "".join(f"<li>{html.escape(s)}</li>" for s in data["skipped"]) or "<li>nothing</li>"
    return (
        f"<p>{html.escape(data['model'])}, layer {data['layer']} of {data['depth']}, objective "
        f"{html.escape(data['objective'])}; {data['references']} examples in the bundle; "
        f"{data['seconds']:.0f} s of a {data['budget_seconds']:.0f} s budget.</p>"
        + _table(
            [
                "encoder",
                "classifier",
                "dev kNN",
                "dev linear head",
                "dev macro-F1",
                "dev rare-F1",
                f"test {metric.replace('_', '-')}",
                "test macro-F1",
                "test rare-F1",
                "",
            ],
            rows,
        )
        + (
            f"<p>Rare-F1: the macro-F1 of the {len(rare)} labels of fewer than {data['rare']['below']} training "
            f"texts ({html.escape(', '.join(rare[:20]))}{', ...' if len(rare) > 20 else ''}).</p>"
            if rare
            else ""
        )
        + f"<p>Skipped or cut:</p><ul>{skipped}</ul>"
        + _frontier(data, metric, workdir)
        + _issues_section(data.get("label_issues"))
    )


def _frontier(data: dict, metric: str, workdir: Path) -> str:
    """``cea fit --latency``'s candidates: dev accuracy against served p99, the frontier joined (none untimed)."""
    points = {
        name: (c["served"]["p99_ms"], c["dev"][metric], bool(c["served"].get("frontier")))
        for name, c in data["candidates"].items()
        if "served" in c
    }
    if not points:
        return ""
    return _image(
        frontier_plot(
            workdir / f"{id(data)}-frontier.png",
            points,
            f"dev {metric.replace('_', '-')}",
            f"what {data.get('latency_ms')} ms buys",
        )
    )


def _issues_section(found: dict | None) -> str:
    """``cea fit``'s label check (``cea check`` on the bundle's examples), where it ran."""
    if not found:
        return ""
    rows = [[r["row"], r["text"], r["label"], r["suggested"], r["score"]] for r in found["rows"]]
    return (
        f"<p>Labels probably wrong: {found['flagged']} of {found['of']} (the likeliest below; all with "
        f"<code>cea check</code>); {found['conflicting_duplicates']} pairs of duplicates labelled differently."
        "</p>" + _table(["row", "text", "label", "suggested", "score"], rows)
    )


def _settings(runs: list[dict]) -> str:
    """Training settings side by side: every key whose value differs between runs, then the rest."""
    configs = [r["data"].get("config", {}) for r in runs]  # the objective's options get one row each, like the rest
    configs = [{**{k: v for k, v in c.items() if k != "options"}, **c.get("options", {})} for c in configs]
    keys = list(dict.fromkeys(k for c in configs for k in c))
    differ = [k for k in keys if len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1]
    same = [k for k in keys if k not in differ and configs[0].get(k) not in (None, {}, [])]
    rows = [[k, *(c.get(k, "-") for c in configs)] for k in differ + same]
    return _table(["setting", *(r["name"] for r in runs)], rows)


def build_report(run_dirs: list[str | Path], output: str | Path, title: str = "cea report", maps: bool = True) -> Path:
    """Write one self-contained HTML page for ``run_dirs``; every folder is checked first."""
    if not run_dirs:
        raise CeaError("name at least one run folder")
    runs = [read_run(d) for d in run_dirs]
    _set_names(runs)
    output = Path(output)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        section = {
            "cea.train/1": lambda run: _train_section(run, workdir, maps),
            "cea.probe/1": lambda run: _probe_section(run, workdir),
            "cea.sweep/1": _sweep_section,
            "cea.compare/1": _compare_section,
            "cea.fit/1": lambda run: _fit_section(run, workdir),
        }
        sections = [
            f'<div class="run"><h2>{html.escape(run["name"])}</h2>'
            f'<p class="note">{html.escape(run["format"])} &middot; {html.escape(str(run["folder"]))}</p>'
            f"{section[run['format']](run)}</div>"
            for run in runs
        ]
        trained = [r for r in runs if r["format"] in ("cea.train/1", "cea.sweep/1", "cea.compare/1")]
        page = _page(
            title,
            _summary(runs)
            + (f"<h2>Settings</h2>{_settings(trained)}" if len(trained) > 1 else "")
            + f'<div class="runs">{"".join(sections)}</div>',
        )
    write_text(output, page)
    return output


def _summary(runs: list[dict]) -> str:
    """Test figures of the training runs side by side (the first thing a reader wants)."""
    rows = []
    for run in (r for r in runs if r["format"] == "cea.train/1"):
        test = run["data"]["metrics"].get("test", {})
        main = test.get("knn_accuracy", test.get("spearman", test.get("triplet_accuracy", np.nan)))
        rows.append(
            [
                run["name"],
                run["data"]["config"].get("objective", "-"),
                main,
                test.get("knn_macro_f1", "-"),
                test.get("head_accuracy", "-"),
                run["data"].get("seconds_per_epoch", "-"),
            ]
        )
    if not rows:
        return ""
    return "<h2>Test results</h2>" + _table(
        ["run", "objective", "accuracy / Spearman", "macro-F1", "head accuracy", "s / epoch"], rows
    )


def groups_page(
    output: str | Path, title: str, groups: list[dict], map_png: str | Path | None = None, note: str = ""
) -> Path:
    """One self-contained HTML page of discovered groups (``cea discover BUNDLE``): the map, then one row per group
    (id, kind, size, the words that set it apart, its most central texts, its nearest known class)."""
    rows = [
        [
            g["id"],
            g["known_class"] or "new",
            g["size"],
            " ".join(g["words"][:6]),
            " | ".join(t[:70] for t in g["central_texts"][:3]),
            f"{g['nearest_known']['label']} ({g['nearest_known']['similarity']:.2f})" if g["nearest_known"] else "-",
        ]
        for g in groups
    ]
    body = (
        f'<p class="note">{html.escape(note)}</p>'
        + (_image(Path(map_png)) if map_png else "")
        + "<h2>Groups</h2>"
        + _table(["group", "known class", "texts", "words", "central texts", "nearest known"], rows)
    )
    write_text(Path(output), _page(title, body))
    return Path(output)
