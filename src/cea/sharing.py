"""Bundles and trained encoders shared: to and from the Hugging Face hub (``cea push``, ``cea pull`` and ``cea serve
hub:ORG/NAME``), and into MLflow as a model.

What it does
    :func:`push` uploads a bundle folder (less what a service kept of its traffic, and its lock files), a run's trained
    encoder (``RUN/model``, with its model card) or any model folder to the repo ``ORG/NAME``, made where it does not
    exist. :func:`pull` downloads a repo into a new folder; a bundle is verified on the way (every file against the
    sha256 sums of its manifest) and kept only whole and verified: nothing is unpickled, nothing half-written is left.
    :func:`log_bundle` logs a bundle as an MLflow pyfunc model that predicts a DataFrame of texts (for MLflow's
    registry, ``mlflow models serve`` and Spark's ``mlflow.pyfunc.spark_udf``), from code
    (:mod:`cea.bundle.pyfunc`, MLflow's "models from code"): no pickle is written or read.

What it expects
    ``huggingface_hub`` (installed with transformers) and a token for what is private or pushed (``hf auth login``
    or ``HF_TOKEN``); ``HF_ENDPOINT`` names another hub. MLflow (the extra ``cea[track]``) and its tracking URI
    (``MLFLOW_TRACKING_URI``) for :func:`log_bundle`, with a bundle whose store is a folder.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from .bundle import Bundle
from .bundle.references import LEFT_BEHIND
from .errors import CeaError
from .paths import cache_dir

REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` if it reads ``ORG/NAME``, else a CeaError saying so."""
    if not REPO_ID.fullmatch(repo_id):
        raise CeaError(f"{repo_id!r} is not a hub repo id; write ORG/NAME (e.g. my-team/banking-bundle)")
    return repo_id


def _hub_call(what: str, call):
    """``call()``, its hub and network errors said in one line."""
    import httpx
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    try:
        return call()
    except (HfHubHTTPError, httpx.HTTPStatusError) as exc:
        status = getattr(exc.response, "status_code", None)
        if isinstance(exc, RepositoryNotFoundError) or status == 404:
            raise CeaError(
                f"{what}: no such repo, or it is private; check the id and log in (hf auth login or HF_TOKEN)"
            ) from None
        hint = "log in with hf auth login or set HF_TOKEN" if status in (401, 403) else "try again later"
        raise CeaError(f"{what}: the hub answered {status or exc}; {hint}") from None
    except (OSError, httpx.TransportError) as exc:  # the connection
        raise CeaError(f"{what}: cannot reach the hub ({exc}); check the connection or HF_ENDPOINT") from None


def push(folder: str | Path, repo_id: str, private: bool = False) -> str:
    """Upload ``folder`` (a bundle, a run folder of ``cea train``, or a model folder) to ``repo_id``; its URL."""
    from huggingface_hub import HfApi

    check_repo_id(repo_id)
    folder = Path(folder)
    if (folder / "results.json").exists() and (folder / "model").is_dir():
        folder = folder / "model"  # a run: its trained encoder and card
    if (folder / "manifest.json").exists():
        Bundle.load(folder).close()  # a bundle, whole and verified, before anything is sent
    elif not (folder / "modules.json").exists() and not (folder / "config.json").exists():
        raise CeaError(f"{folder} is neither a bundle, a run of cea train nor a model folder; push one of those")
    api = HfApi()
    _hub_call(f"creating {repo_id}", lambda: api.create_repo(repo_id, private=private, exist_ok=True))
    _hub_call(
        f"uploading to {repo_id}",
        lambda: api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            ignore_patterns=list(LEFT_BEHIND),
            commit_message=f"cea push {folder.name}",
        ),
    )
    return f"{api.endpoint}/{repo_id}"


def pull(repo_id: str, output: str | Path) -> Path:
    """Download ``repo_id`` into ``output`` (which must not exist); a bundle is verified before it lands there."""
    from huggingface_hub import snapshot_download

    check_repo_id(repo_id)
    output = Path(output)
    if output.exists():
        raise CeaError(f"{output} exists; pull into a new folder")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.") as tmp:
        got = Path(tmp) / "repo"
        _hub_call(f"downloading {repo_id}", lambda: snapshot_download(repo_id, local_dir=str(got)))
        shutil.rmtree(got / ".cache", ignore_errors=True)  # the download's own bookkeeping
        if (got / "manifest.json").exists():
            try:
                Bundle.load(got).close()  # every file against its sha256 in the manifest
            except CeaError as exc:
                raise CeaError(f"{repo_id} does not verify ({exc}); nothing was kept. Push the bundle again") from None
        got.rename(output)
    return output


def pulled(spec: str) -> Path:
    """The local folder of ``hub:ORG/NAME``: pulled into cea's cache on first use, then reused."""
    repo_id = check_repo_id(spec.removeprefix("hub:"))
    folder = cache_dir() / "hub" / repo_id.replace("/", "--")
    return folder if folder.exists() else pull(repo_id, folder)


def log_bundle(bundle_dir: str | Path, name: str = "bundle", registered_model_name: str | None = None):
    """Log the bundle in ``bundle_dir`` as an MLflow pyfunc model in the active run (one is started where none is);
    ``registered_model_name`` also registers it. The folder travels as the model's artifact, less what a service
    kept of its traffic and its lock files. Returns MLflow's ``ModelInfo`` (``model_uri`` loads it)."""
    try:
        import mlflow
    except ImportError:
        raise CeaError("logging a bundle to MLflow needs mlflow: pip install 'cea[track]'") from None
    bundle_dir = Path(bundle_dir)
    Bundle.load(bundle_dir).close()  # a bundle, whole and verified, before anything is logged
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / bundle_dir.name
        shutil.copytree(bundle_dir, copy, ignore=shutil.ignore_patterns(*LEFT_BEHIND))
        return mlflow.pyfunc.log_model(
            name=name,
            python_model=str(Path(__file__).parent / "bundle" / "pyfunc.py"),
            artifacts={"bundle": str(copy)},
            registered_model_name=registered_model_name,
            input_example=pd.DataFrame({"text": ["a text to classify"]}),
            pip_requirements=["cea"],
        )
