"""The objectives' catalog: every objective by name, its options' defaults, help and checks, built lazily."""

import dataclasses

import pytest
import torch

from cea.encoders import load_encoder
from cea.errors import CeaError, OptionError
from cea.objectives import (
    OBJECTIVES,
    CEALoss,
    NormalizedSoftmaxObjective,
    SoftmaxObjective,
    SupConObjective,
    TripletObjective,
    build_objective,
    get_spec,
    objectives_for,
)
from cea.training import TrainConfig
from cea.training.compare import parse_settings
from cea.training.config import configure

EMB = torch.randn(12, 32, generator=torch.Generator().manual_seed(0))
LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2])


def test_every_objective_is_registered_with_its_data():
    assert set(OBJECTIVES) == {
        "softmax",
        "cea",
        "triplet",
        "supcon",
        "normalized-softmax",
        "cosine-regression",
        "simcse",
        "micse",
        "mlm",
    }
    assert set(objectives_for("classes")) == {"softmax", "cea", "triplet", "supcon", "normalized-softmax"}
    assert objectives_for("pairs") == ("cosine-regression",) and objectives_for("triplets") == ("triplet",)
    assert set(objectives_for("sentences")) == {"simcse", "micse", "mlm"}
    with pytest.raises(CeaError, match="did you mean triplet"):
        get_spec("tripplet")


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_every_objective_builds_with_defaults_and_documents_its_options(name, tiny_st_dir):
    spec = get_spec(name)
    assert spec.summary and spec.build
    for f in dataclasses.fields(spec.options):
        assert f.metadata.get("help"), (name, f.name)
    assert isinstance(build_objective(name, load_encoder(tiny_st_dir, device="cpu"), num_labels=3), torch.nn.Module)


def test_shared_options_keep_each_objective_default():
    temperature = {
        n: get_spec(n).make_options().temperature for n in ("supcon", "normalized-softmax", "simcse", "micse")
    }
    assert temperature == {"supcon": 0.1, "normalized-softmax": 0.05, "simcse": 0.05, "micse": 0.05}
    triplet = get_spec("triplet").make_options()
    assert triplet.for_data("classes").margin == 0.2 and triplet.for_data("triplets").margin == 0.5
    assert get_spec("triplet").make_options({"margin": 0.3}).for_data("triplets").margin == 0.3
    assert dataclasses.asdict(get_spec("cea").make_options()) == {
        "pairs": "all",
        "memory": "none",
        "memory_size": 4096,
        "reduction": "mean",
        "negative_target": 0.0,
    }


@pytest.mark.parametrize(
    "name, options, library, cli",
    [
        ("cea", {"memory_size": 0}, "memory_size must be at least 1, got 0", "--memory-size must be at least 1, got 0"),
        ("cea", {"pairs": "al"}, "pairs must be one of all, sampled, got 'al'", "--pairs must be one of"),
        ("supcon", {"temperature": 0}, "temperature must be positive, got 0", "--temperature must be positive"),
        ("mlm", {"mlm_probability": 1.5}, "mlm_probability must lie between 0 and 1", "--mlm-probability must lie"),
        (
            "triplet",
            {"memory": "bank"},
            "option memory does not apply to objective triplet",
            "--memory only applies to --objective cea, not triplet",
        ),
        (
            "simcse",
            {"micse_lambda": 1.0},
            "option micse_lambda does not apply to objective simcse",
            "--micse-lambda only applies to --objective micse, not simcse",
        ),
    ],
)
def test_errors_name_the_parameter_and_the_flag(name, options, library, cli):
    with pytest.raises(OptionError, match=library) as info:
        get_spec(name).make_options(options)
    assert info.value.cli.startswith(cli)
    with pytest.raises(OptionError, match=library):  # the same from Python's build_objective
        build_objective(name, None, num_labels=3, **options)


def test_an_unknown_option_lists_the_objective_options():
    with pytest.raises(CeaError, match="unknown option 'pairz' for cea; its options: memory, memory_size"):
        get_spec("cea").make_options({"pairz": "all"})


class _Stub(torch.nn.Module):
    def get_embedding_dimension(self):
        return 32


@pytest.mark.parametrize(
    "name, options, direct",
    [
        (
            "cea",
            {"pairs": "sampled", "memory": "bank", "memory_size": 8},
            lambda m: CEALoss(m, 3, pairs="sampled", memory="bank", memory_size=8, seed=5),
        ),
        ("softmax", {}, lambda m: SoftmaxObjective(m, 3)),
        ("triplet", {"mining": "hard"}, lambda m: TripletObjective(m, margin=0.2, mining="hard")),
        ("supcon", {}, lambda m: SupConObjective(m, temperature=0.1)),
        ("normalized-softmax", {}, lambda m: NormalizedSoftmaxObjective(m, 3, temperature=0.05)),
    ],
)
def test_the_catalog_builds_what_the_class_builds(name, options, direct):
    """The same seed gives the same losses (random numbers drawn in the same order) as the class itself."""

    def losses(objective):
        return [objective.compute_loss_from_embeddings(EMB + step, LABELS).item() for step in range(3)]

    torch.manual_seed(7)
    via_catalog = losses(build_objective(name, _Stub(), num_labels=3, seed=5, **options))
    after_catalog = torch.rand(1)
    torch.manual_seed(7)
    assert losses(direct(_Stub())) == via_catalog and torch.equal(torch.rand(1), after_catalog)


def test_compare_settings_and_flags_map_onto_the_same_options():
    settings = parse_settings("softmax,cea[pairs=all,memory=bank,memory_size=4096,lr=2e-5],triplet[mining=hard]")
    base = TrainConfig(dataset="trec6")
    configs = [configure(base, objective=name, **opts) for name, opts in settings]
    assert [(c.objective, c.options) for c in configs] == [
        ("softmax", {}),
        ("cea", {"pairs": "all", "memory": "bank", "memory_size": 4096}),
        ("triplet", {"mining": "hard"}),
    ]
    assert configs[1].lr == 2e-5 and configs[0].lr == base.lr
    with pytest.raises(OptionError, match="option memory does not apply to objective triplet"):
        parse_settings("triplet[memory=bank]")
    with pytest.raises(CeaError, match="set by the grid"):
        parse_settings("cea[seed=3]")


def test_every_objective_class_carries_its_sections():
    """``help(CEALoss)`` (and the API reference) shows what it expects, returns, when to use it, its options and the
    citation, as sentence-transformers' losses do."""
    import inspect

    import cea.objectives as objectives

    classes = [
        getattr(objectives, name)
        for name in objectives.__all__
        if inspect.isclass(getattr(objectives, name)) and issubclass(getattr(objectives, name), torch.nn.Module)
    ]
    assert len(classes) == 10
    for cls in classes:
        doc = cls.__dict__.get("__doc__") or ""  # its own, not a base class's
        missing = [
            s
            for s in ("What it expects", "What it returns", "When to use it", "Options", "Example", "Citation")
            if f"\n{s}\n" not in inspect.cleandoc(doc)
        ]
        assert not missing, f"{cls.__name__}'s docstring lacks {', '.join(missing)}"


def test_the_catalog_imports_no_loss_until_one_is_built():
    """``cea train --help`` reads the catalog: neither torch nor a loss module is imported by it."""
    import subprocess
    import sys

    code = (
        "import sys; from cea.objectives import get_spec, objectives_for; get_spec('micse').make_options(); "
        "print('torch' in sys.modules, sorted(m for m in sys.modules if m.startswith('cea.objectives.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.strip() == "False ['cea.objectives.catalog']"
