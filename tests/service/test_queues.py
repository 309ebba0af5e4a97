"""The service's queues: one encode batch holds predictions and additions, each kind answered by its own callback
with its own record."""

import asyncio

import numpy as np

from cea.bundle import AddRequest, PredictRequest
from cea.service.queues import Predicted, Queues


def queues_of(bundle, batches):
    return Queues(
        bundle,
        max_batch=64,
        max_wait=0.5,
        workers=1,
        max_texts=64,
        commit_wait=0.01,
        keep_unknowns=0,
        on_batch=lambda texts, waits: batches.append(texts),
    )


def test_one_encode_batch_answers_each_kind_with_its_own_record(made):
    batches = []
    queues = queues_of(made, batches)
    try:
        asked = queues.encode.submit(PredictRequest(["my card is lost a", "where is this"], k=2))
        adding = queues.encode.submit(AddRequest(["red dog and blue cat"], ["animals"]))
        alone = queues.encode.submit(PredictRequest(["my card is lost a"], threshold=1.5))
        found, added, strict = asked.result(timeout=30), adding.result(timeout=30), alone.result(timeout=30)
    finally:
        queues.close()
    assert batches == [4]  # the three requests' texts in one encoder call
    assert isinstance(found, Predicted) and found.predictions == made.predict(
        ["my card is lost a", "where is this"], k=2
    )
    np.testing.assert_allclose(found.vectors, made.embed(["my card is lost a", "where is this"]), atol=1e-5)
    assert [p.label for p in strict.predictions] == ["unknown"] and len(strict.vectors) == 1
    assert isinstance(added, AddRequest) and (added.texts, added.labels) == (["red dog and blue cat"], ["animals"])
    assert added.version == made.encoder_version
    np.testing.assert_allclose(added.vectors, made.embed(["red dog and blue cat"]), atol=1e-5)


def test_an_addition_is_encoded_in_a_batch_then_committed(made):
    batches = []
    queues = queues_of(made, batches)

    async def both():
        return await asyncio.gather(
            queues.add(AddRequest(["red dog and blue cat"], ["animals"])),
            queues.predict(PredictRequest(["my card is lost a"])),
        )

    try:
        ids, found = asyncio.run(both())
    finally:
        queues.close()
    assert ids == [24] and made.get(24) == {"id": 24, "label": "animals", "text": "red dog and blue cat"}
    assert batches == [2] and [p.label for p in found.predictions] == ["card"]
    np.testing.assert_allclose(made.embeddings[-1], made.embed(["red dog and blue cat"])[0], atol=1e-5)
