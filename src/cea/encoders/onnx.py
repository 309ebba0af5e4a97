"""The encoder in ONNX, fp32 or int8, run by ONNX Runtime: faster CPU inference for bundles.

sentence-transformers exports through ``optimum``, whose ONNX package pins an older transformers than cea needs, so
this module exports the transformer with ``torch.onnx.export`` (in optimum's layout: ``onnx/model.onnx`` also loads
with ``SentenceTransformer(path, backend="onnx")``) and fuses attention and layer norms with ONNX Runtime's optimizer;
an :class:`OnnxEncoder` encodes like the model it was exported from.

int8 is quantised statically (:func:`quantize_int8`): every activation's scale is calibrated once, on texts the
caller gives (a bundle's own references), so a text's embedding is the same whatever its batch. ONNX Runtime's
dynamic quantisation, which sentence-transformers' and optimum's exports use, scales a matrix product's input over
the whole batch: a banking77 text alone and inside a batch of 64 got embeddings of cosine 0.987 at worst
(bench/onnx_speed.py), so engines that batch a corpus differently gave some texts other labels.

    >>> export_onnx(load_encoder("all-MiniLM-L6-v2"), "model-folder", calibration=texts)
    >>> OnnxEncoder("model-folder", "int8").encode(["where is my card?"]).shape
    (1, 384)
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import warnings
from pathlib import Path

import numpy as np
import torch

from ..errors import CeaError, OptionError
from ..paths import write_json
from ..progress import verbose
from .device import ENCODE_TOKENS
from .embeddings import cut_passes

FILES = {"fp32": "onnx/model.onnx", "int8": "onnx/model_int8.onnx"}
SETTINGS = "onnx/settings.json"  # what the runtime needs besides the graph: pooling, length, case
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


# onnxruntime's note on every quantisation of a graph that did not go through its pre-processing: cea quantises the
# unfused export on purpose (quantize_int8), and a user of cea has nothing to run
PRE_PROCESSING_NOTE = "Please consider to run pre-processing before quantization"


@contextlib.contextmanager
def quiet_export():
    """The exporter's and the quantiser's notes off: the tracer's warnings on transformers' shape checks (a Python
    boolean of a tensor), the exporter's note on ``aten::index`` (the graph indexes with positions >= 0 only) and
    onnxruntime's :data:`PRE_PROCESSING_NOTE`. None asks a user of cea to act: what an export changes is measured
    where it is chosen (``backend="auto"``: held-out accuracy against PyTorch); ``cea --verbose`` shows them.
    Without a handler of its own the root logger gets a null one meanwhile, so that onnxruntime's
    ``logging.warning`` does not configure it for the whole process."""
    if verbose():
        yield
        return
    root = logging.getLogger()
    note = logging.Filter()
    note.filter = lambda record: not record.getMessage().startswith(PRE_PROCESSING_NOTE)
    null = None if root.handlers else logging.NullHandler()
    root.addFilter(note)
    if null is not None:
        root.addHandler(null)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", message="Exporting aten::index operator", category=UserWarning)
            yield
    finally:
        root.removeFilter(note)
        if null is not None:
            root.removeHandler(null)


def export_onnx(
    model, folder: str | Path, int8: bool = False, calibration: list[str] | None = None, opset: int = 17
) -> dict[str, Path]:
    """Write ``folder/onnx/model.onnx`` (and with ``int8`` ``model_int8.onnx``, its activations calibrated on the
    texts ``calibration``: :func:`quantize_int8`) for the SentenceTransformer ``model``, beside its weights in
    ``folder``; each file is written to a temporary name and renamed, so a failed export leaves nothing."""
    from onnxruntime.transformers.optimizer import optimize_model

    if int8 and not calibration:
        raise OptionError("calibration", "must hold texts for int8 (its activations' scales are set on them)")
    modules = [type(m).__name__ for m in model]
    if modules not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise CeaError(
            f"ONNX export supports a Transformer followed by Pooling (and Normalize); this model "
            f"has {' -> '.join(modules)}; use --backend torch"
        )
    settings = {
        "pooling": _pooling_mode(model[1].get_config_dict()),
        "normalize": modules[-1] == "Normalize",
        "dim": int(model.get_embedding_dimension()),
        "max_seq_length": int(model.max_seq_length or 512),
        "lower_case": bool(getattr(model[0], "do_lower_case", False)),
    }
    body = model[0].auto_model.eval()
    example = model[0].tokenize(["an example sentence", "and another, longer example sentence"])
    names = [name for name in INPUTS if name in example]  # no token types for e.g. MPNet or RoBERTa

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body

        def forward(self, *tensors):
            return self.body(**dict(zip(names, tensors))).last_hidden_state

    target = Path(folder) / "onnx"
    target.mkdir(parents=True, exist_ok=True)
    args = tuple(example[name].to(body.device) for name in names)  # traced on the model's own device
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    written = {}
    with tempfile.TemporaryDirectory(dir=target) as tmp, quiet_export():
        raw = Path(tmp) / "raw.onnx"
        with torch.no_grad():
            torch.onnx.export(
                LastHidden(),
                args,
                str(raw),
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=opset,
                dynamo=False,
            )
        fp32 = Path(tmp) / "model.onnx"
        heads, hidden = getattr(body.config, "num_attention_heads", 0), getattr(body.config, "hidden_size", 0)
        optimize_model(
            str(raw), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1
        ).save_model_to_file(str(fp32))  # opt_level 1: fusions that run on any CPU provider
        written["fp32"] = fp32.replace(target / "model.onnx")  # renamed into place
        if int8:
            q = Path(tmp) / "model_int8.onnx"
            quantize_int8(raw, q, model, calibration)
            written["int8"] = q.replace(target / "model_int8.onnx")
        write_json(Path(folder) / SETTINGS, settings)
    return written


# static int8: the texts its activations' ranges are read on (evenly spaced over those given), in passes of this many
CALIBRATION_TEXTS, CALIBRATION_BATCH = 256, 16


def quantize_int8(raw: Path, target: Path, model, calibration: list[str]) -> None:
    """Quantise the unfused export ``raw`` into ``target`` statically: the weights of its matrix products per channel
    (int8), their inputs by scales fixed from the activations' ranges (min and max) on :data:`CALIBRATION_TEXTS` of
    the texts ``calibration``, tokenised by ``model`` and padded as batches are. So an embedding does not depend on
    the texts beside it (ONNX Runtime's dynamic quantisation scales each product's input over the whole batch).

    Two choices, measured on all-MiniLM-L6-v2 (banking77, one thread, 2-core AMD EPYC): the feed-forward's down
    projections (their weight wider in than out) stay fp32, as the GELU before them has a long tail that one
    static scale clips (all products int8: cosine 0.948 to fp32 on average, these kept: 0.995, dynamic's 0.994);
    and the graph is the unfused one, as ONNX Runtime's quantiser fails on the fused attention's operators."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    graph = onnx.load(str(raw), load_external_data=False).graph
    weights = {w.name: w.dims for w in graph.initializer}
    products = []
    for node in graph.node:
        weight = next((weights[i] for i in node.input if i in weights), None)
        if node.op_type == "MatMul" and weight is not None and len(weight) == 2 and weight[0] <= weight[1]:
            products.append(node.name)  # not a down projection (rows in > columns out)
    quantize_static(
        str(raw),
        str(target),
        _Calibration(model, calibration, [i.name for i in graph.input]),
        quant_format=QuantFormat.QOperator,
        op_types_to_quantize=["MatMul"],  # and only their tensors' ranges calibrated
        nodes_to_quantize=products,
        per_channel=True,
        weight_type=QuantType.QInt8,
        activation_type=QuantType.QUInt8,
        calibrate_method=CalibrationMethod.MinMax,
    )


class _Calibration:
    """The batches :func:`quantize_int8` reads activations on, as ONNX Runtime's ``CalibrationDataReader`` (its
    ``get_next``): evenly spaced texts, tokenised by the model, each batch padded to its longest."""

    def __init__(self, model, texts: list[str], names: list[str]):
        step = max(1, len(texts) // CALIBRATION_TEXTS)
        chosen = list(texts)[::step][:CALIBRATION_TEXTS]
        self.batches = [chosen[i : i + CALIBRATION_BATCH] for i in range(0, len(chosen), CALIBRATION_BATCH)]
        self.model, self.names = model, names

    def get_next(self) -> dict[str, np.ndarray] | None:
        if not self.batches:
            return None
        features = self.model[0].tokenize(self.batches.pop(0))
        return {name: features[name].cpu().numpy().astype(np.int64) for name in self.names}


class OnnxEncoder:
    """Encode like a SentenceTransformer (cea's arguments to its ``encode``) from what :func:`export_onnx` wrote into
    ``folder``; ONNX Runtime runs ``threads`` threads (default: as many as torch)."""

    def __init__(self, folder: str | Path, precision: str = "fp32", threads: int | None = None):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        if precision not in FILES:
            raise CeaError(f"unknown ONNX precision {precision!r}; use fp32 or int8")
        self.folder, self.precision = Path(folder), precision
        path = self.folder / FILES[precision]
        if not path.exists():
            raise CeaError(f"{path} is missing; export it with cea.encoders.onnx.export_onnx or rebuild the bundle")
        settings = self.folder / SETTINGS
        if not settings.exists():
            raise CeaError(f"{settings} is missing; export the model again with export_onnx")
        settings = json.loads(settings.read_text())
        self.pooling, self.dim, self.normalize = settings["pooling"], settings["dim"], settings["normalize"]
        self.max_seq_length, self.lower_case = settings["max_seq_length"], settings["lower_case"]
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
        self.pad_id = self.tokenizer.pad_token_id or 0
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads() if threads is None else threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    cuts_passes = True  # encode takes ``overhead``: cea.encoders.embeddings.encode leaves the passes to it

    def get_embedding_dimension(self) -> int:
        return self.dim

    def encode(
        self,
        texts: list[str],
        batch_size: int = 64,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        overhead: float | None = None,
        tokens: int | None = None,
        **_,
    ) -> np.ndarray:
        """Pooled embeddings of ``texts``, in input order, tokenised once and cut into passes of at most ``batch_size``
        texts and ``tokens`` tokens as padded (default :data:`cea.encoders.device.ENCODE_TOKENS`: length-sorted runs,
        :func:`cea.encoders.embeddings.token_passes`, or with ``overhead`` those that cost least,
        :func:`cea.encoders.embeddings.least_cost_passes`); pooled in NumPy: a torch op between two ONNX Runtime runs
        leaves torch's threads spinning on ONNX Runtime's cores."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        cleaned = [str(t).strip() for t in texts]  # as sentence-transformers
        cleaned = [t.lower() for t in cleaned] if self.lower_case else cleaned
        ids = self.tokenizer(
            cleaned,
            truncation="longest_first",
            max_length=self.max_seq_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        passes = cut_passes(lengths, batch_size, tokens or ENCODE_TOKENS["onnx"], overhead)
        if show_progress_bar:
            from tqdm.auto import tqdm

            passes = tqdm(passes, desc="encode (onnx)", unit="batch", leave=False)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for rows in passes:
            width = int(lengths[rows].max())
            batch = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            for i, r in enumerate(rows):
                batch[i, : lengths[r]] = ids[r]
            mask = (np.arange(width) < lengths[rows, None]).astype(np.int64)
            given = {"input_ids": batch, "attention_mask": mask, "token_type_ids": np.zeros_like(batch)}
            hidden = self.session.run(["last_hidden_state"], {name: given[name] for name in self.inputs})[0]
            out[rows] = pool_numpy(hidden, mask, self.pooling)
        if self.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out


def pool_numpy(hidden: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """:func:`cea.encoders.embeddings._pool` in NumPy, float32 (torch between ONNX Runtime runs slows them)."""
    if pooling == "cls":
        return hidden[:, 0].astype(np.float32, copy=False)
    keep = mask[:, :, None].astype(hidden.dtype)
    if pooling == "max":
        return np.where(keep > 0, hidden, np.float32(-1e9)).max(1).astype(np.float32, copy=False)
    return ((hidden * keep).sum(1) / np.maximum(keep.sum(1), 1e-9)).astype(np.float32, copy=False)


def _pooling_mode(config: dict) -> str:
    """mean, cls or max from a Pooling config (``pooling_mode`` in sentence-transformers 6, flags before)."""
    mode = config.get("pooling_mode")
    if mode is None:
        mode = [
            m
            for m in (
                "cls_token",
                "mean_tokens",
                "max_tokens",
                "mean_sqrt_len_tokens",
                "weightedmean_tokens",
                "lasttoken",
            )
            if config.get(f"pooling_mode_{m}")
        ]
    modes = [mode] if isinstance(mode, str) else list(mode)
    modes = [{"cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max"}.get(m, m) for m in modes]
    if len(modes) != 1 or modes[0] not in ("mean", "cls", "max"):
        raise CeaError(
            f"ONNX encoding supports one of mean, cls or max pooling, not {'+'.join(modes) or 'none'}; "
            "use --backend torch"
        )
    return modes[0]
