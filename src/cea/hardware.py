"""What the CPU can do, read once from ``/proc/cpuinfo`` (Linux; elsewhere nothing is known and the safe path runs).

Two choices read it: bf16 autocast where the CPU has bf16 dot products (:mod:`cea.encoders.device`), and the
reference code range of the int8 kNN index (:mod:`cea.knn.index`): ONNX Runtime multiplies uint8 queries by int8
codes with AVX2's ``vpmaddubsw`` where the CPU lacks VNNI, and that instruction saturates the sum of two products
at 32,767, so full-range codes (255 x 127 x 2 = 64,770) would score some references wrongly.
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
