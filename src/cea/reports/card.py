"""Model cards: the ``README.md`` of a trained run's ``model/`` and of a bundle, in the Hugging Face hub's format.

What it writes
    YAML metadata (``base_model`` where it is on the hub, ``datasets``, ``library_name``, ``tags`` and a ``model-index``
    of the test figures) and a body: what the model does, how it was trained or built, its figures, and how to load it.
    All from the run's ``results.json`` or the bundle's ``manifest.json`` and ``fit.json``: never kept by hand.

When
    ``cea train`` writes the run's card when it writes ``results.json`` (sentence-transformers' own card, which
    knows nothing of cea's judgements, is replaced); a bundle gets its card when it is written, and ``cea fit``
    rewrites it once ``fit.json`` is in.

Why written here
    sentence-transformers' ``SentenceTransformerModelCardData`` describes the trainer's own evaluators and losses;
    cea's figures (kNN and head accuracy on dev and test, the chosen classifier) and its bundles are not among them.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ..encoders.catalog import MODELS
from ..paths import write_text

README = "README.md"


def _hub_id(model: str) -> str | None:
    """The hub id of a catalog name or a hub id (``ORG/NAME``); None for a local folder."""
    if model in MODELS:
        return MODELS[model].hub_id
    return model if model.count("/") == 1 and not Path(model).exists() else None


def _card(meta: dict, title: str, sections: dict[str, str]) -> str:
    head = yaml.safe_dump({k: v for k, v in meta.items() if v is not None}, sort_keys=False, allow_unicode=True)
    return f"---\n{head}---\n\n# {title}\n\n" + "\n\n".join(f"## {k}\n\n{v}" for k, v in sections.items()) + "\n"


def _index(name: str, dataset: str, metrics: dict[str, float]) -> list[dict]:
    return [
        {
            "name": name,
            "results": [
                {
                    "task": {"type": "text-classification", "name": "Text Classification"},
                    "dataset": {"name": dataset, "type": dataset, "split": "test"},
                    "metrics": [{"type": k, "value": round(float(v), 2), "name": k} for k, v in metrics.items()],
                }
            ],
        }
    ]


def _table(rows: dict[str, dict]) -> str:
    names = sorted({k for r in rows.values() for k in r})
    lines = ["| split | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [
        f"| {split} | " + " | ".join(f"{r[k]:.2f}" if k in r else "" for k in names) + " |" for split, r in rows.items()
    ]
    return "\n".join(lines)


def run_card(results: dict, name: str) -> str:
    """The card of a ``cea train`` run's encoder, from its ``results.json`` (``name``: the run's folder name)."""
    config, metrics = results["config"], results.get("metrics", {})
    dataset = Path(str(config.get("dataset", ""))).stem or "data"
    numbers = {split: {k: v for k, v in m.items() if isinstance(v, (int, float))} for split, m in metrics.items()}
    meta = {
        "base_model": _hub_id(str(config["model"])),
        "datasets": [dataset],
        "library_name": "sentence-transformers",
        "pipeline_tag": "sentence-similarity",
        "tags": ["sentence-transformers", "cea", str(config["objective"])],
        "model-index": _index(name, dataset, numbers["test"]) if numbers.get("test") else None,
    }
    trained = (
        f"Fine-tuned by `cea train` with the `{config['objective']}` objective from `{config['model']}` on "
        f"{results.get('n_train', '?')} texts of {dataset} ({len(results.get('labels') or [])} labels): "
        f"{results.get('steps', '?')} steps, {results.get('epochs') or 0:.1f} epochs, batch "
        f"{config.get('batch_size')}, learning rate {config.get('lr')}, seed {config.get('seed')}, "
        f"{results.get('train_seconds', '?')} s; the kept weights are step {results.get('kept_step', '?')}'s."
    )
    use = (
        '```python\nfrom sentence_transformers import SentenceTransformer\n\nmodel = SentenceTransformer("PATH")\n'
        'vectors = model.encode(["a text"])\n```\n\nA classifier on top, served: `cea bundle PATH --dataset DATA '
        "-o BUNDLE`, then `cea serve BUNDLE`."
    )
    return _card(
        meta,
        name,
        {
            "What it does": "Encodes a text into one vector; texts of the same label lie close "
            "together (the neighbours' vote and a linear head classify them).",
            "Training": trained,
            "Figures": _table(numbers) + "\n\nkNN: the vote of the nearest "
            "training texts; linear and head: a logistic regression, and the objective's own head.",
            "Use": use,
        },
    )


def bundle_card(root: str | Path, name: str | None = None) -> str:
    """The card of the bundle in ``root`` (``name``: its folder's, by default), from its ``manifest.json`` and, where
    ``cea fit`` made it, ``fit.json``."""
    root, name = Path(root), name or Path(root).name
    manifest = json.loads((root / "manifest.json").read_text())
    fit = json.loads((root / "fit.json").read_text()) if (root / "fit.json").exists() else None
    model, classifier = str(manifest["model"]), manifest.get("classifier", {})
    dataset = str(fit["dataset"]) if fit else None
    test = {k: v for k, v in (fit or {}).get("test", {}).items() if isinstance(v, (int, float))}
    meta = {
        "base_model": _hub_id(model),
        "datasets": [dataset] if dataset else None,
        "library_name": "cea",
        "pipeline_tag": "text-classification",
        "tags": ["cea", "sentence-transformers", "knn"],
        "model-index": _index(name, dataset, test) if test else None,
    }
    built = (
        f"An encoder (`{model}`, {manifest.get('dim')} dimensions) and {manifest['index']['n']} labelled "
        f"examples in a {manifest['index']['kind']} index; classifier: {classifier.get('kind', 'knn')}"
        f" (k {manifest.get('k')}, C {classifier.get('C')}, kNN share {classifier.get('knn_share')}); "
        f"unknown below evidence {manifest.get('unknown', {}).get('threshold')}."
    )
    if fit:
        built += (
            f" Made by `cea fit` in {fit.get('seconds')} s: encoder {fit.get('chosen')} (layer "
            f"{fit.get('layer')}, objective {fit.get('objective')}), chosen on dev."
        )
    sections = {
        "What it does": "Predicts the label of a text from its nearest labelled examples and a linear head; "
        "takes new examples and labels without retraining; answers unknown below its threshold.",
        "How it was built": built,
        **({"Figures": _table({"test": test})} if test else {}),
    }
    sections["Use"] = (
        "`cea serve BUNDLE` (HTTP), `cea predict BUNDLE --input FILE`, or in Python:\n\n```python\n"
        'from cea.bundle import Bundle\n\nbundle = Bundle.load("BUNDLE")\n'
        'bundle.predict(["a text"])\n```'
    )
    return _card(meta, name, sections)


def write_bundle_card(root: str | Path, name: str | None = None) -> None:
    """Write (or rewrite) ``root/README.md``, the bundle's card."""
    write_text(Path(root) / README, bundle_card(root, name))
