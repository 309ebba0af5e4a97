"""Label Studio (1.23), where teams label: a project's label config as cea reads it (:func:`read_config`), a
bundle's answers in Label Studio's words (:func:`choices_result`), and the REST client that puts cea's work into a
project (:class:`LabelStudio`): the texts to label next with cea's prediction, its score and group, and the rows
whose label is probably wrong with cea's label beside the given one.

What it expects
    A label config (XML) with a ``Text`` tag (``value="$field"``) and a ``Choices`` tag whose ``toName`` names it;
    a Label Studio URL and an API key in ``LABEL_STUDIO_API_KEY`` (a legacy token, sent as ``Token KEY``, or a
    personal access token, exchanged for an access token first).

What it returns
    :class:`Config` (the ``Choices`` tag served, its choices, the text field); tasks created in the project.

Why written here
    label-studio-sdk 2.1 pins opencv-python-headless, pyjwt and requests-mock, so it cannot install beside cea
    without holding other packages back; the four REST calls cea needs are made with httpx. The label config is
    read with the standard library's XML parser (expat, guarded against entity expansion).
"""

from __future__ import annotations

import dataclasses
import os
import xml.etree.ElementTree as ET

from ..data.label_names import name_text
from ..errors import CeaError

API_KEY = "LABEL_STUDIO_API_KEY"
TIMEOUT = 30.0  # seconds a request to Label Studio may take (an import of many tasks takes a few)
SAY_EVERY = 100  # tasks created between two progress lines


@dataclasses.dataclass(frozen=True)
class Config:
    """The ``Choices`` tag cea serves: ``name`` (a result's ``from_name``), ``to_name`` (the ``Text`` tag's
    name), ``field`` (the task data key of the text), its ``choices`` (each ``Choice``'s ``value``: the bundle's
    labels) and whether several may be chosen; ``aliases``: a choice's ``alias``, which Label Studio writes in results
    instead of its value; ``examples``: each choice's first examples, before any annotation (its name's words where
    they are words, its ``hint``, its alias's words: :func:`cea.data.label_names.name_text`)."""

    name: str
    to_name: str
    field: str
    choices: tuple[str, ...]
    multiple: bool
    aliases: dict[str, str] = dataclasses.field(default_factory=dict)
    examples: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def labels(self, result: list) -> list[str]:
        """The choices an annotation's or prediction's ``result`` makes in this tag (aliases read as their choice)."""
        value_of = {alias: value for value, alias in self.aliases.items()}
        return [
            value_of.get(str(c), str(c))
            for item in result or []
            if isinstance(item, dict)
            and item.get("from_name") == self.name
            and item.get("type", "choices") == "choices"
            for c in (item.get("value") or {}).get("choices", [])
        ]


def read_config(xml: str, known: set[str] | None = None) -> Config:
    """The :class:`Config` of a label config; ``known``: the bundle's labels. With several ``Choices`` tags on texts,
    the one whose choices the bundle knows most of is served (a tie, or several tags for a bundle of no label yet, is
    refused). A CeaError names what cea cannot serve: no ``Text`` tag, no ``Choices`` tag on one, or (``known`` given,
    not empty) no choice the bundle has examples of."""
    if not isinstance(xml, str) or not xml.strip():
        raise CeaError("the project has no label config; set one with a Text tag and a Choices tag in Label Studio")
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise CeaError(
            f"the label config is not valid XML ({exc}); fix it in the project's Labeling Interface"
        ) from None
    texts = {
        tag.get("name"): (tag.get("value") or "").lstrip("$")
        for tag in root.iter()
        if tag.tag in ("Text", "HyperText", "Paragraphs") and tag.get("name")
    }
    if not texts:
        raise CeaError('the label config has no Text tag; add <Text name="text" value="$text"/> for the texts')
    tags = [tag for tag in root.iter("Choices") if tag.get("toName") in texts]
    if not tags:
        raise CeaError(
            f"the label config has no Choices tag on the text ({', '.join(texts)}); add "
            f'<Choices name="label" toName="{next(iter(texts))}"> with a Choice per label'
        )
    configs = [_config(tag, texts[tag.get("toName")]) for tag in tags]
    if known is None:
        return configs[0]
    if not known:  # an empty bundle: its labels come from the one tag it serves
        if len(configs) > 1:
            raise CeaError(
                f"the label config has {len(configs)} Choices tags and the bundle holds no label yet; keep "
                "one Choices tag for cea in the project"
            )
        return configs[0]
    overlap = [len(set(c.choices) & known) for c in configs]
    best = max(overlap)
    if best == 0:
        shown = ", ".join(configs[0].choices[:5]) + (", ..." if len(configs[0].choices) > 5 else "")
        raise CeaError(
            f"none of the choices ({shown}) is a label of the bundle (which knows "
            f"{', '.join(sorted(known)[:5])}{', ...' if len(known) > 5 else ''}); connect a bundle built "
            "from labelled examples of these choices"
        )
    if overlap.count(best) > 1:
        names = [c.name for c, o in zip(configs, overlap) if o == best]
        raise CeaError(
            f"the label config has {len(configs)} Choices tags and the bundle knows as many choices of "
            f"{' and '.join(names)}; keep one Choices tag for cea in the project"
        )
    return configs[overlap.index(best)]


