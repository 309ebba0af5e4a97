"""Issue 35: the loop in the service on banking77: texts of hidden classes turned away, grouped, accepted, predicted.

    python bench/discover_loop.py [--hidden 3] [--seed 0] [--clusters auto]

``--hidden`` classes (drawn by ``--seed``) are left out of a bundle built from the other classes' training texts
(all-MiniLM-L6-v2, PyTorch, the linear head, ``unknown_rate`` cea's default). A service of that bundle, started with
``keep_unknowns``, answers every test text (32 per request). Then ``cea discover BUNDLE`` groups the texts it kept
(:func:`cea.discover.unknowns.group_unknowns`), and groups are accepted as a person reading the proposal would
(:func:`~cea.discover.unknowns.accept_group`): for each hidden class, under its name, every group of at least
``NEW_MIN`` texts more than half of whose central texts are that class's, or all of them where the group was marked as
another known class (a class split in two groups gets both; a class no group reads as gets none). Records: the share of
each hidden class's test texts turned away and of the known classes' (false alarms), the groups found, each hidden
class's group (the one holding most of its kept texts: how many, the share of the group that is that class, its
central texts that are), the groups accepted for it and their texts, and the accuracy on the hidden classes' training
texts (never seen by the bundle) before and after acceptance, with the share of them answered unknown after it.

``--rounds 2`` (the default) goes on as a service's owners would: half of each hidden class's training texts (drawn by
the seed) come as traffic to the bundle after acceptance, what it turns away is kept beside what round 1 left, grouped
again and accepted the same way (into the accepted class), and the other half is asked before and after that round.

With the defaults (3 hidden classes, two rounds, the count estimated) its figures are records
(``docs/records/discover_loop.jsonl``): the means over every seed run so far.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from common import R, record, save, table


def serve(client, texts: list[str]) -> tuple[list[str], list[dict]]:
    """Every text through ``/predict`` (32 a request): the answers, and the kept unknowns once all are written."""
    before = len(client.get("/unknowns").json()["unknowns"])
    answers = []
    for i in range(0, len(texts), 32):
        answers += [
            p["label"] for p in client.post("/predict", json={"texts": texts[i : i + 32]}).json()["predictions"]
        ]
    kept = []
    for _ in range(200):  # kept off the request path: wait for the last of them
        kept = client.get("/unknowns").json()["unknowns"]
        if len(kept) == before + answers.count("unknown"):
            break
        time.sleep(0.05)
    return answers, kept


class Reading(NamedTuple):
    """:func:`as_a_person`'s answer: the groups accepted for each hidden class, each group's gold labels, and the
    group holding most of each hidden class's kept texts."""

    chosen: dict
    members: dict
    best: dict


def as_a_person(found: dict, kept: list[dict], gold_of: dict, hidden: list[str]) -> Reading:
    """``(chosen, members, best)``: for each hidden class, the groups of at least ``NEW_MIN`` texts a person reading
    their central texts accepts under its name (more than half of them the class's; all of them where the grouping
    marked the group as another known class, which ``cea discover --accept`` notes); each group's gold labels; and
    the group holding most of each hidden class's kept texts (what the person cannot see)."""
    from cea.discover.unknowns import NEW_MIN

    members = {g["id"]: [gold_of[u["text"]] for u in kept if u["id"] in set(g["members"])] for g in found["groups"]}

    def reads_as(group: dict, c: str) -> bool:
        central = [gold_of.get(t) for t in group["central_texts"]]
        if group["kind"] == "known" and group["known_class"] != c:
            return central.count(c) == len(central)
        return central.count(c) > len(central) / 2

    chosen = {c: [g for g in found["groups"] if g["size"] >= NEW_MIN and reads_as(g, c)] for c in hidden}
    best = {c: max(found["groups"], key=lambda g: members[g["id"]].count(c)) for c in hidden}
    return Reading(chosen, members, best)


def predicted(folder, texts_of: dict) -> dict:
    """Each hidden class's texts answered by the bundle in ``folder``: {class: [labels]}."""
    from cea.bundle import Bundle

    bundle = Bundle.load(folder)
    try:
        return {c: [p.label for p in bundle.predict(texts)] for c, texts in texts_of.items()}
    finally:
        bundle.close()


def share(answers: list[str], label: str) -> float:
    return round(100 * answers.count(label) / len(answers), 1)


@dataclass
class Loop:
    """What both rounds share: the bundle's folder, the hidden classes, every text's gold label, and the grouping's
    cluster count (``"auto"``: estimated) and seed."""

    folder: Path
    hidden: list[str]
    gold_of: dict
    clusters: int | str
    seed: int


