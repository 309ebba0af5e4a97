"""Two processes see the global batch: loss, gradients and memories equal one process's. On the CPU over
gloo; again over NCCL, one GPU each, where two CUDA GPUs are present."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).with_name("dist_worker.py")
sys.path.insert(0, str(WORKER.parent))
from dist_worker import PER_PROCESS_LOSS, SETTINGS  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cuda_pair() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() >= 2


@pytest.fixture(
    scope="module",
    params=[
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not _cuda_pair(), reason="NCCL needs two CUDA GPUs (one per process)")
        ),
    ],
)
def runs(request, tmp_path_factory, tiny_st_dir):
    one, two = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("two")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CEA_GATHER_DEVICE": request.param}
    subprocess.run([sys.executable, str(WORKER), tiny_st_dir, str(one)], check=True, env=env, timeout=600)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(_free_port()),
            str(WORKER),
            tiny_st_dir,
            str(two),
        ],
        check=True,
        env=env,
        timeout=600,
    )
    return one, two


@pytest.mark.parametrize("name", list(SETTINGS))
def test_two_processes_equal_one_on_the_global_batch(runs, name):
    one, two = runs
    single = np.load(one / f"{name}-rank0.npz")
    ranks = [np.load(two / f"{name}-rank{r}.npz") for r in (0, 1)]
    if name in PER_PROCESS_LOSS:
        np.testing.assert_allclose(np.mean([r["losses"] for r in ranks], 0), single["losses"], rtol=1e-5, atol=1e-6)
    for got in ranks:
        if name not in PER_PROCESS_LOSS:
            np.testing.assert_allclose(got["losses"], single["losses"], rtol=1e-5, atol=1e-6)
        scale = np.abs(single["grads"]).max()
        assert scale > 0
        np.testing.assert_allclose(got["grads"], single["grads"], rtol=1e-4, atol=1e-5 * scale)
    assert single["losses"][0] != single["losses"][2]  # the steps change the model: later steps test the sync
    memories = [k for k in single.files if k.startswith("memory.")]
    if name.startswith("cea-") and name not in ("cea-all", "cea-sampled"):
        assert memories
    for key in memories:  # identical on both processes, and as one process would have it
        np.testing.assert_array_equal(ranks[0][key], ranks[1][key])
        np.testing.assert_allclose(ranks[0][key], single[key], rtol=1e-5, atol=1e-6)


def test_one_process_is_untouched(tiny_st_dir):
    """Without torch.distributed the gather is the identity (no collective is called)."""
    import torch

    from cea.objectives.gather import gather_batch, world_size

    x, y = torch.randn(3, 4, requires_grad=True), torch.arange(3)
    gx, gy, gf = gather_batch(x, y, None)
    assert world_size() == 1 and gx is x and gy is y and gf is None
