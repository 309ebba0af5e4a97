"""Experiment tracking (``--report-to``): a run's losses, dev judgements, options and test figures in TensorBoard,
MLflow or Weights & Biases.

What it does
    The trainer's own integrations (``report_to``) log the loss and every dev judgement as it is made; :func:`tracked`
    adds what only cea knows: its options as parameters before training, and after it the figures a run ends on (the
    test metrics, the chosen classifier's). TensorBoard writes under ``OUT/tensorboard``; MLflow to its tracking URI
    (``MLFLOW_TRACKING_URI``, ``./mlruns`` by default) in one run that cea starts and ends, so that the test figures
    join the training's (``cea fit`` holds one run around its training's); W&B to its project (``WANDB_PROJECT``).

What it expects
    The trackers come with the extra ``cea[track]`` (``pip install 'cea[track]'``); a tracker asked for that is not
    installed is refused before anything runs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
from pathlib import Path

from ..errors import OptionError

TRACKERS = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}  # name -> the module it needs
CHOICES = ("none", *TRACKERS, "all")


def trackers(report_to: str) -> list[str]:
    """The trackers ``report_to`` names (``none``, one of :data:`TRACKERS`, a comma list, or ``all``: every one
    installed), each installed; an OptionError names what is unknown or missing and the extra to install."""
    names = [n.strip() for n in str(report_to).split(",") if n.strip()]
    if not names or not set(names) <= set(CHOICES):
        raise OptionError("report_to", f"must be none, {', '.join(TRACKERS)} or all, got {report_to!r}")
    if "none" in names:
        return []
    if "all" in names:
        return [n for n, module in TRACKERS.items() if importlib.util.find_spec(module)]
    missing = [n for n in names if not importlib.util.find_spec(TRACKERS[n])]
    if missing:
        raise OptionError("report_to", f"{missing[0]} is not installed; pip install 'cea[track]'")
    if "mlflow" in names:
        _mlflow_takes_its_uri()
    return names


def _mlflow_takes_its_uri() -> None:
    """An OptionError, before any run starts, where MLflow refuses its tracking URI: MLflow 3 refuses a file store
    (``./mlruns``) unless asked, and its default ``sqlite:`` store needs the full ``mlflow`` package."""
    import mlflow

    uri = mlflow.get_tracking_uri()
    try:
        mlflow.MlflowClient(tracking_uri=uri)  # makes the stores: a URI MLflow refuses fails here
    except Exception as exc:  # noqa: BLE001 (MLflow raises kinds of its own, by store)
        reason = re.split(r"[.;] ", str(exc).strip().splitlines()[0])[0] if str(exc).strip() else type(exc).__name__
        raise OptionError(
            "report_to",
            f"MLflow refuses its tracking URI {uri} ({reason}); set MLFLOW_TRACKING_URI "
            "to a server (http://HOST:5000) or sqlite:///mlflow.db (pip install mlflow), or "
            "MLFLOW_ALLOW_FILE_STORE=true for a file store",
        ) from None


def _flat(params: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)[:250]
    return out


def _mlflow_run(output: Path, params: dict):
    """``(mlflow, run, own)``: the MLflow run to log into, joined or started here (``own``), ``params`` logged."""
    import mlflow

    own = mlflow.active_run() is None  # an outer run (cea fit's) is joined, not ended here
    run = mlflow.active_run() or mlflow.start_run(run_name=output.name)  # the trainer's callback logs into it
    logged = {} if own else mlflow.get_run(run.info.run_id).data.params  # a param is written once
    mlflow.log_params({k: v for k, v in _flat(params).items() if k not in logged})
    return mlflow, run, own


def _tensorboard_log(writers: list, output: Path, params: dict, numbers: dict, words: dict, step: int) -> None:
    """``numbers`` and ``words`` at ``step`` in ``output/tensorboard`` (writer made on first use: ``writers``)."""
    from torch.utils.tensorboard import SummaryWriter

    if not writers:
        writers.append(SummaryWriter(log_dir=str(output / "tensorboard")))
        writers[0].add_text("cea_options", "\n".join(f"{k}: {v}" for k, v in _flat(params).items()))
    for key, value in numbers.items():
        writers[0].add_scalar(key, value, step)
    for key, value in words.items():
        writers[0].add_text(key, value, step)


@contextlib.contextmanager
def tracked(names: list[str], output: Path, params: dict):
    """Around a run reporting to ``names``: ``params`` logged, and a ``log(metrics, step)`` yielded for the figures
    of the end; TensorBoard's folder ``output/tensorboard`` (the trainer's too: ``TENSORBOARD_LOGGING_DIR``)."""
    before = os.environ.get("TENSORBOARD_LOGGING_DIR")
    writers, mlflow, run, own = [], None, None, False
    if "tensorboard" in names:
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(output / "tensorboard")
    if "mlflow" in names:
        mlflow, run, own = _mlflow_run(output, params)

    def log(metrics: dict, step: int) -> None:
        """``metrics``' numbers as metrics at ``step``; their words (a choice) as parameters, or TensorBoard text."""
        numbers = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        words = {k: str(v) for k, v in metrics.items() if isinstance(v, str)}
        if "tensorboard" in names:
            _tensorboard_log(writers, output, params, numbers, words, step)
        if run is not None:
            mlflow.log_metrics(numbers, step=step)
            mlflow.log_params(words)
        if "wandb" in names:
            import wandb

            if wandb.run is not None:
                wandb.log(numbers, step=step)

    failed = True
    try:
        yield log
        failed = False
    finally:
        for writer in writers:
            writer.close()
        if run is not None and own:
            mlflow.end_run("FAILED" if failed else "FINISHED")
        if "tensorboard" in names and before is None:
            os.environ.pop("TENSORBOARD_LOGGING_DIR", None)
        elif "tensorboard" in names:
            os.environ["TENSORBOARD_LOGGING_DIR"] = before
