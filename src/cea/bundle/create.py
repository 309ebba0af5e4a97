"""Writing a new bundle folder: the options checked, the references encoded (PyTorch or ONNX), the index built, the
classifier fitted and its thresholds set on held-out references (:class:`cea.knn.decision.Classifier`), generation 0 and
the manifest written (:mod:`cea.bundle.layout`). :meth:`cea.bundle.Bundle.create` calls it, then opens the folder."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.label_names import name_examples, with_label_names
from ..encoders import load_encoder, model_fingerprint
from ..encoders.build import is_static
from ..encoders.device import resolve_precision, to_precision
from ..encoders.onnx import FILES, OnnxEncoder, export_onnx
from ..errors import CeaError, OptionError
from ..knn import build_index, normalize
from ..knn.decision import Classifier
from ..knn.head import LinearHead
from ..paths import atomic_path, write_json
from ..progress import no_loading_bars
from ..reports.card import write_bundle_card
from .examples import NAMED, check_texts, encode, is_label_set, normalise_labels
from .layout import FORMAT, FORMAT_VERSION, WAL, checksums, write_generation
from .postgres import PostgresStore, connect, table_name

BACKENDS = {"torch": None, "onnx": "fp32", "onnx-int8": "int8"}  # backend -> ONNX precision
# backend "auto": int8 ONNX where it encodes faster than PyTorch and its held-out accuracy is at most AUTO_TOLERANCE
# points below; judged from AUTO_MIN references up (fewer hold out too few texts to tell 0.3 point), on the CPU only
AUTO_TOLERANCE, AUTO_MIN = 0.3, 1000


def write_bundle(
    output: str | Path,
    model: str,
    texts: list[str],
    labels: list,
    classifier: Classifier | None = None,
    unknown_rate: float | None = None,
    batch_size: int | None = None,
    progress: bool = True,
    index: str = "auto",
    index_params: dict | None = None,
    backend: str = "auto",
    device: str | None = None,
    precision: str = "fp32",
    store: str | None = None,
    label_names: str = "off",
    embeddings: np.ndarray | None = None,
    encoder=None,
) -> None:
    """Encode ``texts`` with ``model`` and write a new bundle folder (refused if it exists): the options are checked
    before anything is loaded, and the folder appears whole or not at all (:class:`cea.bundle.Bundle` opens it).

    ``device`` and ``precision`` (:mod:`cea.encoders.device`): where and how the references are
    encoded; the bundle keeps fp32 weights and embeddings, and loads on any device.

    ``backend``: run the encoder with PyTorch, or exported to ONNX (``onnx``, fp32) and quantised (``onnx-int8``)
    for faster CPU inference; references and queries are encoded by the same backend. ``auto`` (the default)
    measures both on the references (:func:`choose_backend`) and keeps int8 where it is faster and loses at most
    0.3 point of held-out accuracy; the manifest's ``backend_choice`` says what was measured.

    ``classifier`` (:class:`cea.knn.decision.Classifier`; default: a linear head, k = 5): a logistic regression on the
    references refitted after changes (``linear``, mixed with the kNN vote by ``knn_share``) or the vote of the ``k``
    nearest references (``knn``); either way a prediction lists its ``k`` nearest references. ``labels`` may be label
    sets (lists of names): the bundle is then multi-label, a text getting every label whose probability (or share)
    reaches a threshold chosen on held-out references (:meth:`cea.knn.decision.Classifier.with_label_threshold`).

    ``unknown_rate`` or the classifier's ``unknown_threshold``: answer ``unknown`` below a threshold of evidence,
    given or calibrated to turn away that share of held-out references (:meth:`cea.knn.decision.Classifier.calibrate`);
    default: never.

    ``index``: exact search, or a FAISS flat, HNSW or IVF index (``auto``: exact up to :data:`cea.knn.index.EXACT_MAX`
    references); an approximate index's recall@k against exact search is measured now and kept in the manifest.

    ``label_names`` (single-label bundles; ``cea bundle``'s default is ``auto``): add each label's name as one more
    example of it where names are words (:mod:`cea.data.label_names`: ``auto``, ``on`` or ``off``), as ``cea train``
    adds them to its training data and references; the manifest keeps the decision (``on`` or ``off``) for labels
    added later (:meth:`cea.bundle.Bundle.add`).

    ``store``: where the reference examples live; None keeps them in the folder (generations and a log), a
    PostgreSQL connection string (``postgresql://USER@HOST:PORT/DB``, no password in it) in tables of that database
    named after the folder (:mod:`cea.bundle.postgres`), which several service processes can share.

    ``embeddings``: the rows of ``texts`` already encoded by ``model`` (``cea fit`` hands over what its probe, its
    training run or its int8 candidate computed): they are not encoded again, only the label-name examples added here
    are. The references must come from the backend that encodes queries: PyTorch (``auto``), or ONNX where its
    export lies beside ``model`` (``model/onnx``, :func:`cea.encoders.onnx.export_onnx`), copied into the bundle;
    ``encoder``: ``model`` loaded before (``cea fit`` hands over the encoder it judged), used instead of loading it.
    """
    from ..evaluation.provenance import versions  # inside: cea.evaluation loads sklearn.metrics, 0.1 s a bundle opened

    output = Path(output)
    if output.exists() and any(output.iterdir()):
        raise CeaError(f"{output} already exists and is not empty; choose another -o or remove it")
    given_rows = len(texts)  # the rows after them are label names' examples (label_names)
    texts, labels, classifier, given, label_names = _checked(
        texts, labels, classifier, embeddings, backend, unknown_rate, store, label_names, model
    )
    sources = [None] * given_rows + [NAMED + label for label in labels[given_rows:]]
    multi = classifier.multi_label
    encoder = load_encoder(model, device=device) if encoder is None else encoder
    with atomic_path(output) as tmp:  # the folder appears whole or not at all
        with no_loading_bars():
            encoder.save(str(tmp / "encoder"))
        fingerprint = model_fingerprint(encoder)
        backend, embeddings, choice = _references(
            encoder, tmp / "encoder", texts, labels, classifier, given, backend, batch_size, progress, precision, model
        )
        vector_index, info = build_index(embeddings, index, index_params, k=classifier.k)
        if multi and classifier.label_threshold is None:  # given: chosen on dev (cea fit)
            classifier = classifier.with_label_threshold(embeddings, labels)
        head = _head(classifier, model, embeddings, labels)
        if unknown_rate is not None:
            classifier = classifier.calibrate(embeddings, labels, unknown_rate, head=head)
        ids, stored = np.arange(len(texts), dtype=np.int64), [list(x) for x in labels] if multi else labels
        if store is None:
            write_generation(tmp / "gen-0", embeddings, ids, stored, list(texts), vector_index, head, sources)
            where = {"kind": "folder"}
        else:
            where = {"kind": "postgresql", "url": store, "table": table_name(output)}
            PostgresStore.create(store, where["table"], embeddings, ids, stored, list(texts), sources)
        write_json(
            tmp / "manifest.json",
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "generation": 0,
                **classifier.manifest(),
                "label_names": "off" if multi else label_names,
                "unknown": classifier.unknown_manifest(unknown_rate),
                "index": info,
                "store": where,
                "next_id": len(texts),
                "backend": backend,
                "backend_choice": choice,
                "dim": int(embeddings.shape[1]),
                "model": model,
                "model_fingerprint": fingerprint,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "versions": versions(),
                "files": checksums(tmp, ["encoder"] + (["gen-0"] if store is None else [])),
            },
        )
        write_bundle_card(tmp, Path(output).name)
        if store is None:
            (tmp / WAL).touch()


def _checked(texts, labels, classifier, embeddings, backend, unknown_rate, store, label_names, model):
    """:func:`write_bundle`'s options checked before anything is loaded: the texts and labels (label names added
    where asked), the classifier (multi-label where the labels are sets; a trained head saved beside ``model``), the
    embeddings given, and the label-name decision the manifest keeps."""
    if len(texts) != len(labels):
        raise CeaError(f"a bundle needs a label for each text; got {len(texts)} texts and {len(labels)} labels")
    empty = len(texts) == 0  # a bundle to start a labelling project from: its labels come later, with their names
    check_texts(texts)
    classifier = Classifier() if classifier is None else classifier
    given = _checked_embeddings(embeddings, len(texts), backend, model)
    if backend not in BACKENDS and backend != "auto":
        raise CeaError(f"unknown backend {backend!r}; use auto or one of {', '.join(BACKENDS)}")
    multi = any(is_label_set(x) for x in labels)
    classifier = classifier.replace(multi_label=multi)
    labels = normalise_labels(labels, multi)
    if not multi:
        named = with_label_names(pd.DataFrame({"text": list(texts), "label": labels}), label_names)
        texts, labels = list(named["text"]), list(named["label"])
        # the decision (auto: most names are words; an empty bundle, whose labels come later: names that are words)
        # is kept: labels added later get their name the same way
        label_names = (
            "on" if label_names == "on" or (label_names == "auto" and (empty or len(name_examples(labels)))) else "off"
        )
    if empty and unknown_rate is not None:
        raise OptionError(
            "unknown_rate",
            "needs examples to calibrate on; an empty bundle answers unknown only with unknown_threshold",
        )
    if classifier.kind == "linear" and not multi and not empty and len(set(labels)) < 2:
        raise OptionError("classifier", "linear needs examples of at least two labels; add some or use knn")
    if classifier.head == "trained" and (multi or LinearHead.beside(model) is None):
        raise OptionError(
            "classifier",
            "with head='trained' needs one label per text and the head a training run "
            f"saved beside the encoder ({model}/head.npz); use head='fit'",
            cli=f"--head trained needs one label per text and the head cea train saved beside the "
            f"model ({model}/head.npz); use --head fit",
        )
    if unknown_rate is not None and classifier.unknown_threshold is not None:
        raise OptionError(
            "unknown_rate",
            "and unknown_threshold both set the threshold; give one",
            cli="--unknown-rate and --unknown-threshold both set the threshold; give one",
        )
    if unknown_rate is not None and not 0 < unknown_rate < 1:
        raise OptionError("unknown_rate", f"must lie between 0 and 1, got {unknown_rate}")
    if store is not None and not store.startswith(("postgresql://", "postgres://")):
        raise OptionError(
            "store",
            f"{store!r} is not a PostgreSQL connection string; pass "
            "postgresql://USER@HOST:PORT/DATABASE, or leave it out to keep the examples in the folder",
        )
    if store is not None:
        connect(store).close()  # unreachable or without pgvector: said now, before encoding
    return texts, labels, classifier, given, label_names


def _checked_embeddings(embeddings, rows: int, backend: str, model):
    """The embeddings given as float32 (None: none), checked: a row per text, an ONNX backend's export beside it."""
    if embeddings is None:
        return None
    given = np.asarray(embeddings, dtype=np.float32)
    if given.ndim != 2 or len(given) != rows:
        raise OptionError("embeddings", f"must hold one row per text ({rows}), got shape {given.shape}")
    if BACKENDS.get(backend) and not (Path(model) / FILES[BACKENDS[backend]]).exists():
        raise OptionError(
            "embeddings",
            f"for backend {backend} come from the export beside the model "
            f"({Path(model) / FILES[BACKENDS[backend]]}, export_onnx), which is missing: export it "
            "there, or leave them out",
        )
    return given


def _head(classifier: Classifier, model, embeddings: np.ndarray, labels):
    """The bundle's head: fitted on the references, or the one trained beside ``model`` (refitted from it where the
    references hold labels it has not seen); None for a kNN classifier."""
    if classifier.head != "trained":
        return classifier.fit(embeddings, labels)
    head = LinearHead.beside(model)
    if set(map(str, labels)) - set(head.classes.tolist()):
        head = classifier.fit(embeddings, labels, previous=head)
    return head


def _references(
    encoder, folder: Path, texts, labels, classifier, given, backend, batch_size, progress, precision, model
):
    """The references' embeddings by the backend that will encode queries (saved beside the encoder in ``folder``
    where it is ONNX): ``(backend, embeddings, what choosing it measured)``."""
    if given is not None:  # encoded already: only the rows added since (label names)
        backend = "torch" if backend == "auto" else backend
        if BACKENDS[backend]:  # by the export beside the model: it comes along
            shutil.copytree(Path(model) / "onnx", folder / "onnx", dirs_exist_ok=True)
        extra = texts[len(given) :]
        by = OnnxEncoder(folder, BACKENDS[backend]) if BACKENDS[backend] else in_precision(encoder, precision)
        embeddings = np.vstack([normalize(given)] + ([encode(by, extra, batch_size)] if extra else []))
        return backend, embeddings, {"chosen": backend, "reason": "references encoded before: not measured"}
    if backend == "auto":
        return choose_backend(encoder, folder, texts, labels, classifier, batch_size, progress, precision)
    if BACKENDS[backend] and is_static(encoder):
        raise CeaError(f"a static encoder has no transformer to export to ONNX; leave out --backend {backend}")
    if BACKENDS[backend]:  # exported from the fp32 weights; ONNX Runtime then encodes on the CPU
        export_onnx(encoder, folder, int8=backend == "onnx-int8", calibration=texts)
        return backend, encode(OnnxEncoder(folder, BACKENDS[backend]), texts, batch_size, progress), None
    return backend, encode(in_precision(encoder, precision), texts, batch_size, progress), None


def in_precision(encoder, precision: str):
    """``encoder`` in ``precision`` where its device runs it (:func:`cea.encoders.device.resolve_precision`)."""
    return to_precision(encoder, resolve_precision(precision, str(encoder.device)))


def choose_backend(
    encoder,
    folder: Path,
    texts: list[str],
    labels: list,
    classifier: Classifier,
    batch_size: int,
    progress: bool,
    precision: str,
) -> tuple[str, np.ndarray, dict]:
    """``backend="auto"``: the references encoded by PyTorch and by the int8 ONNX export of ``encoder`` (written into
    ``folder``), each timed; int8 is kept where it encoded faster and the bundle's classifier, fitted on four fifths
    of the references, classifies the held-out fifth at most :data:`AUTO_TOLERANCE` points worse than with PyTorch's
    embeddings (both sides encoded by the same backend, as the bundle serves). PyTorch stays, unmeasured, for
    multi-label references, fewer than :data:`AUTO_MIN`, or an encoder on a GPU. Returns the backend, its embeddings
    and what was measured (the manifest's ``backend_choice``)."""
    started = time.perf_counter()
    embeddings = encode(in_precision(encoder, precision), texts, batch_size, progress)
    rate = len(texts) / (time.perf_counter() - started)
    multi = any(isinstance(label, tuple) for label in labels)
    if multi or len(texts) < AUTO_MIN or str(encoder.device) != "cpu" or is_static(encoder):
        reason = (
            "multi-label references"
            if multi
            else f"fewer than {AUTO_MIN} references"
            if len(texts) < AUTO_MIN
            else "a static encoder (nothing to export)"
            if is_static(encoder)
            else f"the encoder runs on {encoder.device}"
        )
        return "torch", embeddings, {"chosen": "torch", "reason": f"{reason}: not measured"}
    export_onnx(encoder, folder, int8=True, calibration=texts)
    started = time.perf_counter()
    quantised = encode(OnnxEncoder(folder, "int8"), texts, batch_size, progress)
    int8_rate = len(texts) / (time.perf_counter() - started)
    judge = classifier.replace(head="fit")  # the two encodings compared by a head fitted on each
    torch_accuracy, held = judge.held_out_accuracy(embeddings, labels)
    int8_accuracy, _ = judge.held_out_accuracy(quantised, labels)
    keep = int8_rate > rate and int8_accuracy >= torch_accuracy - AUTO_TOLERANCE
    choice = {
        "chosen": "onnx-int8" if keep else "torch",
        "held_out": held,
        "tolerance_points": AUTO_TOLERANCE,
        "torch": {"texts_per_second": round(rate, 1), "held_out_accuracy": round(torch_accuracy, 2)},
        "onnx-int8": {"texts_per_second": round(int8_rate, 1), "held_out_accuracy": round(int8_accuracy, 2)},
    }
    choice["reason"] = (
        f"int8 encoded {int8_rate / rate:.2f}x as fast, held-out accuracy {int8_accuracy:.2f} against "
        f"{torch_accuracy:.2f}"
    )
    if keep:
        return "onnx-int8", quantised, choice
    shutil.rmtree(folder / "onnx", ignore_errors=True)  # the export is not what this bundle runs
    return "torch", embeddings, choice
