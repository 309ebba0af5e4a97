"""``cea serve`` as Label Studio's ML backend, under ``/label-studio`` (the backend URL to connect:
``http://HOST:PORT/label-studio``): Label Studio pre-annotates its tasks with the bundle's answers, orders them for
uncertainty sampling by their score, and tells the bundle of each annotation, which it takes at once as an example.

    GET  /label-studio/health   -> {"status": "UP", "model_class": "cea", "model_version"}
    POST /label-studio/setup    {"project", "schema": label config, ...} -> {"model_version"}; 422 naming what the
                                config lacks (no Text tag, no Choices tag on it, no choice a bundle of labels knows)
    POST /label-studio/predict  {"tasks": [{"id", "data": {FIELD: text}}], "label_config"} -> {"results": [one per
                                task, in order: {"result": [{from_name, to_name, "type": "choices", "value":
                                {"choices": [...]}}], "score", "model_version"}]}
    POST /label-studio/job_status {"job"} -> {"job_status": started, finished or failed, "model_version"}: a
                                background fit that START_TRAINING started (410: not one of this process's); once
                                it ended, its ``outcome`` (swapped, kept, failed), ``why`` and the judge's figures
    POST /label-studio/webhook  {"action", ...}: ANNOTATION_CREATED / ANNOTATIONS_CREATED / ANNOTATION_UPDATED set
                                the annotation's text and choices as the bundle's examples of that annotation,
                                ANNOTATIONS_DELETED removes them, START_TRAINING starts the head's refit and a
                                background fit (its ``job``, :mod:`cea.service.fine_tuning`); any other action is
                                acknowledged and ignored

What it answers
    A prediction's ``score`` orders tasks to label, lowest first: the measure ``cea suggest`` ranks by before
    density (:func:`cea.labelling.suggest.unsure`: the margin between the two likeliest classes, less where the
    bundle answers ``unknown``), scaled into [0, 1]. "None of these" (``unknown``) is no choice and a score a third
    lower than the same margin answered; a multi-label bundle chooses every label above its threshold, and its
    score is the least sure label's. A task without the text field gets an empty result; a text past the service's
    ``max_chars`` is cut there (the encoder sees fewer tokens anyway).

Where it starts
    From any bundle, an empty one too (``cea bundle MODEL -o BUNDLE``, no data set: a new project). The label config
    (of ``setup``, ``predict`` and the webhook) names the labels: each choice of the served tag that the bundle does
    not hold becomes a label, its first examples its name's words (``lost_card`` -> "lost card"), its ``hint`` and its
    ``alias`` (:meth:`cea.bundle.Bundle.name_labels`), marked ``label-name:CHOICE`` so that they never count as
    annotations. A choice whose name is a code and has neither waits for its first annotation. An empty bundle whose
    config gives it no example answers each task with an empty result.

How it learns
    Each annotation's examples carry its key (``label-studio:PROJECT:ANNOTATION``) in the bundle's store
    (:meth:`cea.bundle.Bundle.set_examples`): an update replaces them in one durable change, a replayed webhook
    changes nothing, a deletion finds them by key, in every replica. ``model_version`` is the bundle's
    :attr:`~cea.bundle.Bundle.version`, which changes with every change of its examples and with every encoder a
    background fit swaps in, so that Label Studio fetches a fresh prediction for the tasks it holds one of an older
    version. As annotations double (and on START_TRAINING), ``cea fit`` runs in the background on them, and its
    encoder serves where it is better on annotations held back from it (:mod:`cea.service.fine_tuning`).

What it expects
    Label Studio 1.23's requests (``label_studio/ml/api_connector.py``); the webhook's payload (Label Studio's ML
    backend webhook sends it). The webhook changes the bundle: with ``--token``, Label Studio must send
    ``Authorization: Bearer TOKEN`` (the webhook's headers) or basic auth whose password is the token.

Why written here
    label-studio-ml-backend is a Flask server of its own around a model that retrains to learn; a bundle learns an
    example in milliseconds, inside the service that already answers its predictions.
"""

