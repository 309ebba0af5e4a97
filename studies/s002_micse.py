"""Study 002 (miCSE) rerun: SimCSE against miCSE trained on few unlabelled sentences, judged on STS-B's test pairs.

    python studies/s002_micse.py                         # 1k, 10k and 100k sentences, seeds 0,1,2
    python studies/s002_micse.py --sizes 1000,10000      # what fits in an hour on 2 cores
    python studies/s002_micse.py --quick                 # a tiny random BERT on made-up sentences (the tests)
    python studies/s002_micse.py --sizes 100000 --seeds 2 --join  # one seed more, joined to those recorded before

Each size draws that many sentences (with the seed) from a corpus of sentences that are not STS-B's, trains one epoch
of SimCSE (dropout views, in-batch negatives) and of miCSE (the same, plus the attention of the two views aligned),
batch 64, lr 3e-5, sentences cut at 32 tokens (the studies' ``--max_seq_length 32``, ``cea train --max-seq-length``),
and reports STS-B test Spearman x 100, the mean of the seeds; SICK-R where the hub is reachable.
The study trained BERT-base on wiki1m (a million Wikipedia sentences) and reports SentEval's STS tasks: its table is
on the page beside cea's; its claim tested here is that miCSE is ahead of SimCSE when sentences are few.

What differs: wiki1m is on the hub only; its stand-in is every sentence of the Wikipedia abstracts of ``dbpedia219``
and the posts of ``yahoo`` and ``20ng`` (cea's catalog, from PyPI), split at sentence ends, prose only (5-40 words,
at most 250 characters, mostly letters), duplicates dropped; all-MiniLM-L6-v2 (already trained for similarity) in
place of BERT-base; the trained model keeps the 32-token cut when it is judged (SentEval reads whole sentences).
"""

from __future__ import annotations

import dataclasses
import random
import re

from shared import (
    AHEAD,
    LEVEL,
    WORDS,
    arguments,
    claim,
    difference,
    figure,
    finish,
    model_name,
    picture,
    quick_pairs,
    recorded,
    run,
    seed_dots,
    seeded,
    side_by_side,
    spearman_on_test,
    trained,
    verdict,
)

SOURCES = ("dbpedia219", "yahoo", "20ng")
SETTINGS = {"epochs": 1.0, "batch_size": 64, "lr": 3e-5, "max_seq_length": 32}
METHODS = ("simcse", "micse")
NAMES = {"simcse": "SimCSE", "micse": "miCSE"}  # the methods as the picture names them
FEW = 10_000  # the few-shot regime the claim is about: up to 1 % of wiki1m's million sentences
UNMOVED = 1.0  # Spearman x 100 either way: a method that moves the model less has learned nothing the claim is about


def options(parser) -> None:
    parser.add_argument("--sizes", default="1000,10000,100000", help="sentences drawn for each run")
    parser.add_argument("--plot", action="store_true", help="draw the seeds' picture from the records, train nothing")


def seeds_picture(args) -> None:
    """Each size's SimCSE and miCSE seeds as dots beside the model before training (a dashed line), drawn from the
    records (``docs/figures/study002-seeds.png``)."""
    panels: dict[str, dict[str, list[float]]] = {}
    marks: dict[str, dict[str, float]] = {}
    frozen = {r["model"]: r["value"] for r in recorded(args) if r.get("row") == "before training"}
    for r in recorded(args):
        if r.get("table") == "few sentences" and r.get("runs"):
            title = f"{r['row']}, {r['model']}"
            panels.setdefault(title, {})[NAMES[r["column"]]] = [x["value"] for x in r["runs"].values()]
            if r["model"] in frozen:
                marks[title] = {"before training": frozen[r["model"]]}
    if panels:
        seed_dots(
            picture(args, "seeds"),
            dict(sorted(panels.items(), key=lambda kv: int(kv[0].split()[0]))),
            "STS-B test Spearman x 100",
            marks,
        )


def corpus(args) -> str:
    """The stand-in for wiki1m as a ``.txt`` file, one sentence a line (``--quick``: made-up sentences)."""
    from cea import load_dataset

    path = args.output / "sentences.txt"
    if path.exists():
        return str(path)
    if args.quick:
        rng = random.Random(0)
        sentences = {" ".join(rng.sample(WORDS, 6)) for _ in range(200)}
    else:
        sentences = {}
        for name in SOURCES:
            ds = load_dataset(name)
            for split in ("train", "dev", "test"):
                for text in ds[split]["text"]:
                    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(str(text).split())):
                        if prose(sentence):
                            sentences[sentence] = None
    lines = sorted(sentences)
    random.Random(0).shuffle(lines)
    args.output.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} sentences from {', '.join(SOURCES) if not args.quick else 'made-up words'} in {path}")
    return str(path)


def prose(sentence: str) -> bool:
    """A sentence of prose: 5-40 words, at most 250 characters, 85 % of them letters or spaces (20ng's posts hold
    encoded attachments and signatures whose "words" run to thousands of tokens)."""
    letters = sum(c.isalpha() or c == " " for c in sentence)
    return 5 <= len(sentence.split()) <= 40 and len(sentence) <= 250 and letters >= 0.85 * len(sentence)


