"""Data-parallel training across processes (C++: ``encore::dist``).

Launch the same script on N processes (``mpirun -np 4 python train.py``; a hostfile or ``srun``
for several machines). Every rank holds the whole model and trains on its slice of each batch;
:func:`DistributedOptimizer` averages the gradients over the ranks before each update, in
buckets that are all-reduced while the backward pass still runs. A process that no launcher
started is a group of one in which every collective is the identity, so the same script runs
alone. MPI (the CPU engine and the launcher) and NCCL (CUDA tensors) are plugins:
:func:`unavailable_reason` says why MPI is missing.

    import encore, encore.distributed as dist
    world = dist.init()
    dist.broadcast_parameters(model)
    opt = dist.DistributedOptimizer(encore.optim.Adam(model.parameters()))
    model.compile(opt, "mse")          # fit is data-parallel: logs and checkpoints on rank 0
    model.fit(x, y, batch_size=64)     # each rank trains on its rows of every batch

The collectives are ops (traceable; each runs exactly once per call on every rank):
``all_reduce(t, op="sum"|"mean"|"max")`` (differentiable), ``broadcast(t, root)``,
``all_gather(t)``.
"""

from __future__ import annotations

from typing import Iterable, List, Union

from . import _C
from ._C import DistGroup, DistributedError, all_gather, all_reduce, broadcast

__all__ = ["DistGroup", "DistributedError", "DistributedOptimizer", "all_gather", "all_reduce", "barrier",
           "broadcast", "broadcast_parameters", "buckets", "check_agreement", "init", "launched", "rank",
           "set_timeout", "size", "timeout", "unavailable_reason"]


def init() -> DistGroup:
    """Joins the world and returns it (``rank``, ``size``, ``backend``); idempotent. Under a
    launcher it loads the MPI plugin (an error naming :func:`unavailable_reason` when it cannot);
    otherwise a group of one (backend ``"none"``). ``ENCORE_DIST=nccl`` makes a world of one whose
    CUDA collectives run through NCCL, without a launcher (backend ``"nccl"``)."""
    return _C.dist_init()


def rank() -> int:
    """This process's rank (0 in a group of one)."""
    return init().rank


def size() -> int:
    """The number of processes in the world."""
    return init().size


def launched() -> bool:
    """Whether a launcher (mpirun, srun) started this process."""
    return _C.dist_launched()


def unavailable_reason() -> str:
    """Why MPI is unavailable (e.g. ``"no MPI plugin: .../libencore_mpi.so not found"``); empty
    when the plugin loads."""
    return _C.dist_unavailable_reason()


def barrier() -> None:
    """Waits until every rank reaches it. Not an op: inside a traced function it runs only when
    the function runs eagerly or traces."""
    _C.dist_barrier()


def set_timeout(seconds: float) -> None:
    """How long a rank waits for a collective before it raises :class:`DistributedError` (a peer
    raised, died or runs other collectives). Default 300 s, or ``$ENCORE_DIST_TIMEOUT``."""
    _C.dist_set_timeout(seconds)


def timeout() -> float:
    """The collective timeout in seconds."""
    return _C.dist_timeout()


def check_agreement(hash: int, description: str) -> None:
    """Raises :class:`DistributedError` on every rank, naming each rank's description, when the
    ranks passed different hashes (a traced step checks its collectives this way)."""
    _C.dist_check_agreement(hash, description)


def DistributedOptimizer(optimizer: _C.Optimizer, bucket_bytes: int = 1 << 20,
                         overlap: bool = True) -> _C.Optimizer:
    """Makes ``optimizer`` data-parallel and returns it: each step first averages the gradients
    over the ranks, packed into buckets of at most ``bucket_bytes`` (one fused all-reduce per
    bucket: the tiny Dense model's step makes one). With ``overlap`` a bucket's all-reduce starts
    in the backward pass as soon as its gradients are final, and each bucket's update waits only
    for its own all-reduce."""
    return _C.DistributedOptimizer(optimizer, bucket_bytes, overlap)


def buckets(optimizer: _C.Optimizer) -> List[List[int]]:
    """The parameter indices of each bucket of a distributed optimizer, in launch order."""
    return _C.dist_buckets(optimizer)


def broadcast_parameters(module_or_params: Union[_C.Module, Iterable[_C.Tensor]], root: int = 0) -> None:
    """Copies ``root``'s parameters (and buffers) into every rank's, in place."""
    if isinstance(module_or_params, _C.Module):
        _C.broadcast_module_parameters(module_or_params, root)
    else:
        _C.broadcast_parameters(list(module_or_params), root)
