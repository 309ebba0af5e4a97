"""The service's contract as its OpenAPI document gives it (``GET /openapi.json``): the request bodies with their
bounds, the answers, every status a route gives and the one shape of every error, ``{"detail": "one line"}``.

What it expects
    The limits of :func:`cea.service.app.create_app` (``max_texts``, ``max_chars``) for :func:`bodies`; a route
    declares its answers with :func:`answers` (its own, plus the errors every route or every body can meet).

What it returns
    Pydantic models: the routes read their bodies through them (FastAPI validates), and the answers they document
    (the routes write plain dicts, or bytes on ``/predict``'s direct path: the models only document them, and the
    schemathesis test in tests/service/test_contract.py checks every answer against them).

Why written here
    FastAPI documents what a route's signature says; a rule that lives in code (an empty text refused, a 404 for an
    unknown id, a 413 from the body limit, a 401 without the token) reaches the document only where it is declared.
"""

# no ``from __future__ import annotations`` here: pydantic and FastAPI read the models' live annotations
import re
from typing import Annotated, Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator

from ..data.labels import UNKNOWN

# a text with a character str.strip() keeps: the whitespace str.isspace() knows, spelled out, as \s differs between
# regular expression engines (ECMA's, which JSON Schema names, leaves out \x1c-\x1f and \x85, and takes \ufeff)
BLANKS = r"[\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
NON_BLANK = "[^" + BLANKS[1:]


class Problem(BaseModel):
    """Every error's answer: the problem and its fix in one line."""

    detail: str = Field(examples=["text 0 is empty"])


WHY = {  # the errors a route can meet, as the document words them
    400: "the body could not be read (not UTF-8 text)",
    401: "no token, or the wrong one: send Authorization: Bearer TOKEN",
    404: "an unknown id",
    409: "nothing to answer from yet (no kept traffic)",
    410: "no such job in this process",
    413: "a body over the service's byte limit",
    422: "a body or parameter outside its schema, or one the bundle cannot take",
}
BODY = (400, 413, 422)  # what any route with a body can meet


def answers(ok: type[BaseModel] | None = None, *errors: int, media_type: str | None = None) -> dict[int, dict]:
    """A route's ``responses``: its 200 (``ok``'s schema, or ``media_type``'s content) and each status of
    ``errors`` in :class:`Problem`'s shape."""
    documented: dict[int, dict] = {}
    if ok is not None:
        documented[200] = {"model": ok}
    if media_type is not None:
        documented[200] = {"content": {media_type: {"schema": {"type": "string"}}}, "description": "the text"}
    for status in sorted(set(errors)):
        documented[status] = {"model": Problem, "description": WHY[status]}
    return documented


def one_line(errors: list[dict]) -> str:
    """FastAPI's validation errors as one line: where each is (``texts.0``; the body: ``body``) and what is wrong."""
    said = []
    for error in errors:
        where = ".".join(str(part) for part in error["loc"][1:]) or str(error["loc"][0])
        if error["type"] == "json_invalid":
            said.append("the body is not JSON; send a JSON object")
        elif error["type"] == "model_attributes_type" and where == "body":
            said.append("the body is not a JSON object; send one")
        else:
            said.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(said)


async def refused_body(request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 in :class:`Problem`'s shape (an exception handler of the app)."""
    return JSONResponse({"detail": one_line(exc.errors())}, status_code=422)


async def not_allowed(request, exc) -> JSONResponse:
    """A 405 whose ``Allow`` names every method the document gives the path (an exception handler of the app).
    Starlette's names those of the first route that matches the path only, and ``GET`` and ``DELETE /examples/{id}``
    are two routes. A path the document leaves out (``/docs``) keeps Starlette's header."""
    allowed = set()
    for path, operations in request.app.openapi()["paths"].items():
        if _template(path).fullmatch(request.scope["path"]):
            allowed |= {method.upper() for method in operations}
    said = ", ".join(sorted(allowed)) if allowed else (exc.headers or {}).get("Allow", "")
    return JSONResponse(
        {"detail": f"{request.method} is not a method of {request.scope['path']}; it answers {said}"},
        status_code=405,
        headers={"Allow": said},
    )


def _template(path: str) -> re.Pattern:
    """The paths an OpenAPI path template (``/examples/{example_id}``) stands for, as a regular expression."""
    parts = re.split(r"\{[^/{}]+\}", path)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))


