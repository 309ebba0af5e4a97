"""``cea serve`` as the ML backend of a real Label Studio 1.23, started from a virtual environment of its own
(``CEA_LABEL_STUDIO``: its ``label-studio`` executable; ``.ci/run`` installs one; elsewhere these tests skip): a
project connected, its tasks pre-annotated, an annotation learned through the webhook, the pushes of ``cea suggest``
and ``cea check``, and the labelling page in Chromium with cea's choice selected."""

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from cea.bundle import Bundle
from cea.knn.decision import Classifier
from cea.service.app import create_app

TOKEN = "cea0e2e0test0token0000000000000000000000"  # Label Studio's legacy API token of its first user
USER, PASSWORD = "tester@example.com", "cea-e2e-password"
CONFIG = (
    '<View><Text name="text" value="$text"/><Choices name="intent" toName="text" choice="single">'
    '<Choice value="card"/><Choice value="transfer"/><Choice value="geo"/></Choices></View>'
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """A Label Studio on loopback, its data in a temporary folder: (url, an httpx client with its API key)."""
    exe = os.environ.get("CEA_LABEL_STUDIO") or shutil.which("label-studio")
    if not exe:
        pytest.skip(
            "no Label Studio here: set CEA_LABEL_STUDIO to the label-studio of its own virtual environment "
            "(.ci/run installs one)"
        )
    port, data = free_port(), tmp_path_factory.mktemp("label-studio")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CEA_", "VIRTUAL_ENV"))},
        "ML_BLOCK_LOCAL_IP": "false",
        "SSRF_PROTECTION_ENABLED": "false",
        "LABEL_STUDIO_BASE_DATA_DIR": str(data),
    }
    log = open(data / "label-studio.log", "w")  # noqa: SIM115 (closed below)
    server = subprocess.Popen(
        [
            exe,
            "start",
            "--no-browser",
            "--port",
            str(port),
            "--data-dir",
            str(data),
            "--username",
            USER,
            "--password",
            PASSWORD,
            "--user-token",
            TOKEN,
            "--enable-legacy-api-token",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            if server.poll() is not None:
                pytest.fail(f"Label Studio exited: {(data / 'label-studio.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        client = httpx.Client(base_url=url, headers={"Authorization": f"Token {TOKEN}"}, timeout=120)
        yield url, client
        client.close()
    finally:
        server.terminate()
        server.wait(30)
        log.close()


@pytest.fixture
def served(tmp_path, tiny_st_dir, intents):
    """The intents bundle served over real HTTP on loopback with a token: (backend URL, bundle)."""
    bundle = Bundle.create(
        tmp_path / "b",
        tiny_st_dir,
        list(intents["text"]),
        list(intents["label"]),
        classifier=Classifier("knn", k=1),
        progress=False,
    )
    yield from serving(bundle)


def serving(bundle: Bundle, fine_tune: dict | None = None):
    """``bundle`` served over real HTTP on loopback with a token (``fine_tune``: create_app's), until the generator is
    closed: yields (backend URL, bundle)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(bundle, token="s3cret", fine_tune=fine_tune), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/label-studio", bundle
    server.should_exit = True
    thread.join(10)
    bundle.close()


def connect(client: httpx.Client, backend: str, config: str = CONFIG) -> tuple[int, int]:
    """A new project of ``config`` with cea connected as its ML backend (basic auth for Label Studio's calls, the
    token as a bearer header on its webhook): (project, backend) ids."""
    project = client.post("/api/projects", json={"title": "cea e2e", "label_config": config}).json()["id"]
    ml = client.post(
        "/api/ml",
        json={
            "project": project,
            "url": backend,
            "title": "cea",
            "auth_method": "BASIC_AUTH",
            "basic_auth_user": "label-studio",
            "basic_auth_pass": "s3cret",
        },
    )
    assert ml.status_code == 201 and ml.json()["state"] == "CO", ml.text
    hook = next(
        h for h in client.get("/api/webhooks", params={"project": project}).json() if h["url"] == backend + "/webhook"
    )
    client.patch(f"/api/webhooks/{hook['id']}", json={"headers": {"Authorization": "Bearer s3cret"}})
    return project, ml.json()["id"]


def tasks_of(client: httpx.Client, project: int) -> dict[str, dict]:
    got = client.get("/api/tasks", params={"project": project, "fields": "all", "page_size": 100}).json()["tasks"]
    return {t["data"]["text"]: t for t in got}


def predict(client: httpx.Client, project: int) -> dict[str, dict]:
    """Have Label Studio fetch predictions for every task; each task's prediction of the newest model version."""
    done = client.post(
        "/api/dm/actions",
        params={"id": "retrieve_tasks_predictions", "project": project},
        json={"selectedItems": {"all": True, "excluded": []}},
    )
    assert done.status_code == 200, done.text
    got = client.get("/api/predictions", params={"project": project}).json()
    newest = {}
    for p in sorted(got, key=lambda p: p["id"]):
        newest[p["task"]] = p
    return {text: newest.get(t["id"]) for text, t in tasks_of(client, project).items()}


def test_label_studio_pre_annotates_and_the_bundle_learns_each_annotation(studio, served):
    _, client = studio
    backend, bundle = served
    project, _ = connect(client, backend)
    texts = ["my card is lost a", "transfer money to my account b", "red dog blue cat"]
    assert client.post(f"/api/projects/{project}/import", json=[{"text": t} for t in texts]).status_code == 201
    first = predict(client, project)
    version = bundle.version
    assert first["my card is lost a"]["result"][0]["value"]["choices"] == ["card"]
    assert first["transfer money to my account b"]["result"][0]["value"]["choices"] == ["transfer"]
    assert all(p["model_version"] == version and 0 <= p["score"] <= 1 for p in first.values())
    before = first["red dog blue cat"]["result"][0]["value"]["choices"][0]
    taught = next(x for x in ("card", "transfer", "geo") if x != before)
    task = tasks_of(client, project)["red dog blue cat"]
    made = client.post(
        f"/api/tasks/{task['id']}/annotations",
        json={
            "result": [{"from_name": "intent", "to_name": "text", "type": "choices", "value": {"choices": [taught]}}]
        },
    )
    assert made.status_code == 201
    for _ in range(100):  # the webhook is sent as the annotation is saved
        if f"label-studio:{project}:{made.json()['id']}" in bundle.sources:
            break
        time.sleep(0.05)
    assert bundle.label_counts[taught] == 9 and bundle.version != version
    client.post(f"/api/projects/{project}/import", json=[{"text": "red dog blue cat a"}])
    after = predict(client, project)
    assert after["red dog blue cat a"]["result"][0]["value"]["choices"] == [taught]
    assert after["red dog blue cat a"]["model_version"] == bundle.version
    client.delete(f"/api/annotations/{made.json()['id']}")
    for _ in range(100):
        if bundle.label_counts[taught] == 8:
            break
        time.sleep(0.05)
    assert bundle.label_counts[taught] == 8


@pytest.fixture
def served_empty(tmp_path, tiny_st_dir):
    """An empty bundle (``cea bundle MODEL -o BUNDLE``, no data set) served as :func:`served` serves its bundle."""
    bundle = Bundle.create(
        tmp_path / "e", tiny_st_dir, [], [], classifier=Classifier("knn", k=1), progress=False, label_names="auto"
    )
    yield from serving(bundle)


def test_a_new_project_starts_from_an_empty_bundle_and_its_choices(studio, served_empty):
    """A new project: the empty bundle's labels come from the label config when Label Studio connects (each choice's
    name and hint its first examples), the first tasks are pre-annotated from them, and an annotation is learned."""
    _, client = studio
    backend, bundle = served_empty
    cold = CONFIG.replace('value="card"/>', 'value="card" hint="my card is lost"/>').replace(
        'value="transfer"/>', 'value="transfer" hint="transfer money to my account"/>'
    )
    project, _ = connect(client, backend, cold)
    assert bundle.label_counts == {"card": 2, "geo": 1, "transfer": 2}
    assert all(source.startswith("label-name:") for source in bundle.sources)
    texts = ["my card is lost a", "transfer money to my account b", "red dog blue cat"]
    assert client.post(f"/api/projects/{project}/import", json=[{"text": t} for t in texts]).status_code == 201
    first = predict(client, project)
    assert first["my card is lost a"]["result"][0]["value"]["choices"] == ["card"]
    assert first["transfer money to my account b"]["result"][0]["value"]["choices"] == ["transfer"]
    task = tasks_of(client, project)["red dog blue cat"]
    made = client.post(
        f"/api/tasks/{task['id']}/annotations",
        json={"result": [{"from_name": "intent", "to_name": "text", "type": "choices", "value": {"choices": ["geo"]}}]},
    )
    assert made.status_code == 201
    for _ in range(100):  # the webhook is sent as the annotation is saved
        if f"label-studio:{project}:{made.json()['id']}" in bundle.sources:
            break
        time.sleep(0.05)
    assert bundle.label_counts == {"card": 2, "geo": 2, "transfer": 2}


def test_a_config_cea_cannot_serve_is_refused_at_connection(studio, served):
    _, client = studio
    backend, _ = served
    project = client.post(
        "/api/projects",
        json={
            "title": "no choices",
            "label_config": CONFIG.replace("card", "cat").replace("transfer", "dog").replace("geo", "bird"),
        },
    ).json()["id"]
    ml = client.post("/api/ml", json={"project": project, "url": backend, "title": "cea"})
    assert ml.status_code == 400 and "422" in ml.text, ml.text


def cea(*args):
    """``cea ARGS`` in a subprocess with Label Studio's API key."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "LABEL_STUDIO_API_KEY": TOKEN}
    return subprocess.run([sys.executable, "-m", "cea", *args], capture_output=True, text=True, env=env, timeout=300)


def test_suggest_and_check_create_tasks_with_cea_predictions(studio, served, tmp_path, intents):
    url, client = studio
    _, bundle = served
    project = client.post("/api/projects", json={"title": "pushed", "label_config": CONFIG}).json()["id"]
    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(f"my card is lost {w}" for w in ("x", "yy", "zzz")) + "\nwhere is paris\n")
    got = cea(
        "suggest",
        str(bundle.root),
        "--texts",
        str(pool),
        "--n",
        "3",
        "--label-studio",
        url,
        "--project",
        str(project),
        "-o",
        str(tmp_path / "s.csv"),
    )
    assert got.returncode == 0, got.stderr
    predictions = client.get("/api/predictions", params={"project": project}).json()
    assert len(predictions) == 3 and sorted(p["cluster"] for p in predictions) == [1, 2, 3]
    assert all(0 <= p["score"] <= 1 and p["model_version"] == bundle.version for p in predictions)
    noisy = intents.copy()
    noisy.loc[[0, 4], "label"] = ["geo", "card"]  # two flipped labels
    noisy.to_csv(tmp_path / "noisy.csv", index=False)
    checked = cea(
        "check",
        str(tmp_path / "noisy.csv"),
        "--model",
        str(bundle.root),
        "--folds",
        "3",
        "--label-studio",
        url,
        "--project",
        str(project),
        "-o",
        str(tmp_path / "c.csv"),
    )
    assert checked.returncode == 0, checked.stderr
    annotated = [t for t in tasks_of(client, project).values() if t["annotations"]]
    assert annotated and all(t["annotations"][0]["result"][0]["value"]["choices"] for t in annotated)
    flagged = [p for p in client.get("/api/predictions", params={"project": project}).json() if p["mislabeling"]]
    assert len(flagged) == len(annotated) and all(0 < p["mislabeling"] <= 1 for p in flagged)


def test_label_studio_that_is_down_is_named(tmp_path, served):
    _, bundle = served
    (tmp_path / "pool.txt").write_text("my card is lost x\n")
    got = cea(
        "suggest",
        str(bundle.root),
        "--texts",
        str(tmp_path / "pool.txt"),
        "--label-studio",
        f"http://127.0.0.1:{free_port()}",
        "--project",
        "1",
        "-o",
        str(tmp_path / "s.csv"),
    )
    assert got.returncode == 2 and "cannot reach Label Studio" in got.stderr and "Traceback" not in got.stderr
    assert not (tmp_path / "s.csv").exists()


def test_the_labelling_page_shows_ceas_choice_selected(studio, served, tmp_path):
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        pytest.skip("no Chromium on this machine (CI installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    url, client = studio
    backend, _ = served
    project, _ = connect(client, backend)
    client.post(f"/api/projects/{project}/import", json=[{"text": "transfer money to my account bb"}])
    task = tasks_of(client, project)["transfer money to my account bb"]["id"]
    flags = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ]
    shot = Path(os.environ.get("CEA_SCREENSHOT", tmp_path / "label-studio-task.png"))
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=flags)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(f"{url}/user/login")
        page.fill("input[name=email]", USER)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(lambda address: "/user/login" not in address)
        page.goto(f"{url}/projects/{project}/data?task={task}")
        choice = page.get_by_role("checkbox", name="transfer").or_(page.get_by_role("radio", name="transfer"))
        try:
            choice.first.wait_for(timeout=60_000)
            page.wait_for_timeout(500)
            selected = choice.first.is_checked()
        finally:
            page.screenshot(path=str(shot))
        browser.close()
    assert selected and shot.stat().st_size > 10_000


@pytest.fixture
def served_training(tmp_path, tiny_st_dir):
    """A bundle of the three labels' names served with background fits (cea fit for real, started by Label Studio)."""
    bundle = Bundle.create(
        tmp_path / "t",
        tiny_st_dir,
        ["card", "transfer", "geo"],
        ["card", "transfer", "geo"],
        progress=False,
        backend="torch",
    )
    yield from serving(bundle, {"work": tmp_path / "fits", "budget": 60, "first": 0})


def test_label_studio_starts_a_background_fit_whose_encoder_is_swapped_in(studio, served_training, monkeypatch):
    """60 annotations made in Label Studio, then its Start Training: cea fit runs beside the service, is judged on the
    held-back annotations (made better here: the tiny random BERT learns nothing a judge can tell) and swapped in;
    Label Studio then fetches predictions of the new model version."""
    import numpy as np

    from cea.service import fine_tuning
    from cea.service.judging import Scored

    _, client = studio
    backend, bundle = served_training

    def scored(judged, references, labels, queries, gold):  # the live bundle half right, the fitted one all right
        right = np.arange(len(gold)) < (len(gold) // 2 if judged is bundle else len(gold))
        return Scored(right, right.astype(float))

    monkeypatch.setattr(fine_tuning, "scored", scored)
    project, ml = connect(client, backend)
    words = {"card": "my card is lost", "transfer": "transfer money to my account", "geo": "what is the capital city"}
    texts = {f"{words[label]} {'abcdefghij'[i % 10]} {i}": label for i in range(60) for label in [list(words)[i % 3]]}
    assert client.post(f"/api/projects/{project}/import", json=[{"text": t} for t in texts]).status_code == 201
    for text, task in tasks_of(client, project).items():
        assert (
            client.post(
                f"/api/tasks/{task['id']}/annotations",
                json={
                    "result": [
                        {
                            "from_name": "intent",
                            "to_name": "text",
                            "type": "choices",
                            "value": {"choices": [texts[text]]},
                        }
                    ]
                },
            ).status_code
            == 201
        )
    for _ in range(200):  # each webhook is sent as its annotation is saved
        if sum((s or "").startswith("label-studio:") for s in bundle.sources) == 60:
            break
        time.sleep(0.05)
    version = bundle.version
    assert client.post(f"/api/ml/{ml}/train").status_code == 200
    for _ in range(200):
        health = httpx.get(backend.rsplit("/", 1)[0] + "/health").json()["training"]
        if health["state"] != "idle" or health["last"]:
            break
        time.sleep(0.05)
    assert health["state"] == "training" or health["last"], health
    for _ in range(600):  # cea fit on a tiny BERT: seconds
        health = httpx.get(backend.rsplit("/", 1)[0] + "/health").json()["training"]
        if health["last"]:
            break
        time.sleep(0.5)
    assert health["last"]["outcome"] == "swapped" and health["last"]["decided_by"] == "accuracy", health
    assert bundle.manifest["encoder"] == "encoder-1" and bundle.version == version + ".1"
    after = predict(client, project)
    assert all(p["model_version"] == bundle.version for p in after.values())