def _config(tag: ET.Element, field_name: str) -> Config:
    """The :class:`Config` of one ``Choices`` tag on the text of ``field_name``."""
    choices = [c for c in tag.iter("Choice") if c.get("value") is not None]
    aliases = {c.get("value"): c.get("alias") for c in choices if c.get("alias")}
    examples = {
        c.get("value"): tuple(
            dict.fromkeys(
                text for text in (name_text(c.get("value")), c.get("hint"), name_text(c.get("alias") or "")) if text
            )
        )
        for c in choices
    }
    return Config(
        tag.get("name", ""),
        tag.get("toName"),
        field_name,
        tuple(c.get("value") for c in choices),
        tag.get("choice", "single") == "multiple",
        aliases,
        examples,
    )


def choices_result(config: Config, labels: list[str]) -> list[dict]:
    """A prediction's ``result``: ``labels`` chosen in ``config``'s tag (those among its choices, as Label Studio
    writes them: a choice's alias where it has one; one where the tag takes one), or none."""
    chosen = [config.aliases.get(x, x) for x in labels if x in config.choices][: None if config.multiple else 1]
    return (
        [{"from_name": config.name, "to_name": config.to_name, "type": "choices", "value": {"choices": chosen}}]
        if chosen
        else []
    )


def suggestion_tasks(config: Config, chosen, version: str, most: float) -> list[dict]:
    """Tasks of :func:`cea.labelling.suggest.suggest`'s frame: each text with the bundle's prediction, its rank
    as Label Studio's score (low = label first: ``1 - score / most``, ``most`` the highest rank) and its k-means
    group as the prediction's ``cluster``."""
    return [
        {
            "data": {config.field: text},
            "prediction": {
                "result": choices_result(config, [prediction]),
                "score": round(max(0.0, 1 - score / most), 6),
                "cluster": int(group),
                "model_version": version,
            },
        }
        for text, prediction, score, group in zip(
            chosen["text"], chosen["prediction"], chosen["score"], chosen["group"]
        )
    ]


def check_tasks(config: Config, issues, version: str) -> list[dict]:
    """Tasks of :func:`cea.labelling.check.check_labels`'s issues: each text with its given label as an annotation
    and the check's label as a prediction whose ``mislabeling`` is the check's score (how likely the given label is
    wrong) and whose score is one minus it (low = look first)."""
    return [
        {
            "data": {config.field: text},
            "annotation": choices_result(config, [str(label)]),
            "prediction": {
                "result": choices_result(config, [str(suggested)]),
                "score": round(1 - float(score), 6),
                "mislabeling": round(float(score), 6),
                "model_version": version,
            },
        }
        for text, label, suggested, score in zip(issues["text"], issues["label"], issues["suggested"], issues["score"])
    ]


class LabelStudio:
    """A Label Studio server at ``url``, its REST API with the key in ``api_key`` (default: $LABEL_STUDIO_API_KEY)."""

    def __init__(self, url: str, api_key: str | None = None):
        import httpx  # inside: only the --label-studio paths talk to Label Studio

        self.url = url.rstrip("/")
        key = api_key or os.environ.get(API_KEY)
        if not key:
            raise CeaError(
                f"--label-studio needs an API key: set {API_KEY} (Label Studio: Account & Settings, Access Token)"
            )
        self._httpx = httpx
        self.client = httpx.Client(base_url=self.url, timeout=TIMEOUT)
        exchange = key.count(".") == 2  # a personal access token (a JWT refresh token): exchanged for an access token
        token = self._call("POST", "/api/token/refresh", json={"refresh": key})["access"] if exchange else key
        self.client.headers["Authorization"] = f"Bearer {token}" if exchange else f"Token {token}"

    def _call(self, method: str, path: str, **kwargs):
        """One request's JSON answer; a CeaError naming what failed (down, refused key, no such project)."""
        try:
            response = self.client.request(method, path, **kwargs)
        except self._httpx.HTTPError as exc:
            raise CeaError(
                f"cannot reach Label Studio at {self.url} ({type(exc).__name__}); start it, or pass its "
                "address with --label-studio"
            ) from None
        if response.status_code in (401, 403):
            raise CeaError(
                f"Label Studio at {self.url} refused the API key ({response.status_code}); set "
                f"{API_KEY} to a valid access token"
            )
        if response.status_code == 404:
            raise CeaError(f"Label Studio at {self.url} has no {path}; check --project")
        if response.status_code >= 400:
            raise CeaError(
                f"Label Studio at {self.url} answered {response.status_code} to {method} {path}: {response.text[:200]}"
            )
        return response.json() if response.content else {}

    def config(self, project: int, known: set[str] | None = None) -> Config:
        """The label config of ``project`` as :func:`read_config` reads it."""
        return read_config(self._call("GET", f"/api/projects/{project}")["label_config"], known)

    def create_tasks(self, project: int, tasks: list[dict], say=None) -> list[int]:
        """Create ``tasks`` in ``project``, each ``{"data", "prediction": {"result", "score", "model_version",
        "cluster" or "mislabeling"}, "annotation": result or None}``; their ids. A task at a time: Label Studio's
        import answers no task ids and drops a prediction's ``cluster`` and ``mislabeling``, which its predictions
        API keeps. ``say(done, total)``: told every :data:`SAY_EVERY` tasks."""
        ids = []
        for i, task in enumerate(tasks):
            made = self._call("POST", "/api/tasks", json={"project": project, "data": task["data"]})["id"]
            if task.get("prediction"):
                self._call("POST", "/api/predictions", json={"task": made, **task["prediction"]})
            if task.get("annotation"):
                self._call("POST", f"/api/tasks/{made}/annotations", json={"result": task["annotation"]})
            ids.append(made)
            if say is not None and ((i + 1) % SAY_EVERY == 0 or i + 1 == len(tasks)):
                say(i + 1, len(tasks))
        return ids

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> LabelStudio:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