def parse() -> argparse.Namespace:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clusters", default="auto")
    parser.add_argument("--rounds", type=int, choices=(1, 2), default=2)
    return parser.parse_args()


def accept(folder, chosen: dict) -> None:
    """Each hidden class's chosen groups accepted into it (``cea discover --accept``)."""
    from cea.discover.unknowns import accept_group

    for c, groups in chosen.items():
        if groups:
            accept_group(folder, [g["id"] for g in groups], c)


def first_rows(loop: Loop, turned: dict, kept: list[dict], reading: Reading) -> list[list]:
    """Round 1's row of each hidden class: turned away, kept, its group (kind, of it, purity, central texts of it),
    and the groups accepted for it with their texts of it."""
    chosen, members, main_group = reading
    rows = []
    for c in loop.hidden:
        mine = sum(g == c for g in (loop.gold_of[u["text"]] for u in kept))
        best = main_group[c]
        central = [loop.gold_of.get(t) for t in best["central_texts"]]
        rows.append(
            [
                c,
                round(100 * turned[c], 1),
                mine,
                best["id"],
                best["kind"],
                members[best["id"]].count(c),
                round(100 * members[best["id"]].count(c) / len(members[best["id"]]), 1),
                f"{central.count(c)}/{len(central)}",
                " ".join(str(g["id"]) for g in chosen[c]),
                f"{sum(members[g['id']].count(c) for g in chosen[c])}/{sum(g['size'] for g in chosen[c])}",
            ]
        )
    return rows