def bodies(max_texts: int, max_chars: int, multi_label: bool = False) -> tuple[type, type]:
    """The request models of ``/predict`` and of ``POST /examples``, bounded; ``multi_label``: the bundle's examples
    hold lists of labels (a name alone is a list of one)."""
    text = Annotated[
        str, WithJsonSchema({"type": "string", "minLength": 1, "maxLength": max_chars, "pattern": NON_BLANK})
    ]
    name = {"type": "string", "pattern": NON_BLANK, "not": {"pattern": f"^{BLANKS}*{UNKNOWN}{BLANKS}*$"}}
    label = Annotated[str, WithJsonSchema(name)]
    if multi_label:
        label = Annotated[
            str | list[str], WithJsonSchema({"anyOf": [name, {"type": "array", "items": name, "minItems": 1}]})
        ]

    class Texts(BaseModel):
        texts: list[text] = Field(min_length=1, max_length=max_texts)
        k: int | None = Field(default=None, ge=1, le=100, description="neighbours to return (default: the bundle's)")

        @field_validator("k", mode="before")
        @classmethod
        def whole(cls, k):  # JSON Schema's integer: 3 and 3.0, never true or "3" (pydantic's lax and strict modes)
            if k is None or (isinstance(k, (int, float)) and not isinstance(k, bool) and float(k).is_integer()):
                return k
            raise ValueError("k must be a whole number")

        @field_validator("texts")
        @classmethod
        def bounded(cls, texts):
            for i, one in enumerate(texts or []):
                if not one.strip():
                    raise ValueError(f"text {i} is empty")
                if len(one) > max_chars:
                    raise ValueError(f"text {i} has {len(one)} characters; the limit is {max_chars}")
            return texts

    class Query(Texts):
        threshold: float | None = Field(
            default=None,
            ge=0,
            strict=True,
            description="evidence below it answers unknown (0: never; default: the bundle's)",
        )

    class Examples(Texts):
        """Texts, or the ids of suggestions (``GET /suggest``) to label: exactly one of the two, as many as labels."""

        # the type without None: an explicit null is refused, as the document's oneOf says (None: not given)
        texts: list[text] = Field(default=None, min_length=1, max_length=max_texts)
        suggestions: list[str] = Field(default=None, min_length=1, max_length=max_texts)
        labels: list[label] = Field(
            min_length=1,
            max_length=max_texts,
            description="as many as texts (or suggestions)"
            f"; not {UNKNOWN!r}, the answer for texts of none of the labels",
        )
        model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["texts"]}, {"required": ["suggestions"]}]})

    return Query, Examples


# --- the answers ----------------------------------------------------------------------------------------------
Label = str | list[str]  # a multi-label bundle's examples hold lists


class Neighbour(BaseModel):
    id: int
    text: str
    cosine: float
    label: Label


class Ranked(BaseModel):
    label: str
    score: float


class Prediction(BaseModel):
    label: str = Field(description='a class, or "unknown" where the evidence fell below the threshold')
    score: float
    evidence: float
    labels: list[Ranked] | None = Field(default=None, description="a multi-label bundle's labels, best first")
    closest: str | None = Field(default=None, description="the best class, where the answer is unknown")
    neighbours: list[Neighbour]


class Predictions(BaseModel):
    predictions: list[Prediction]


class Example(BaseModel):
    id: int
    label: Label
    text: str


class Added(BaseModel):
    ids: list[int]


class Removed(BaseModel):
    removed: int


class Labels(BaseModel):
    labels: dict[str, int]


class Kept(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    text: str
    at: str


class Unknowns(BaseModel):
    unknowns: list[Kept]


class Suggestion(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    text: str


class Suggestions(BaseModel):
    suggestions: list[Suggestion]


class Health(BaseModel):
    status: str
    examples: int
    generation: int
    store: str
    pid: int
    classifier: str
    unknown_threshold: float | None
    training: dict[str, Any] | None = Field(default=None, description="the background fit, where the service runs them")


# --- Label Studio's ML backend protocol (label_studio/ml/api_connector.py) -------------------------------------
class Payload(BaseModel):
    """A body Label Studio sends: the fields cea reads, and any others it sends beside them."""

    model_config = ConfigDict(extra="allow")


class Setup(Payload):
    schema_: str | None = Field(default=None, alias="schema", description="the project's label config (XML)")
    project: Any = None


class Tasks(Payload):
    tasks: list[dict[str, Any]]
    label_config: str | None = None


class Job(Payload):
    job: str = Field(strict=True, description="the job START_TRAINING answered with")


class Event(Payload):
    action: str = Field(description="the webhook's action; those cea does not learn from are acknowledged")
    project: Any = None


class StudioHealth(BaseModel):
    status: str
    model_class: str
    model_version: str


class Version(BaseModel):
    model_config = ConfigDict(extra="allow")
    model_version: str


class Results(BaseModel):
    results: list[dict[str, Any]]
    model_version: str


class JobStatus(BaseModel):
    """A fit's status; once it ended, its outcome (swapped, kept or failed), why, and the judge's figures."""

    job_status: str
    model_version: str
    outcome: str | None = None
    why: str | None = None
    decided_by: str | None = None
    live_accuracy: float | None = None
    fitted_accuracy: float | None = None
    live_log_probability: float | None = None
    fitted_log_probability: float | None = None


class Acknowledged(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: str
    action: str
