"""The service's OpenAPI document is its contract: schemathesis (``--checks all``, every route, Label Studio's
included) finds no answer the document does not describe, on a bundle served over HTTP with and without a token."""

import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient

from cea.bundle import Bundle
from cea.service.app import create_app
from cea.service.contract import NON_BLANK, bodies, one_line

ROOT = Path(__file__).resolve().parents[2]  # schemathesis.toml: its hooks and the statuses a rule of code allows
TOKEN = "s3cret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served(bundle: Bundle, token: str | None):
    """``bundle`` served on loopback (its predictions kept, so that /suggest answers), until the generator closes."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(bundle, token=token, keep_traffic=50), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.mark.parametrize("token", [None, TOKEN], ids=["open", "token"])
def test_schemathesis_finds_no_answer_the_document_does_not_describe(made, token):
    exe = shutil.which("schemathesis", path=str(Path(sys.executable).parent)) or shutil.which("schemathesis")
    assert exe, "schemathesis is a test dependency: pip install -e '.[test]'"
    for url in served(made, token):
        auth = ["-H", f"Authorization: Bearer {token}"] if token else []
        run = subprocess.run(
            [exe, "run", f"{url}/openapi.json", "--checks", "all", "--seed", "1", "--no-color", *auth],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "passed" in run.stdout and "Tested: 14" in run.stdout  # every route, Label Studio's five included


def test_without_the_token_every_guarded_route_answers_401_in_the_one_error_shape(made):
    client = TestClient(create_app(made, token=TOKEN))
    document = client.get("/openapi.json").json()
    guarded = [
        (method, path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if operation.get("security")
    ]
    assert sorted(guarded) == [
        ("delete", "/examples/{example_id}"),
        ("post", "/examples"),
        ("post", "/label-studio/webhook"),
    ]
    for method, path in guarded:
        got = client.request(method.upper(), path.replace("{example_id}", "0"), json={})
        assert got.status_code == 401 and list(got.json()) == ["detail"] and "Bearer" in got.json()["detail"]
        assert "401" in document["paths"][path][method]["responses"]
    assert len(made) == 24  # nothing changed
    open_doc = TestClient(create_app(made)).get("/openapi.json").json()
    assert not any(op.get("security") for ops in open_doc["paths"].values() for op in ops.values())


def test_every_error_has_one_shape_and_names_where_it_is(made):
    client = TestClient(create_app(made, max_chars=50))
    cases = [
        ("POST", "/predict", {"texts": [" "]}, 422, "texts: text 0 is empty"),
        ("POST", "/predict", {"texts": ["a"], "k": True}, 422, "k: k must be a whole number"),
        ("GET", "/suggest?n=0", None, 422, "n: Input should be greater than or equal to 1"),
        ("GET", "/examples/999", None, 404, "unknown example id(s) 999"),
        ("POST", "/examples", {"texts": ["a"], "suggestions": ["x"], "labels": ["card"]}, 422, "not both"),
    ]
    for method, path, body, status, words in cases:
        got = client.request(method, path, json=body)
        assert got.status_code == status and list(got.json()) == ["detail"] and words in got.json()["detail"], got.text
    infinite = client.post(
        "/predict",
        content=b'{"texts": ["a"], "k": 1e400}',  # k read as inf: refused, no crash
        headers={"content-type": "application/json"},
    )
    assert infinite.status_code == 422 and infinite.json() == {"detail": "k: k must be a whole number"}
    not_json = client.post("/label-studio/webhook", content=b"{", headers={"content-type": "application/json"})
    assert not_json.status_code == 422 and not_json.json() == {"detail": "the body is not JSON; send a JSON object"}
    wrong = client.patch("/examples/1")  # two routes share the path: Allow names both
    assert wrong.status_code == 405 and wrong.headers["allow"] == "DELETE, GET"


def test_the_document_says_what_the_validators_refuse():
    import re

    query, examples = bodies(max_texts=4, max_chars=50, multi_label=False)
    text = query.model_json_schema()["properties"]["texts"]["items"]
    assert text == {"type": "string", "minLength": 1, "maxLength": 50, "pattern": NON_BLANK}
    for blank in (" ", "\t\n", "\x1c", "\u3000", "\x85"):  # whitespace to str.strip(): refused, and outside the pattern
        assert not re.search(NON_BLANK, blank) and not blank.strip()
    assert re.search(NON_BLANK, "\ufeff")  # not whitespace to Python (ECMA's \s takes it)
    label = examples.model_json_schema()["properties"]["labels"]["items"]
    assert re.search(label["not"]["pattern"], " unknown ") and not re.search(label["not"]["pattern"], "unknowns")
    assert (
        one_line([{"loc": ("body", "texts", 0), "msg": "Value error, text 0 is empty", "type": "value_error"}])
        == "texts.0: text 0 is empty"
    )