def second_round(loop: Loop, unseen: dict) -> dict:
    """Round 2 (module docstring): half of each hidden class's training texts as traffic, grouped and accepted again,
    the other half asked before and after; its table printed, its summary returned."""
    from fastapi.testclient import TestClient

    from cea.bundle import Bundle
    from cea.discover.unknowns import group_unknowns
    from cea.service.app import create_app

    hidden, gold_of = loop.hidden, loop.gold_of
    rng = random.Random(loop.seed)
    halves = {c: rng.sample(unseen[c], len(unseen[c])) for c in hidden}
    traffic = [t for c in hidden for t in halves[c][: len(halves[c]) // 2]]
    asked = {c: halves[c][len(halves[c]) // 2 :] for c in hidden}
    first = predicted(loop.folder, asked)
    after_bundle = Bundle.load(loop.folder)
    answers, kept = serve(TestClient(create_app(after_bundle, keep_unknowns=100_000)), traffic)
    after_bundle.close()
    found = group_unknowns(loop.folder, clusters=loop.clusters, seed=loop.seed)
    chosen, members, _ = as_a_person(found, kept, gold_of, hidden)
    accept(loop.folder, chosen)
    second = predicted(loop.folder, asked)
    rows2 = [
        [
            c,
            len(asked[c]),
            share(first[c], c),
            share(first[c], "unknown"),
            sum(a == "unknown" for a, t in zip(answers, traffic) if gold_of[t] == c),
            " ".join(f"{g['id']} ({g['kind']})" for g in chosen.get(c, [])),
            f"{sum(members[g['id']].count(c) for g in chosen.get(c, []))}/{sum(g['size'] for g in chosen.get(c, []))}",
            share(second[c], c),
            share(second[c], "unknown"),
        ]
        for c in hidden
    ]
    table(
        [
            "hidden class",
            "texts asked",
            "predicted as it after round 1 %",
            "unknown %",
            "its traffic turned away",
            "groups accepted",
            "of it / texts accepted",
            "predicted as it after round 2 %",
            "unknown %",
        ],
        rows2,
    )
    return {"traffic": len(traffic), "kept": len(kept), "groups": len(found["groups"]), "rows": rows2}


def main() -> None:
    args = parse()
    from fastapi.testclient import TestClient

    from cea.bundle import Bundle
    from cea.data import load_dataset
    from cea.defaults import DEFAULT_MODEL, UNKNOWN_RATE
    from cea.discover.unknowns import group_unknowns
    from cea.service.app import create_app

    ds = load_dataset("banking77")
    train, test = ds["train"], ds["test"]
    hidden = sorted(random.Random(args.seed).sample(sorted(set(train["label"])), args.hidden))
    known = train[~train["label"].isin(hidden)]
    folder = R / f"discover-loop-s{args.seed}"
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    bundle = Bundle.create(
        folder,
        DEFAULT_MODEL,
        list(known["text"]),
        list(known["label"]),
        backend="torch",
        unknown_rate=UNKNOWN_RATE,
        progress=False,
    )
    texts, labels = list(test["text"]), list(test["label"])
    answers, kept = serve(TestClient(create_app(bundle, keep_unknowns=100_000)), texts)
    gold_of = {**{t: g for t, g in zip(train["text"], train["label"])}, **{t: g for t, g in zip(texts, labels)}}
    turned = {c: sum(a == "unknown" for a, g in zip(answers, labels) if g == c) / labels.count(c) for c in hidden}
    false_alarms = sum(a == "unknown" for a, g in zip(answers, labels) if g not in hidden) / sum(
        g not in hidden for g in labels
    )
    served = time.perf_counter() - started
    clusters = int(args.clusters) if args.clusters != "auto" else "auto"
    loop = Loop(folder, hidden, gold_of, clusters, args.seed)
    found = group_unknowns(folder, clusters=clusters, seed=args.seed)
    reading = as_a_person(found, kept, gold_of, hidden)
    rows = first_rows(loop, turned, kept, reading)
    unseen = {c: list(train[train["label"] == c]["text"]) for c in hidden}
    before = {c: [p.label for p in bundle.predict(unseen[c])] for c in hidden}
    bundle.close()
    accept(folder, reading.chosen)
    after = predicted(folder, unseen)
    for row, c in zip(rows, hidden):
        row += [share(before[c], c), share(after[c], c), share(after[c], "unknown")]
    new_groups = sum(g["kind"] == "new" for g in found["groups"])
    summary = {
        "seed": args.seed,
        "hidden": hidden,
        "references": len(known),
        "kept": len(kept),
        "known_turned_away_percent": round(100 * false_alarms, 1),
        "groups": len(found["groups"]),
        "new_groups": new_groups,
        "n_clusters": found["n_clusters"],
        "estimate": found["estimate"],
        "largest_groups": Counter({g["id"]: g["size"] for g in found["groups"]}).most_common(8),
        "rows": rows,
    }
    print(
        f"{len(kept)} texts kept ({summary['known_turned_away_percent']}% of the known classes' test texts), "
        f"{len(found['groups'])} groups ({new_groups} new)"
    )
    table(
        [
            "hidden class",
            "turned away %",
            "kept",
            "its group",
            "kind",
            "of it in the group",
            "group purity %",
            "central texts of it",
            "groups accepted",
            "of it / texts accepted",
            "train texts predicted as it, before %",
            "after accepting %",
            "after accepting, unknown %",
        ],
        rows,
    )
    if args.rounds == 2:  # half of each hidden class's training texts as traffic, the other half asked
        summary["round_2"] = second_round(loop, unseen)
    summary["seconds"] = {"bundle_and_serving": round(served, 1), "total": round(time.perf_counter() - started, 1)}
    save(f"discover_loop-s{args.seed}", summary)
    if args.hidden == 3 and args.rounds == 2 and args.clusters == "auto":
        records()


def records() -> None:
    """The loop's figures as records, over every seed run so far (``bench/results/discover_loop-s*.json``): the
    hidden classes' unseen texts predicted as them after one round, and after a second."""
    import json

    runs = {int(p.stem.split("-s")[-1]): json.loads(p.read_text()) for p in sorted(R.glob("discover_loop-s*.json"))}
    runs = {s: r for s, r in runs.items() if "round_2" in r}
    if not runs:
        return
    seeds = ", ".join(map(str, sorted(runs)))
    first = [row[11] for r in runs.values() for row in r["rows"]]
    second = [row[7] for r in runs.values() for row in r["round_2"]["rows"]]
    again = [row[2] for r in runs.values() for row in r["round_2"]["rows"]]
    command = "python bench/discover_loop.py --hidden 3 --seed S"
    record(
        "discovery in the service: hidden classes predicted after one round",
        round(sum(first) / len(first), 1),
        baseline=0,
        unit="% of their unseen texts",
        section="discovery",
        command=command,
        baseline_is="nothing groups what was turned away",
        note=f"banking77, 3 hidden classes, seeds {seeds}: {min(first):g}-{max(first):g} %",
    )
    record(
        "discovery in the service: after a second round",
        round(sum(second) / len(second), 1),
        baseline=round(sum(again) / len(again), 1),
        unit="% of their unseen texts",
        section="discovery",
        command=command,
        baseline_is="one round",
        note=f"seeds {seeds}; the other half of each class's texts asked",
    )


if __name__ == "__main__":
    main()
