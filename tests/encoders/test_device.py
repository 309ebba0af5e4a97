import pytest
import torch

from cea.encoders import device as dev
from cea.encoders.chunks import forward_in_chunks
from cea.errors import CeaError

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")


@pytest.fixture
def no_accelerator(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def test_auto_takes_cuda_then_mps_then_the_cpu(monkeypatch, no_accelerator):
    assert dev.resolve_device(None) == dev.resolve_device("auto") == "cpu"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert dev.resolve_device("auto") == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert dev.resolve_device("auto") == "cuda"
    monkeypatch.setenv("LOCAL_RANK", "3")  # under torchrun: the process's own GPU
    assert dev.resolve_device("auto") == "cuda:3"


def test_named_devices_are_checked(monkeypatch, no_accelerator):
    assert dev.resolve_device("CPU") == "cpu"
    with pytest.raises(CeaError, match="unknown device 'gpu'; use auto, cpu, cuda, cuda:N or mps"):
        dev.resolve_device("gpu")
    with pytest.raises(CeaError, match="sees no CUDA GPU; use --device cpu or auto"):
        dev.resolve_device("cuda")
    with pytest.raises(CeaError, match="no usable Apple GPU"):
        dev.resolve_device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert dev.resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(CeaError, match="there are 2 CUDA GPU\\(s\\), cuda:0 to cuda:1"):
        dev.resolve_device("cuda:2")


def test_auto_precision_is_bf16_on_cpus_that_run_it_fast_else_fp32(monkeypatch):
    monkeypatch.setattr(dev, "cpu_has_fast_bf16", lambda: True)
    assert dev.resolve_precision(None, "cpu") == "bf16"
    monkeypatch.setattr(dev, "cpu_has_fast_bf16", lambda: False)
    assert dev.resolve_precision("auto", "cpu") == "fp32"
    assert dev.resolve_precision("auto", "mps") == "fp32"
    monkeypatch.setattr(dev, "cpu_has_fast_bf16", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert dev.resolve_precision("auto", "cuda:0") == "fp32"  # an H100 trained 3.6x slower in bf16 autocast
    assert dev.resolve_precision("bf16", "cuda:0") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert dev.resolve_precision("auto", "cuda") == "fp32"
    assert dev.resolve_precision("fp16", "cuda") == "fp16"


def test_bad_precisions_are_refused():
    with pytest.raises(CeaError, match="unknown precision 'half'; use auto, fp32, tf32, bf16, fp16"):
        dev.resolve_precision("half", "cpu")
    with pytest.raises(CeaError, match="fp16 needs a CUDA GPU"):
        dev.resolve_precision("fp16", "cpu")
    with pytest.raises(CeaError, match="tf32 .* needs a CUDA GPU; use fp32 on cpu"):
        dev.resolve_precision("tf32", "cpu")
    assert dev.resolve_precision("bf16", "cpu") == "bf16"  # asked for: honoured, fast or not


def test_cpu_flags_are_read_from_cpuinfo(monkeypatch, tmp_path):
    import builtins

    cpuinfo = tmp_path / "cpuinfo"
    opened = builtins.open
    monkeypatch.setattr(
        builtins, "open", lambda path, *a, **k: opened(cpuinfo if path == "/proc/cpuinfo" else path, *a, **k)
    )
    cpuinfo.write_text("processor: 0\nflags\t\t: fpu sse avx512f avx512_vnni\n")
    assert dev.cpu_has_fast_bf16() is False
    cpuinfo.write_text("processor: 0\nflags\t\t: fpu sse avx512f avx512_bf16\n")
    assert dev.cpu_has_fast_bf16() is True
    cpuinfo.write_text("processor: 0\nflags\t\t: fpu amx_bf16 amx_tile\n")
    assert dev.cpu_has_fast_bf16() is True


def test_autocast_runs_matmuls_in_the_precision_asked():
    x = torch.randn(4, 4)
    with dev.autocast("cpu", "bf16"):
        assert (x @ x).dtype == torch.bfloat16
    with dev.autocast("cpu", "fp32"):
        assert (x @ x).dtype == torch.float32


def _features(model, texts):
    return {k: v for k, v in model.tokenize(texts).items() if torch.is_tensor(v)}


TEXTS = [
    "a",
    "a much longer text with many more tokens in it than the others",
    "two words",
    "three short words",
    "one more text of middling length here",
    "x y",
]


@pytest.mark.parametrize("chunk", [1, 2, 4, "auto", None])
def test_chunked_embeddings_and_gradients_match_the_whole_batch(tiny_model, chunk):
    tiny_model.eval()  # no dropout: the two passes must compute the same function
    features = _features(tiny_model, TEXTS)
    assert features["attention_mask"].sum(1).min() < features["attention_mask"].shape[1]  # there is padding to drop

    def run(size):
        tiny_model.zero_grad()
        emb = forward_in_chunks(tiny_model, dict(features), size)
        loss = (emb @ emb.T).pow(2).sum()
        loss.backward()
        return emb.detach(), loss.item(), [p.grad.clone() for p in tiny_model.parameters() if p.grad is not None]

    whole, chunked = run(10**6), run(chunk)
    torch.testing.assert_close(chunked[0], whole[0], rtol=1e-5, atol=1e-5)
    assert chunked[1] == pytest.approx(whole[1], rel=1e-5)
    scale = torch.cat([g.flatten() for g in whole[2]]).norm()  # float tolerance, relative to the whole gradient
    for a, b in zip(chunked[2], whole[2]):
        assert (a - b).norm() <= 1e-5 * scale


def test_auto_chunks_are_one_call_off_the_cpu():
    """On a GPU (here the meta device, which has no data) ``"auto"`` is one call of the whole batch."""
    seen = []

    def model(features):
        seen.append(tuple(features["input_ids"].shape))
        return {"sentence_embedding": torch.zeros(len(features["input_ids"]), 4, device="meta")}

    mask = torch.ones(6, 9, dtype=torch.long, device="meta")
    features = {"input_ids": torch.zeros(6, 9, dtype=torch.long, device="meta"), "attention_mask": mask}
    assert forward_in_chunks(model, features, "auto").shape == (6, 4)
    assert seen == [(6, 9)]


def test_chunks_see_fewer_tokens(tiny_model):
    seen = []
    forward = tiny_model.forward
    tiny_model.forward = lambda f: seen.append(f["input_ids"].numel()) or forward(f)
    forward_in_chunks(tiny_model, _features(tiny_model, TEXTS), 2)
    padded = _features(tiny_model, TEXTS)["input_ids"].numel()
    assert len(seen) == 3 and sum(seen) < padded


@CUDA
def test_cuda_resolves_and_autocasts():
    assert dev.resolve_device("auto").startswith("cuda")
    precision = dev.resolve_precision("auto", "cuda")
    with dev.autocast("cuda", precision):
        x = torch.randn(4, 4, device="cuda")
        assert (x @ x).dtype == {"bf16": torch.bfloat16, "fp32": torch.float32}[precision]


@pytest.fixture
def tiny_model(tiny_bert_dir):
    from cea.encoders import load_encoder

    return load_encoder(tiny_bert_dir, device="cpu")


def test_auto_chunks_minimise_padded_tokens_plus_calls(monkeypatch):
    from cea.encoders import chunks

    assert chunks.plan_chunks([3, 5, 9, 9, 20], 2) == [(0, 2), (2, 4), (4, 5)]
    monkeypatch.setattr(chunks, "CALL_COST", 10)
    # one chunk: 5 x 20 + 10 = 110; {3, 5}, {9, 9}, {20}: 10 + 18 + 20 + 30 = 78; {3, 5, 9, 9}, {20}: 36 + 20 + 20 = 76
    assert chunks.plan_chunks([3, 5, 9, 9, 20], "auto") == [(0, 4), (4, 5)]
    monkeypatch.setattr(chunks, "CALL_COST", 1000)  # calls dear: one chunk
    assert chunks.plan_chunks([3, 5, 9, 9, 20], "auto") == [(0, 5)]
    monkeypatch.setattr(chunks, "CALL_COST", 0)  # calls free: a chunk per distinct width
    assert chunks.plan_chunks([3, 5, 9, 9, 20], "auto") == [(0, 1), (1, 2), (2, 4), (4, 5)]


def test_batches_are_the_devices_unless_given(tiny_model):
    assert dev.train_batch("auto", "cpu") == dev.train_batch(None, "mps") == 32
    assert dev.train_batch("auto", "cuda:1") == dev.TRAIN_BATCH["cuda"] > 32
    assert dev.train_batch(48, "cuda") == dev.train_batch("48", "cpu") == 48
    assert dev.encode_batch(tiny_model) == dev.encode_batch(object()) == 64  # on the CPU; no device (ONNX): 64
    dev.ENCODE_BATCH["meta"] = 7
    try:
        assert dev.encode_batch(tiny_model.to("meta")) == 7
    finally:
        del dev.ENCODE_BATCH["meta"]
