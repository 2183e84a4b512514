"""encore.distributed: alone (a group of one, every collective the identity) and under mpirun with
2 and 3 ranks (tests/python/distributed_program.py): collectives, one all-reduce per tiny-model
step, a data-parallel fit equal to one process's within float64 rounding, and checkpoints written
by rank 0 that resume with another number of ranks."""

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import encore
import encore.distributed as dist

PROGRAM = pathlib.Path(__file__).with_name("distributed_program.py")
MPIRUN = shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(MPIRUN is None or bool(dist.unavailable_reason()),
                               reason=f"MPI unavailable: {dist.unavailable_reason() or 'no mpirun'}")


def launch(np_, *args):
    """Runs the program on np_ ranks (or alone for np_ = 0); returns its output."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               ENCORE_DIST_TIMEOUT="60")
    cmd = [sys.executable, str(PROGRAM), *map(str, args)]
    if np_:
        cmd = [MPIRUN, "--oversubscribe", "-np", str(np_), *cmd]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    assert p.returncode == 0, p.stdout
    assert p.stdout.count(" ok") == max(np_, 1), p.stdout
    return p.stdout


def test_a_process_no_launcher_started_is_a_group_of_one():
    world = dist.init()
    assert (world.rank, world.size, world.backend) == (0, 1, "none")
    assert not dist.launched()
    x = encore.tensor(np.arange(6.0).reshape(2, 3))
    for op in ("sum", "mean", "max"):
        assert (dist.all_reduce(x, op=op).numpy() == x.numpy()).all()
    assert (dist.broadcast(x, root=0).numpy() == x.numpy()).all()
    assert dist.all_gather(x).shape == (2, 3)
    dist.barrier()
    with pytest.raises(ValueError, match="is not a rank"):
        dist.broadcast(x, root=1)
    with pytest.raises(ValueError, match="must be > 0"):
        dist.set_timeout(0)
    assert issubclass(encore.DistributedError, RuntimeError)


def test_the_mpi_plugin_says_why_it_is_missing(tmp_path):
    code = "import encore.distributed as d; print(repr(d.unavailable_reason()))"
    env = dict(os.environ, ENCORE_MPI_PLUGIN=str(tmp_path / "libencore_mpi.so"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert "no MPI plugin" in out and "not found" in out
    # A launched process without the plugin fails at init, naming the reason.
    env["ENCORE_DIST"] = "mpi"
    p = subprocess.run([sys.executable, "-c", "import encore.distributed as d; d.init()"], env=env,
                       capture_output=True, text=True)
    assert p.returncode != 0 and "MPI is unavailable: no MPI plugin" in p.stderr


def init_with(env_value):
    """dist.init() in a process of its own with ENCORE_DIST=env_value: (exit code, stdout, stderr)."""
    code = "import encore.distributed as d; w = d.init(); print(w.rank, w.size, w.backend)"
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, ENCORE_DIST=env_value),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def test_a_world_of_one_on_nccl_says_why_it_cannot_form_without_a_gpu():
    if encore.cuda.device_count() > 0:
        pytest.skip("a GPU is present: tests/dist/test_nccl.cpp runs this world (tests/gpu/run.sh)")
    rc, out, err = init_with("nccl")
    assert rc != 0, out
    assert "ENCORE_DIST=nccl (a world of one on NCCL) is unavailable: " in err
    assert "no CUDA device" in err or "no CUDA backend" in err or "no NCCL plugin" in err, err
    assert "UnsupportedError" in err, err


def test_encore_dist_takes_only_the_values_it_knows():
    assert init_with("none")[:2] == (0, "0 1 none\n")
    rc, _, err = init_with("ncl")
    assert rc != 0 and "ENCORE_DIST must be 'mpi', 'none' or 'nccl', got 'ncl'" in err, err


@needs_mpi
@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_and_the_tiny_model_under_mpirun(ranks):
    launch(ranks, "check")


@needs_mpi
def test_fit_on_ranks_equals_one_process_and_checkpoints_resume_with_any_count(tmp_path):
    launch(0, "fit", tmp_path / "alone.npz", "--epochs", 2)
    launch(2, "fit", tmp_path / "two.npz", "--epochs", 2)
    # One epoch on 3 ranks, checkpoint (rank 0 writes it), the second epoch on 2 ranks.
    ckpt = tmp_path / "ckpt.safetensors"
    launch(3, "fit", tmp_path / "first.npz", "--epochs", 1, "--save", ckpt)
    assert ckpt.exists() and not list(tmp_path.glob("*.tmp"))
    launch(2, "fit", tmp_path / "resumed.npz", "--epochs", 2, "--load", ckpt)
    alone, two, resumed = (np.load(tmp_path / f) for f in ("alone.npz", "two.npz", "resumed.npz"))
    for key in alone.files:
        if key.startswith("p"):
            np.testing.assert_allclose(two[key], alone[key], rtol=1e-12, atol=1e-14, err_msg=key)
            np.testing.assert_allclose(resumed[key], alone[key], rtol=1e-12, atol=1e-14, err_msg=key)
    np.testing.assert_allclose(two["loss"], alone["loss"], rtol=1e-12)
