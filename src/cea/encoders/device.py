"""Where and in what precision an encoder runs: every command's ``--device`` and ``--precision``.

``auto`` device: CUDA (under torchrun the process's own GPU, ``LOCAL_RANK``), then Apple's MPS, then the CPU.
``auto`` precision: bf16 on CPUs that run it fast (AVX512_BF16 or AMX), fp32 elsewhere, CUDA included (bf16 was
slower there for the same accuracy: docs/decisions.md#precision); fp16 and tf32 (fp32 weights, TF32 matrix products)
only on CUDA. bf16 and fp16 are autocast (the weights stay fp32); embeddings and memories are fp32 whatever the
precision. A GPU trains in larger batches (:data:`TRAIN_BATCH`; the lr scaled in :mod:`cea.training.config`) and
encodes in larger passes (:data:`ENCODE_BATCH`): its steps cost the host about as much at any size.
"""

from __future__ import annotations

import contextlib
import os
import re

import torch

from ..errors import CeaError
from ..hardware import cpu_flags

DEVICES = "auto, cpu, cuda, cuda:N or mps"
PRECISIONS = ("auto", "fp32", "tf32", "bf16", "fp16")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# texts per training step and per encoder pass by device kind, elsewhere 32 and 64 (docs/records/gpu_speed.jsonl)
TRAIN_BATCH = {"cuda": 128}
ENCODE_BATCH = {"cuda": 512}
# tokens an encoder pass holds at most (its texts x the longest one's tokens) by backend and device kind: the fastest
# budget, whose memory stays bounded (bench/token_budget.py, all-MiniLM-L6-v2, two threads, 2-core AMD EPYC). A pass
# of long texts has fewer texts: its activations (attention's grow with the square of the length) and ONNX Runtime's
# arena, which keeps the largest pass's memory for the rest of the run, are bounded whatever the texts' lengths. On
# 400 long yahoo answers, int8 ONNX: 31.2 texts/s and 578 MB at 1,024 tokens, 28.5 and 908 MB at 4,096, 27.9 and
# 2,368 MB at 64 texts a pass; PyTorch: 23.6 texts/s at 2,048 (775 MB), 22.3 at 64 texts (1,221 MB). The GPU's: its
# passes of 512 texts (ENCODE_BATCH) of up to 128 tokens
ENCODE_TOKENS = {"cpu": 2048, "onnx": 1024, "cuda": 65536}


def resolve_device(requested: str | None = None) -> str:
    """``auto`` (or None) -> ``cuda:LOCAL_RANK`` under torchrun, ``cuda``, ``mps`` or ``cpu``; a named one checked."""
    device = (requested or "auto").strip().lower()
    if device == "auto":
        if torch.cuda.is_available():
            return f"cuda:{os.environ['LOCAL_RANK']}" if "LOCAL_RANK" in os.environ else "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    if not re.fullmatch(r"cpu|mps|cuda(:\d+)?", device):
        raise CeaError(f"unknown device {requested!r}; use {DEVICES}")
    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise CeaError(
                f"device {requested!r}: this torch ({torch.__version__}) sees no CUDA GPU; use --device cpu or auto"
            )
        if ":" in device and int(device.split(":")[1]) >= count:
            raise CeaError(f"device {requested!r}: there are {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    if device == "mps" and not torch.backends.mps.is_available():
        raise CeaError("device 'mps': this machine has no usable Apple GPU; use --device cpu or auto")
    return device


def cpu_has_fast_bf16() -> bool:
    """True on CPUs with bf16 dot products (AVX512_BF16 or AMX), read from /proc/cpuinfo (Linux)."""
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


def resolve_precision(requested: str | None, device: str) -> str:
    """``auto`` (or None) -> bf16 or fp32 for ``device`` (see the module); fp16 and bf16 are checked."""
    precision = (requested or "auto").strip().lower()
    kind = device.split(":")[0]
    if precision not in PRECISIONS:
        raise CeaError(f"unknown precision {requested!r}; use {', '.join(PRECISIONS)}")
    if precision == "auto":
        return "bf16" if kind == "cpu" and cpu_has_fast_bf16() else "fp32"
    if precision == "tf32" and kind != "cuda":
        raise CeaError(f"precision tf32 (fp32 weights, matrix products in TF32) needs a CUDA GPU; use fp32 on {device}")
    if precision == "fp16" and kind != "cuda":
        raise CeaError(f"precision fp16 needs a CUDA GPU (gradients are scaled there); use bf16 or fp32 on {device}")
    if precision == "bf16" and kind == "cuda" and not torch.cuda.is_bf16_supported():
        raise CeaError(f"this GPU ({torch.cuda.get_device_name(device)}) has no bf16; use fp16 or fp32")
    return precision


def train_batch(requested: int | str | None, device: str) -> int:
    """``auto`` (or None) -> the training batch for ``device`` (:data:`TRAIN_BATCH`); a number is kept."""
    return TRAIN_BATCH.get(device.split(":")[0], 32) if requested in (None, "auto") else int(requested)


def encode_batch(model) -> int:
    """Texts per encoder pass for ``model``'s device (:data:`ENCODE_BATCH`; 64 where it has none, e.g. ONNX)."""
    return ENCODE_BATCH.get(getattr(getattr(model, "device", None), "type", "cpu"), 64)


def encode_tokens(model) -> int:
    """Tokens an encoder pass of ``model`` holds at most (:data:`ENCODE_TOKENS`): an ONNX encoder's (it cuts its own
    passes), else its device's."""
    if getattr(model, "cuts_passes", False):
        return ENCODE_TOKENS["onnx"]
    return ENCODE_TOKENS.get(getattr(getattr(model, "device", None), "type", "cpu"), ENCODE_TOKENS["cpu"])


def to_precision(model, precision: str):
    """``model`` with its weights in ``precision`` for encoding (fp32 and tf32 leave them; tf32 sets the process's
    matrix products to TF32)."""
    if precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
    return model if precision in ("fp32", "tf32") else model.to(DTYPES[precision])


def autocast(device: str, precision: str):
    """A context that runs the forward passes inside it in ``precision`` (nothing for fp32 and tf32)."""
    if precision in ("fp32", "tf32"):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=DTYPES[precision])