# no ``from __future__ import annotations`` here: FastAPI reads the request models from the live annotations
import asyncio
import contextlib
import logging

import numpy as np
from fastapi import APIRouter, Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBasic, HTTPBasicCredentials, HTTPBearer

from ..bundle import AddRequest, PredictRequest
from ..bundle.bundle import PREDICT_PASS, Bundle
from ..errors import CeaError
from ..labelling.label_studio import Config, choices_result, read_config
from ..labelling.suggest import MOST_UNSURE, doubt, unsure
from . import contract
from .contract import BODY, answers
from .queues import Queues

PREFIX = "/label-studio"
LEARNS = ("ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED")
log = logging.getLogger("cea.serve")


# what a fit's outcome tells Label Studio in its job status (cea.service.fine_tuning.BackgroundFit.last)
OUTCOME = (
    "outcome",
    "why",
    "decided_by",
    "live_accuracy",
    "fitted_accuracy",
    "live_log_probability",
    "fitted_log_probability",
)


def outcome_of(last: dict | None) -> dict:
    """The parts of a fit's outcome ``last`` (None: still running) that its job status carries."""
    return {} if last is None else {key: last[key] for key in OUTCOME if key in last}


def refused(exc: CeaError, status: int = 422) -> HTTPException:
    """A CeaError as the HTTP answer, written to the service's log too (Label Studio shows the status only)."""
    log.warning("label studio: %s", exc)
    return HTTPException(status_code=status, detail=str(exc))


async def config_of(schema, bundle: Bundle) -> Config:
    """The project's ``Choices`` tag that the bundle serves; its choices new to the bundle first become its labels,
    their names and hints their first examples (:meth:`cea.bundle.Bundle.name_labels`: a new project starts from an
    empty bundle and its label config)."""
    try:
        known = set(bundle.label_counts)
        config = read_config(schema, known)
    except CeaError as exc:
        raise refused(exc) from None
    new = {label: texts for label, texts in config.examples.items() if texts and label not in known}
    if new:
        named = await asyncio.to_thread(bundle.name_labels, new)
        if named:
            log.info(
                "label studio: %d new label(s) from the label config, their names their first examples: %s",
                len(named),
                ", ".join(named[:5]) + (", ..." if len(named) > 5 else ""),
            )
    return config


def scores(bundle: Bundle, vectors: np.ndarray, found: list) -> np.ndarray:
    """Each prediction's score for Label Studio, low = label first (module docstring)."""
    if bundle.multi_label:  # the least sure label chosen; none chosen: 0
        return np.array([min((x["score"] for x in p.labels), default=0.0) for p in found])
    _, margin, disagree, unknown = doubt(bundle.serving_head(), vectors, found)
    return 1 - unsure(margin, disagree, unknown) / MOST_UNSURE


def authorised(token: str) -> Depends:
    """A dependency: the request carries ``token``, as a bearer or as basic auth's password (the document names both
    schemes)."""
    bearer = HTTPBearer(auto_error=False, description="the token cea serve was started with")
    basic = HTTPBasic(
        auto_error=False, description="any user, the token as the password (Label Studio's ML backend settings)"
    )

    async def check(
        as_bearer: HTTPAuthorizationCredentials | None = Depends(bearer),
        as_basic: HTTPBasicCredentials | None = Depends(basic),
    ):
        if (as_bearer is None or as_bearer.credentials != token) and (as_basic is None or as_basic.password != token):
            raise HTTPException(
                status_code=401,
                detail="the webhook changes the bundle: send Authorization: Bearer "
                "TOKEN (the webhook's headers) or basic auth with the token as its password",
            )

    return Depends(check)


