"""``cea serve``'s fine-tuning in the background: ``cea fit`` on the bundle's examples in a process of its own, and the
fitted encoder swapped in where it is better on annotations it did not train on (:mod:`cea.bundle.renewal`).

When
    On Label Studio's ``START_TRAINING``, and by itself whenever the annotations have doubled since the last fit (from
    ``first``, :data:`FIRST` by default, on; 0: only on START_TRAINING); never with ``cea serve --no-train``. One fit
    at a time among the processes serving the bundle (``training.lock`` in its folder; ``training.json`` keeps the
    annotations at the last fit's start for all of them). The service keeps answering
    meanwhile: the fit runs with one core fewer than the machine has (at least one thread) and at a lower priority.

Started from
    The bundle's first encoder (kept through renewals), as ``cea fit`` offline starts from the model: a later encoder
    was trained on annotations that now fall in the fit's dev split, where it would look better than it is, and be
    kept frozen for it.

Held back
    An annotation whose key's SHA-256 falls in the first fifth (:func:`held_back`) is never trained on, in this fit or
    any later one. The live bundle and the fitted one each classify those annotations from the same references, as
    each would serve them: the examples the fit trained on and the label names' examples, each encoded by its own
    encoder, with its own classifier. The fitted one is swapped in only where :func:`cea.service.judging.judge` finds
    it ahead: more of them right by more than two texts, else (a tie, or one or two texts) a higher mean log-probability
    of their gold labels. (Judged
    without the names, the live bundle got 36 % and 74 % of the held-back right at 2 and 4 annotations a class, where
    it answered 82 % and 87 % of clinc150's test split; a fit that gained 7.6 points there was kept out, seed 1.)
    ``cea fit`` is handed them as its test split, which it only reports on: it carves no test split from the
    annotations it trains on (a fifth of them otherwise), only its dev split. With fewer than :data:`MIN_HELD` held
    back no fit runs (it could not be judged), nor where no label has two annotations to train on (``cea fit`` carves
    its dev split from them: one annotation a class is not enough). The label names' examples (``label-name:``) stay
    out of the fit's data: ``cea fit`` adds the names.

Progress
    :meth:`BackgroundFit.status`: ``state`` (idle, training, judging, swapping), ``stage`` (the fit's last line),
    ``percent`` (of its budget) and ``last``, the last fit's figures (held-back accuracy of each, when it ended,
    ``swapped`` and, where it was not, ``why``): ``GET /health`` shows it under ``training``; ``on_end`` tells the
    service's metrics and log.

No peer backend fine-tunes in the background while it learns each annotation at once (Label Studio's examples
retrain in the request), hence this module.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..bundle import Bundle
from ..bundle.bundle import encoder_folder
from ..bundle.examples import NAMED
from ..bundle.layout import FIRST_ENCODER
from ..bundle.renewal import encoded, renew
from ..errors import CeaError
from ..paths import write_json
from .judging import Scored, judge

ANNOTATION = "label-studio:"  # the sources of annotations' examples (cea.service.ml_backend)
FIRST = 50  # annotations at the first automatic fit; then each time they have doubled since the last
HELD_BACK = 5  # one annotation in this many is held back to judge fits on
MIN_HELD = 10  # held-back annotations needed to judge a fit at all
BUDGET = 900.0  # seconds: cea fit's own default
LOCK = "training.lock"
NICE = 10  # the fit's priority below the service's
STATE = "training.json"  # the annotations at the last fit's start, for every process serving the bundle


def held_back(source: str | None) -> bool:
    """Whether the example of ``source`` is held back from every fit: an annotation whose key's SHA-256 starts in the
    first 1 / :data:`HELD_BACK` of its range (the same in every process and every fit)."""
    if source is None or not source.startswith(ANNOTATION):
        return False
    return hashlib.sha256(source.encode()).digest()[0] * HELD_BACK < 256


def run_fit(
    data: Path,
    output: Path,
    work: Path,
    budget: float,
    model: str,
    on_line: Callable[[str], None],
    on_start: Callable[[subprocess.Popen], None],
    command: list[str] | None = None,
) -> None:
    """``cea fit DATA -o OUTPUT`` in a process of its own, within ``budget`` seconds, ``model`` the encoder to start
    from; ``on_start``: told of the process, ``on_line``: handed each line of its output. A CeaError naming how it
    ended where it failed. ``command``: another command to run so (tests)."""
    threads = str(max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()) - 1))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = command or [
        sys.executable,
        "-m",
        "cea",
        "fit",
        str(data),
        "-o",
        str(output),
        "--budget",
        f"{budget:g}s",
        "--models",
        model,
        "--work",
        str(work / "runs"),
    ]
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as process:
        # a lower priority, set from here: no preexec_fn, which runs Python in a child forked from a threaded service
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, process.pid, NICE)
        on_start(process)
        for line in process.stdout:
            lines.append(line.rstrip())
            on_line(lines[-1])
        code = process.wait()
    if code != 0:
        said = next((line for line in reversed(lines) if line.strip()), "")
        how = f"was stopped by signal {-code}" if code < 0 else f"exited with {code}"
        raise CeaError(f"cea fit {how}" + (f": {said}" if said else ""))


class BackgroundFit:
    """Fits of ``bundle`` in the background; ``budget``: each fit's, in seconds; ``work``: the folder of the fits'
    data, runs and bundles (a folder each); ``first``: annotations at the first fit started by itself, the next ones
    as they double (0: none); ``fit``: :func:`run_fit` (tests hand their own); ``during``:
    :func:`cea.bundle.renewal.renew`'s hook; ``on_end(last)``: told of each fit's end."""

    def __init__(
        self,
        bundle: Bundle,
        work: Path,
        budget: float = BUDGET,
        first: int = FIRST,
        fit=run_fit,
        during=None,
        on_end=None,
    ):
        self.bundle, self.work, self.budget, self.first = bundle, Path(work), budget, first
        self.fit, self.during, self.on_end = fit, during, on_end
        self.state, self.stage, self.started, self.last = "idle", None, None, None
        self.job = None  # the fit in hand's, or the last one's: its folder's name (Label Studio's job id)
        self.fitted_at = 0  # annotations at the start of the last fit
        self.thread, self.process, self._guard = None, None, threading.Lock()

    def status(self) -> dict:
        """The state for ``GET /health`` (module docstring)."""
        now = {"state": self.state}
        if self.state != "idle":
            elapsed = time.monotonic() - self.started
            now.update(
                stage=self.stage, percent=round(min(99.0, 100.0 * elapsed / self.budget), 1), seconds=round(elapsed, 1)
            )
        return {**now, "last": self.last}

    def annotations(self) -> int:
        """The annotations the bundle holds now."""
        return sum(1 for s in self.bundle.sources if s is not None and s.startswith(ANNOTATION))

    def changed(self) -> bool:
        """After an annotation: a fit started where they have doubled since the last (and number at least
        ``first``); whether one started."""
        if not self.first or self.state != "idle":
            return False
        count = self.annotations()
        if count < max(self.first, 2 * max(self.fitted_at, self._fitted_elsewhere())):
            return False
        return self.start()

    def _fitted_elsewhere(self) -> int:
        """The annotations at the start of the last fit any process of the bundle ran (:data:`STATE`; 0: none)."""
        try:
            return int(json.loads((self.bundle.root / STATE).read_text())["annotations"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def start(self) -> bool:
        """A fit started in the background, unless one runs here or in another process of the bundle."""
        with self._guard:
            if self.state != "idle":
                return False
            lock = open(self.bundle.root / LOCK, "a+b")  # noqa: SIM115 (held until the fit ends)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                return False
            self.state, self.stage, self.started = "training", "starting", time.monotonic()
            self.job = dt.datetime.now().strftime("fit-%Y%m%d-%H%M%S-%f")
            self.thread = threading.Thread(target=self._run, args=(lock,), name="cea-fit", daemon=True)
            self.thread.start()
            return True

    def job_status(self, job: str) -> str | None:
        """Label Studio's status of the fit ``job``: started, finished (judged, swapped in or not) or failed; None
        for a job that is neither the one in hand nor the last."""
        if job != self.job:
            return None
        if self.state != "idle":
            return "started"
        return "failed" if self.last is None or self.last["outcome"] == "failed" else "finished"

    def stop(self) -> None:
        """Stop the fit in hand, if any (the service is stopping): the live bundle stays as it is."""
        process = self.process
        if process is not None and process.poll() is None:
            process.terminate()
        self.wait(30)

    def wait(self, timeout: float | None = None) -> None:
        """Until the fit in hand (if any) ends."""
        if self.thread is not None:
            self.thread.join(timeout)

    def _run(self, lock) -> None:
        outcome = {"job": self.job, "started": _now()}
        try:
            outcome.update(self._fit_and_judge())
        except Exception as exc:  # noqa: BLE001 (any failure leaves the live bundle serving, and is said)
            outcome.update(
                outcome="failed", swapped=False, why=str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            )
        finally:
            outcome["ended"] = _now()
            outcome["seconds"] = round(time.monotonic() - self.started, 1)
            self.last, self.state, self.stage, self.process = outcome, "idle", None, None
            lock.close()
            if self.on_end is not None:
                self.on_end(outcome)

    def _fit_and_judge(self) -> dict:
        """One fit: the data written, ``cea fit`` run, both judged on the held-back annotations, swapped if better."""
        with self.bundle.lock:
            self.bundle.changes.sync()
            texts, labels, sources = list(self.bundle.texts), self.bundle.stored_labels(), self.bundle.sources
            vectors = self.bundle.embeddings.copy()
        self.fitted_at = sum(1 for s in sources if s is not None and s.startswith(ANNOTATION))
        write_json(self.bundle.root / STATE, {"annotations": self.fitted_at, "job": self.job, "started": _now()})
        if self.bundle.multi_label:
            raise CeaError("a multi-label bundle is not fitted in the background; run cea fit on its examples")
        held = [i for i, s in enumerate(sources) if held_back(s)]
        train = [i for i, s in enumerate(sources) if not held_back(s) and not (s or "").startswith(NAMED)]
        named = [i for i, s in enumerate(sources) if (s or "").startswith(NAMED)]
        result = {"annotations": self.fitted_at, "trained_on": len(train), "held_back": len(held)}
        if len(held) < MIN_HELD:
            return {
                **result,
                "outcome": "kept",
                "swapped": False,
                "why": f"{len(held)} annotations held back, fewer than {MIN_HELD} to judge a fit on: none ran",
            }
        if max(Counter(labels[i] for i in train).values(), default=0) < 2:
            return {
                **result,
                "outcome": "kept",
                "swapped": False,
                "why": "no label has two annotations to train on (cea fit carves its dev split from them): none ran",
            }
        folder = self.work / self.job
        (folder / "data").mkdir(parents=True, exist_ok=True)
        _write_rows(folder / "data" / "train.csv", [(texts[i], labels[i]) for i in train])
        _write_rows(folder / "data" / "test.csv", [(texts[i], labels[i]) for i in held])
        first = self.bundle.root / FIRST_ENCODER
        start = first if first.is_dir() else self.bundle.root / encoder_folder(self.bundle.manifest)
        self.fit(folder / "data", folder / "bundle", folder, self.budget, str(start), self._said, self._started)
        self.state, self.stage = "judging", "on the held-back annotations"
        fitted = Bundle.load(folder / "bundle", **self.bundle.encoder_options)
        try:
            gold, references = [labels[i] for i in held], train + named  # as each would serve
            known = [labels[i] for i in references]
            live = scored(self.bundle, vectors[references], known, vectors[held], gold)
            ours = scored(
                fitted,
                encoded(fitted, [texts[i] for i in references]),
                known,
                encoded(fitted, [texts[i] for i in held]),
                gold,
            )
            verdict = judge(live, ours)
            result.update(verdict.figures(), why=verdict.why)
            if not verdict.swap:
                return {**result, "outcome": "kept", "swapped": False}
            self.state, self.stage = "swapping", "encoding the examples with the fitted encoder"
            manifest = renew(self.bundle, fitted, during=self.during)
        finally:
            fitted.store.close()
        return {**result, "outcome": "swapped", "swapped": True, "generation": manifest["generation"]}

    def _started(self, process: subprocess.Popen) -> None:
        self.process = process

    def _said(self, line: str) -> None:
        if line.strip():
            self.stage = line.strip()[:200]


def _write_rows(path: Path, rows: list[tuple[str, str]]) -> None:
    """A ``text,label`` CSV file of ``rows``."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "label"])
        writer.writerows(rows)


def scored(bundle: Bundle, references: np.ndarray, labels: list, queries: np.ndarray, gold: list) -> Scored:
    """How ``bundle``'s classifier, on ``references`` (their ``labels``), answers ``queries``: which it gives their
    ``gold`` label, and the probability it gives each gold label (0 for a label it does not know)."""
    classifier = bundle.classifier.replace(unknown_threshold=None)
    head = bundle.head() if classifier.head == "trained" else None
    gold = np.asarray(gold, dtype=str)
    decision = classifier.answer(references, labels, queries, head=head)
    classes, probabilities = classifier.class_probabilities(references, labels, queries, head=head)
    column = {label: c for c, label in enumerate(np.asarray(classes, dtype=str))}
    gold_probability = np.array([probabilities[i, column[g]] if g in column else 0.0 for i, g in enumerate(gold)])
    return Scored(decision.labels.astype(str) == gold, gold_probability)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
