"""What the CPU can do, read once from ``/proc/cpuinfo`` (Linux; elsewhere nothing is known and the safe path runs):
bf16 dot products (:mod:`cea.encoders.device`), and VNNI for the int8 kNN index (:mod:`cea.knn.index`): without it
ONNX Runtime uses AVX2's ``vpmaddubsw``, whose pair sums saturate at 32,767, so full-range codes would score wrongly.
And what a batch job asks of the CPU's math library (:func:`bounded_primitive_cache`).
"""

from __future__ import annotations

import os


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``avx2``, ``avx512_vnni``, ...); empty where ``/proc/cpuinfo`` cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            return frozenset(next((line for line in fh if line.startswith("flags")), "").split(":", 1)[-1].split())
    except OSError:
        return frozenset()


def has_vnni() -> bool:
    """int8 dot products with 32-bit sums (AVX512-VNNI, AVX-VNNI or AMX): uint8 x int8 cannot saturate."""
    return bool(cpu_flags() & {"avx512_vnni", "avx_vnni", "amx_int8"})


# oneDNN's primitives kept in one process (its default: 1,024), one for each input shape met: over a corpus, passes of
# every length fill the cache and the peak RSS grew with the corpus. A transformer (all-MiniLM-L6-v2 in PyTorch)
# encoding 10,000 texts of 20-40 words in passes of 64: 1,189 MB at the default, 936 MB at 8, 118 s against 122
PRIMITIVE_CACHE = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "8"}


def bounded_primitive_cache() -> dict[str, str]:
    """:data:`PRIMITIVE_CACHE` in this process's environment, unless set already (read at oneDNN's first primitive:
    before a batch job's first encode), and the variables to hand the processes it starts (Ray's actors)."""
    for name, value in PRIMITIVE_CACHE.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in PRIMITIVE_CACHE}
