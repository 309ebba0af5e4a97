"""What the CPU can do, read once from ``/proc/cpuinfo`` (Linux; elsewhere nothing is known and the safe path runs):
bf16 dot products (:mod:`cea.encoders.device`), and VNNI for the int8 kNN index (:mod:`cea.knn.index`): without it
ONNX Runtime uses AVX2's ``vpmaddubsw``, whose pair sums saturate at 32,767, so full-range codes would score wrongly.
"""

from __future__ import annotations


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