def router(bundle: Bundle, queues: Queues, token: str | None, max_chars: int, trainer=None) -> APIRouter:
    """The routes above, under :data:`PREFIX`; ``trainer``: the background fits
    (:class:`cea.service.fine_tuning.BackgroundFit`; None: START_TRAINING refits the head only)."""
    api = APIRouter(prefix=PREFIX)
    guard, locked = ([authorised(token)], (401,)) if token is not None else ([], ())

    @api.get("/health", responses=answers(contract.StudioHealth))
    def health():
        return {"status": "UP", "model_class": "cea", "model_version": bundle.version}

    @api.post("/setup", responses=answers(contract.Version, *BODY))
    async def setup(body: contract.Setup):
        config = await config_of(body.schema_, bundle)
        log.info("label studio: serving Choices %r on $%s", config.name, config.field)
        return {"model_version": bundle.version}

    @api.post("/predict", responses=answers(contract.Results, *BODY))
    async def predict(body: contract.Tasks):
        config = await config_of(body.label_config, bundle)
        version = bundle.version
        results = await _predicted(bundle, queues, config, body.tasks, max_chars, version)
        return {"results": results, "model_version": version}

    @api.post("/job_status", responses=answers(contract.JobStatus, *BODY, 410))
    async def job_status(body: contract.Job):  # Label Studio asks after the fit START_TRAINING started
        status = trainer.job_status(str(body.job)) if trainer is not None else None
        if status is None:
            raise HTTPException(status_code=410, detail=f"no fit {body.job!r} here")
        ended = trainer.last if status != "started" else None  # the job asked after is the last one
        return {"job_status": status, "model_version": bundle.version, **outcome_of(ended)}

    @api.post("/webhook", dependencies=guard, responses=answers(contract.Acknowledged, *BODY, 404, *locked))
    async def webhook(event: contract.Event):
        body, action = event.model_dump(), event.action  # Label Studio's payload, the fields cea reads as a dict's
        if action == "START_TRAINING":
            return await _start_training(bundle, trainer, action)
        if action not in LEARNS and action != "ANNOTATIONS_DELETED":
            return {"status": "ignored", "action": action}
        project = body.get("project") if isinstance(body.get("project"), dict) else {}
        if action == "ANNOTATIONS_DELETED":
            return await _forget(bundle, project, body, action)
        config = await config_of(project.get("label_config"), bundle)
        learned = [
            await _learn(bundle, queues, config, project.get("id", task.get("project")), annotation, task, max_chars)
            for annotation, task in _pairs(body, action)
        ]
        if trainer is not None:  # as the annotations double, a fit in the background
            await asyncio.to_thread(trainer.changed)
        return {"status": "ok", "action": action, "examples": learned, "model_version": bundle.version}

    return api


async def _predicted(
    bundle: Bundle, queues: Queues, config: Config, tasks: list, max_chars: int, version: str
) -> list[dict]:
    """Each task's result, choices and score, in order (no text, or an empty bundle: an empty result)."""
    texts = [_field(task, config.field) for task in tasks]
    asked = [i for i, text in enumerate(texts) if isinstance(text, str) and text.strip()] if len(bundle) else []
    results = [{"result": [], "model_version": version} for _ in tasks]
    for start in range(0, len(asked), PREDICT_PASS):  # a pass at a time: other requests' batches go between
        part = asked[start : start + PREDICT_PASS]
        found = await queues.predict(PredictRequest([texts[i][:max_chars] for i in part]))
        score = await asyncio.to_thread(scores, bundle, found.vectors, found.predictions)
        for i, p, s in zip(part, found.predictions, score):
            labels = [x["label"] for x in p.labels] if p.labels is not None else [] if p.closest else [p.label]
            results[i] = {
                "result": choices_result(config, labels),
                "score": round(float(s), 6),
                "model_version": version,
            }
    return results


