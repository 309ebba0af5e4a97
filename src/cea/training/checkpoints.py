"""What a run keeps beside each trainer checkpoint and how a stopped run resumes: the objective's memory (and head),
the run's config (a resume under other options is refused), which checkpoints stay, the dev evaluations made before."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file
from transformers import TrainerCallback

from ..errors import OptionError, flag
from ..paths import atomic_path, write_json

MEMORY_FILE = "cea_memory.safetensors"
RUN_FILE = "run_config.json"  # in each checkpoint: the config a run resumed from it must match
# what a resumed run may change: where it runs and how the work is cut, not what it learns
RESUMABLE_CHANGES = frozenset({"resume", "device", "chunk_size", "save_steps"})


def run_record(config, options) -> dict:
    """The run's config as JSON values, its objective's ``options`` resolved (:func:`check_resumed_config`)."""
    record = {k: v for k, v in dataclasses.asdict(config).items() if k not in RESUMABLE_CHANGES}
    return json.loads(json.dumps({**record, "options": dataclasses.asdict(options)}, default=str))


def check_resumed_config(config, options, checkpoint: Path) -> None:
    """Refuse to resume a run under another configuration than it started with (``run_config.json`` in
    ``checkpoint``): the results would name a run that never happened. Where and how the work is cut may change
    (device, chunk size, save steps); ``options`` are compared resolved. Runs without the record resume unchecked."""
    path = checkpoint / RUN_FILE
    if not path.exists():
        return
    started, now = json.loads(path.read_text()), run_record(config, options)
    changed = [k for k in now if k in started and started[k] != now[k]]
    if changed:
        name, was, got = changed[0], started, now
        if name == "options":  # name the option itself
            was, got = started["options"], now["options"]
            name = next(k for k in sorted(set(was) | set(got)) if was.get(k) != got.get(k))
        problem = (
            f"is {got.get(name)!r} but the run in {checkpoint.parent.parent} started with {was.get(name)!r}; "
            "resume with the same value or start a new run in another output folder"
        )
        raise OptionError(
            name, problem, f"{flag(name)} {problem.replace('output folder', '--output')}", prefix="resume: "
        )


def memory_callback(objective, checkpoints: Path, record: dict):
    class MemoryCheckpoint(TrainerCallback):
        """Save the objective's memory (and sampler) and the run's ``record`` (:func:`check_resumed_config`) by each
        checkpoint."""

        def on_save(self, args, state, control, **kwargs):
            # under torchrun every process holds the same memory (cea.objectives.gather): the main one writes it
            if not state.is_world_process_zero:
                return
            folder = checkpoints / f"checkpoint-{state.global_step}"
            write_json(folder / RUN_FILE, record)
            if hasattr(objective, "memory_state"):
                with atomic_path(folder / MEMORY_FILE) as tmp:
                    save_file({k: v.contiguous() for k, v in objective.memory_state().items()}, str(tmp))

        @staticmethod
        def restore(folder: Path):
            path = folder / MEMORY_FILE
            if hasattr(objective, "load_memory_state") and path.exists():
                objective.load_memory_state(load_file(str(path)))

    return MemoryCheckpoint()


def prune_callback(checkpoints: Path, select_by: tuple[str, str] | None):
    class PruneCheckpoints(TrainerCallback):
        """Keep the last checkpoint (for ``--resume``) and, with ``select_by`` (the dev evaluator's name and metric),
        the best so far (for ``--select best``); remove the others (each holds the optimizer's state) as each new one is
        saved. The trainer's ``save_total_limit`` keeps a best one only with ``load_best_model_at_end`` (its metric)."""

        def on_save(self, args, state, control, **kwargs):
            if not state.is_world_process_zero:
                return
            keep = {state.global_step}
            judged = judged_before(state.log_history, select_by[0], []) if select_by else []
            if judged:
                keep.add(max(judged, key=lambda h: h[select_by[1]])["steps"])
            for folder in checkpoints.glob("checkpoint-*"):
                step = folder.name.rpartition("-")[2]
                if step.isdigit() and int(step) not in keep:
                    shutil.rmtree(folder, ignore_errors=True)

    return PruneCheckpoints()


def judged_before(log_history: list[dict], name: str, since: list[dict]) -> list[dict]:
    """The dev evaluations a resumed run made before it was stopped, as :class:`DevEvaluator` history entries, read
    from the trainer's restored log (``eval_NAME_METRIC``), so that ``--select best`` chooses among every epoch."""
    prefix, later = f"eval_{name}_", {h["steps"] for h in since}
    return [
        {"epoch": e.get("epoch"), "steps": e["step"], **{k[5:]: v for k, v in e.items() if k.startswith(prefix)}}
        for e in log_history
        if any(k.startswith(prefix) for k in e) and e.get("step") not in later
    ]