def sick(model_folder: str) -> float | None:
    """SICK-R test Spearman x 100 of a trained model, or None where the hub (SICK's only source) is unreachable."""
    from cea import load_dataset, load_encoder
    from cea.data.hub import hub_reachable
    from cea.errors import CeaError
    from cea.evaluation.similarity import evaluate_pairs

    if not hub_reachable():
        return None
    try:
        pairs = load_dataset("sick")["test"]
    except CeaError as exc:  # offline (HF_HUB_OFFLINE=1) with SICK not in the datasets cache
        print(f"SICK-R skipped: {exc}")
        return None
    return evaluate_pairs(load_encoder(model_folder), pairs)["spearman"]  # x 100 already


def before_training(model: str, judge: str) -> float:
    """STS-B test Spearman x 100 of ``model`` as it comes, cut at the 32 tokens the trained models keep: what either
    method must beat to have learned anything."""
    from cea import load_encoder
    from cea.encoders.build import cut_tokens

    encoder = load_encoder(model)
    cut_tokens(encoder, SETTINGS["max_seq_length"])
    return spearman_on_test(encoder, judge)


def main() -> None:
    args = arguments("002", __doc__, models=("all-MiniLM-L6-v2",), extra=options, joins=True)
    if args.plot:
        seeds_picture(args)
        return
    sizes = [100] if args.quick else [int(s) for s in args.sizes.split(",")]
    sentences = corpus(args)
    available = sum(1 for _ in open(sentences))
    if too_many := [n for n in sizes if n > available]:
        print(f"sizes {', '.join(map(str, too_many))} need more than the {available} sentences at hand; skipped")
        sizes = [n for n in sizes if n <= available]
    from cea import TrainConfig
    from cea.data.hub import hub_reachable

    if not hub_reachable():
        print("SICK-R is on the hub only and the hub is unreachable: STS-B alone")
    model, judge = args.models[0], quick_pairs(args.output / "data-pairs") if args.quick else "stsb"
    table: dict[tuple[str, str], float] = {}
    runs_of: dict[tuple[str, str], dict] = {}  # (method, sentences) -> seed -> run
    for n in sizes:
        for method in METHODS:
            runs = {}
            for seed in args.seeds:
                folder = args.output / f"{method}-{n}-{model_name(model)}-s{seed}"
                config = TrainConfig(
                    dataset=sentences,
                    model=model,
                    objective=method,
                    train_limit=n,
                    limit_seed=seed,
                    seed=seed,
                    eval_dataset=judge,
                    output=str(folder),
                    **SETTINGS,
                )
                if args.quick:
                    config = dataclasses.replace(config, max_steps=2, batch_size=8)
                results = trained(config)
                runs[seed] = run(results, results["metrics"]["test"]["spearman"])
            sick_score = sick(str(folder / "model"))  # the last seed's model
            also = "" if sick_score is None else f"SICK-R {sick_score:.2f} (seed {args.seeds[-1]})"
            recorded = seeded(
                args,
                "few sentences",
                f"{n} sentences",
                method,
                runs,
                model=model,
                unit="STS-B test Spearman x 100",
                also=also,
            )
            table[method, n], runs_of[method, n] = recorded["value"], recorded["runs"]
    print("\nsentences | SimCSE | miCSE (STS-B test Spearman x 100)")
    for n in sizes:
        print(f"{n:>9} | {table['simcse', n]:6.2f} | {table['micse', n]:6.2f}")
    side_by_side(
        args.study,
        "senteval",
        {("miCSE", "stsb"): table["micse", max(sizes)]},
        f"{model_name(model)}, {max(sizes)} sentences",
    )
    frozen = before_training(model, judge)
    figure(
        args,
        "few sentences",
        "before training",
        "frozen",
        frozen,
        model=model,
        unit="STS-B test Spearman x 100",
        note="the model as it comes, cut at 32 tokens: the row a method must beat",
    )
    few = min(sizes)
    if few <= FEW:  # a run of many sentences alone (a GPU's 100k) leaves the claim to the few-shot runs
        # the claim is about a model that learns similarity from these sentences (the study's BERT-base): where both
        # methods leave the model as it came within a point either way (level, on enough seeds to tell), this rerun
        # cannot test it (a gate on "beats it" flipped with the seeds: SimCSE +0.13 at seeds 0-2, +0.12 at 3-5)
        moved = [difference(runs_of[m, few], frozen) for m in METHODS]
        untested = (
            f"neither moved the frozen model ({frozen:.2f}) a point: it is a similarity model"
            if verdict(moved, LEVEL, margin=UNMOVED) == "holds"
            else None
        )
        claim(
            args,
            "miCSE ahead of SimCSE with few sentences",
            [difference(runs_of["micse", few], runs_of["simcse", few])],
            f"at {few}: miCSE {table['micse', few]:.2f}, SimCSE {table['simcse', few]:.2f}",
            kind=AHEAD,
            untested=untested,
        )
    seeds_picture(args)
    finish(args)


if __name__ == "__main__":
    main()
