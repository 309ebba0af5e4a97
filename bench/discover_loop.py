"""Issue 35: the loop in the service on banking77: texts of hidden classes turned away, grouped, accepted, predicted.

    python bench/discover_loop.py [--hidden 3] [--seed 0] [--clusters auto]

``--hidden`` classes (drawn by ``--seed``) are left out of a bundle built from the other classes' training texts
(all-MiniLM-L6-v2, PyTorch, the linear head, ``unknown_rate`` cea's default). A service of that bundle, started with
``keep_unknowns``, answers every test text (32 per request). Then ``cea discover BUNDLE`` groups the texts it kept
(:func:`cea.discover.unknowns.group_unknowns`), and groups are accepted as a person reading the proposal would
(:func:`~cea.discover.unknowns.accept_group`): for each hidden class, under its name, the group holding most of its
kept texts and every other group of the size the estimate counts (at least ``NEW_MIN`` texts and ``NEW_SHARE`` of
those kept) whose central texts are all of that class (a class split in two groups gets both). Records: the share of
each hidden class's test texts turned away and of the known classes' (false alarms), the groups found, each hidden
class's group (the one holding most of its kept texts: how many, the share of the group that is that class, its
central texts that are), the groups accepted for it and their texts, and the accuracy on the hidden classes' training
texts (never seen by the bundle) before and after acceptance, with the share of them answered unknown after it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import time
from collections import Counter

from common import R, save, table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clusters", default="auto")
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from cea.data import load_dataset
    from cea.defaults import DEFAULT_MODEL, UNKNOWN_RATE
    from cea.discover.unknowns import NEW_MIN, NEW_SHARE, accept_group, group_unknowns
    from cea.serving import Bundle
    from cea.serving.app import create_app

    ds = load_dataset("banking77")
    train, test = ds["train"], ds["test"]
    hidden = sorted(random.Random(args.seed).sample(sorted(set(train["label"])), args.hidden))
    known = train[~train["label"].isin(hidden)]
    folder = R / f"discover-loop-s{args.seed}"
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    bundle = Bundle.create(folder, DEFAULT_MODEL, list(known["text"]), list(known["label"]), backend="torch",
                           unknown_rate=UNKNOWN_RATE, progress=False)
    client = TestClient(create_app(bundle, keep_unknowns=100_000))
    texts, labels = list(test["text"]), list(test["label"])
    answers = []
    for i in range(0, len(texts), 32):
        answers += [p["label"] for p in client.post("/predict", json={"texts": texts[i:i + 32]}).json()["predictions"]]
    kept = []
    for _ in range(200):  # kept off the request path: wait for the last of them
        kept = client.get("/unknowns").json()["unknowns"]
        if len(kept) == answers.count("unknown"):
            break
        time.sleep(0.05)
    gold_of = {t: g for t, g in zip(texts, labels)}
    turned = {c: sum(a == "unknown" for a, g in zip(answers, labels) if g == c) / labels.count(c) for c in hidden}
    false_alarms = sum(a == "unknown" for a, g in zip(answers, labels) if g not in hidden) / sum(
        g not in hidden for g in labels)
    served = time.perf_counter() - started
    found = group_unknowns(folder, clusters=int(args.clusters) if args.clusters != "auto" else "auto",
                           seed=args.seed)
    members = {g["id"]: [gold_of[u["text"]] for u in kept if u["id"] in set(g["members"])] for g in found["groups"]}
    rows, chosen = [], {}
    for c in hidden:
        mine = sum(g == c for g in (gold_of[u["text"]] for u in kept))
        best = max(found["groups"], key=lambda g: members[g["id"]].count(c))
        # what a person accepts: its main group, and the others of the estimate's size whose central texts are all its
        chosen[c] = [best] + [g for g in found["groups"] if g is not best and g["size"] >= max(NEW_MIN, NEW_SHARE * len(
            kept)) and all(gold_of.get(t) == c for t in g["central_texts"])]
        central = [gold_of.get(t) for t in best["central_texts"]]
        rows.append([c, round(100 * turned[c], 1), mine, best["id"], best["kind"], members[best["id"]].count(c),
                     round(100 * members[best["id"]].count(c) / len(members[best["id"]]), 1),
                     f"{central.count(c)}/{len(central)}", " ".join(str(g["id"]) for g in chosen[c]),
                     f"{sum(members[g['id']].count(c) for g in chosen[c])}/{sum(g['size'] for g in chosen[c])}"])
    before = {c: [p.label for p in bundle.predict(list(train[train["label"] == c]["text"]))] for c in hidden}
    bundle.close()
    for c, groups in chosen.items():
        accept_group(folder, [g["id"] for g in groups], c)
    after_bundle = Bundle.load(folder)
    after = {c: [p.label for p in after_bundle.predict(list(train[train["label"] == c]["text"]))] for c in hidden}
    after_bundle.close()
    for row, c in zip(rows, hidden):
        row += [round(100 * before[c].count(c) / len(before[c]), 1), round(100 * after[c].count(c) / len(after[c]), 1),
                round(100 * after[c].count("unknown") / len(after[c]), 1)]
    new_groups = sum(g["kind"] == "new" for g in found["groups"])
    summary = {"seed": args.seed, "hidden": hidden, "references": len(known), "kept": len(kept),
               "known_turned_away_percent": round(100 * false_alarms, 1), "groups": len(found["groups"]),
               "new_groups": new_groups, "n_clusters": found["n_clusters"], "estimate": found["estimate"],
               "largest_groups": Counter({g["id"]: g["size"] for g in found["groups"]}).most_common(8),
               "rows": rows, "seconds": {"bundle_and_serving": round(served, 1),
                                         "total": round(time.perf_counter() - started, 1)}}
    save(f"discover_loop-s{args.seed}", summary)
    print(f"{len(kept)} texts kept ({summary['known_turned_away_percent']}% of the known classes' test texts), "
          f"{len(found['groups'])} groups ({new_groups} new)")
    table(["hidden class", "turned away %", "kept", "its group", "kind", "of it in the group", "group purity %",
           "central texts of it", "groups accepted", "of it / texts accepted",
           "train texts predicted as it, before %", "after accepting %",
           "after accepting, unknown %"], rows)


if __name__ == "__main__":
    main()