async def _start_training(bundle: Bundle, trainer, action: str) -> dict:
    """START_TRAINING's answer: the head refitted, and a background fit started where one can be (its ``job``)."""
    await asyncio.to_thread(bundle.serving_head)
    started = trainer is not None and await asyncio.to_thread(trainer.start)
    return {
        "status": "ok",
        "action": action,
        **({"job": trainer.job} if started else {}),
        "fit": "started"
        if started
        else "not run here (cea serve --no-train)"
        if trainer is None
        else "one runs already",
    }


async def _forget(bundle: Bundle, project: dict, body: dict, action: str) -> dict:
    """ANNOTATIONS_DELETED's answer: the deleted annotations' examples removed (404 where it held none of them)."""
    try:
        keys = [_key(project.get("id"), a["id"]) for a in body["annotations"]]
    except (KeyError, TypeError):
        raise refused(CeaError('ANNOTATIONS_DELETED needs "annotations": [{"id"}] and the project')) from None
    removed, unknown = await asyncio.to_thread(bundle.remove_sources, keys)
    if not removed:
        raise refused(
            CeaError(
                f"no examples of annotation(s) {', '.join(k.rsplit(':', 1)[1] for k in unknown)}"
                " in this bundle; nothing removed (they were never learned here)"
            ),
            404,
        )
    return {"status": "ok", "action": action, "removed": len(removed), "unknown": len(unknown)}


def _field(task: dict, field: str):
    """The task's text in ``field`` of its data (None: it has none)."""
    data = task.get("data")
    return data.get(field) if isinstance(data, dict) else None


def _key(project, annotation) -> str:
    if project is None or annotation is None:
        raise KeyError("id")
    return f"label-studio:{project}:{annotation}"


def _pairs(body: dict, action: str) -> list[tuple[dict, dict]]:
    """Each annotation of the webhook with its task."""
    with contextlib.suppress(KeyError, TypeError):  # a malformed payload: refused below, as one without them
        if action == "ANNOTATIONS_CREATED":  # a bulk: lists of annotations and of their tasks
            tasks = {t["id"]: t for t in body["task"]} if isinstance(body.get("task"), list) else {}
            return [(a, tasks[a["task"]]) for a in body["annotation"]]
        if isinstance(body.get("annotation"), dict) and isinstance(body.get("task"), dict):
            return [(body["annotation"], body["task"])]
    raise refused(CeaError(f'{action} needs "annotation" and "task" (turn on the webhook\'s payload)'))


async def _learn(
    bundle: Bundle, queues: Queues, config: Config, project, annotation: dict, task: dict, max_chars: int
) -> dict:
    """The annotation's text and choices set as its examples (a skipped annotation or one of no choice: none)."""
    try:
        key = _key(project, annotation["id"])
    except (KeyError, TypeError):
        raise refused(CeaError("an annotation without an id or project; send Label Studio's webhook payload")) from None
    text = (task.get("data") or {}).get(config.field)
    labels = [] if annotation.get("was_cancelled") else config.labels(annotation.get("result"))
    if not labels or not isinstance(text, str) or not text.strip():  # nothing to learn: its earlier examples go
        removed, _ = await asyncio.to_thread(bundle.remove_sources, [key])
        return {"annotation": annotation["id"], "ids": [], "removed": bool(removed)}
    if not bundle.multi_label and len(labels) > 1:
        raise refused(
            CeaError(
                f"annotation {annotation['id']} chose {len(labels)} labels but the bundle holds one "
                'label a text; make the Choices tag choice="single" or serve a multi-label bundle'
            )
        )
    text = text[:max_chars]
    encoded = await queues.encoded(AddRequest([text], [labels if bundle.multi_label else labels[0]]))
    try:
        ids = await asyncio.to_thread(
            bundle.set_examples, key, encoded.texts, encoded.labels, encoded.vectors, encoded.version
        )
    except CeaError as exc:
        raise refused(exc) from None
    return {"annotation": annotation["id"], "ids": ids or [], "changed": ids is not None}
