"""One rank of the data-parallel Python tests (tests/python/test_distributed.py runs it under
mpirun, or alone as a group of one). Modes:

  check                 collectives, the differentiable all_reduce, errors, one all-reduce per
                        step of the tiny Dense model, DistributedOptimizer inside a traced step
  fit OUT [--epochs E] [--load CKPT] [--save CKPT]
                        a data-parallel fit of a small Conv1D model in float64; rank 0 writes the
                        parameters to OUT (.npz), and the checkpoint when --save is given

Prints "rank R ok" at the end; any failed check raises (the rank exits non-zero).
"""

import sys

import numpy as np

import encore
import encore.distributed as dist
from encore import nn


def close(a, b, tol=0.0):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape and np.all(np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b))), (a, b)


def check(world):
    r, n = world.rank, world.size
    x = encore.tensor(np.arange(6, dtype=np.float64).reshape(2, 3) + r + 1)
    base = np.arange(6, dtype=np.float64).reshape(2, 3)
    close(dist.all_reduce(x).numpy(), n * base + n * (n + 1) / 2)
    close(dist.all_reduce(x, op="mean").numpy(), base + (n + 1) / 2, 1e-15)
    close(dist.all_reduce(x, op="max").numpy(), base + n)
    close(dist.broadcast(x, root=n - 1).numpy(), base + n)
    close(dist.all_gather(encore.tensor(np.array([r], dtype=np.int64))).numpy(), np.arange(n))
    # Differentiable: d/dw sum((r + 1) * all_reduce(w * x)) = x * sum of (r + 1).
    w = encore.tensor(np.full(3, 0.5)).requires_grad_()
    (dist.all_reduce(w * encore.tensor(np.arange(1.0, 4.0))) * (r + 1.0)).sum().backward()
    close(w.grad.numpy(), np.arange(1.0, 4.0) * n * (n + 1) / 2)
    try:
        dist.all_reduce(x, op="prod")
        raise AssertionError("no error for op='prod'")
    except ValueError as e:
        assert "'sum', 'mean' or 'max'" in str(e)
    # The tiny Dense model's traced step makes exactly one all-reduce.
    encore.manual_seed(1)
    model = nn.Sequential([nn.Dense(8, activation="relu"), nn.Dense(1)])
    model.build((4, 6))
    opt = dist.DistributedOptimizer(encore.optim.Adam(model.parameters()))
    assert dist.buckets(opt) == [[3, 2, 1, 0]]

    @encore.trace
    def step(xb, yb):
        opt.zero_grad()
        loss = nn.mean_squared_error(yb, model(xb))
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(r)
    xb, yb = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal((4, 1)).astype(np.float32)
    for _ in range(3):
        before = encore.ledger.as_dict()["collectives"]
        step(xb, yb)
        assert encore.ledger.as_dict()["collectives"] - before == 1
    # compare_modes under mpirun reports each mode's communication: one all-reduce per step.
    report = encore.compare_modes(model=model, loss=nn.mean_squared_error, optimizer=opt, data=(xb, yb), steps=3,
                                  warmup=1, profile_steps=0)
    for mode in ("eager", "traced"):
        assert report[mode]["comm_calls"] == 1.0 and report[mode]["comm_bytes"] == 4 * 65, report[mode]
    assert "communication per step" in report.table()
    # Every rank holds the same parameters.
    for p in model.parameters():
        all_p = dist.all_gather(p.reshape((1, -1))).numpy()
        assert all((all_p[k] == all_p[0]).all() for k in range(n))
    dist.barrier()


def conv_model():
    encore.manual_seed(7)
    model = nn.Sequential([nn.Conv1D(4, 3, activation="relu"), nn.GlobalAveragePooling1D(), nn.Dense(1)])
    model.build((12, 10, 3))
    model.to(encore.float64)
    return model


def fit(world, out, epochs, load, save):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1, 1, (24, 10, 3)), rng.uniform(-1, 1, (24, 1))
    model = conv_model()
    opt = encore.optim.Adam(model.parameters(), lr=0.01)
    if world.size > 1 or dist.launched():
        opt = dist.DistributedOptimizer(opt)
    model.compile(opt, "mse")
    initial = 0
    if load:
        model.load_checkpoint(load)
        initial = model.epoch
    history = model.fit(x, y, batch_size=12, epochs=epochs, initial_epoch=initial, seed=5, verbose=0)
    if save:
        model.save_checkpoint(save)
    if world.rank == 0:
        np.savez(out, loss=np.array(history.history["loss"]),
                 **{f"p{i}": p.numpy() for i, p in enumerate(model.parameters())})


def main():
    world = dist.init()
    if sys.argv[1] == "check":
        check(world)
    else:
        args = sys.argv[2:]
        opt = {k: args[args.index(k) + 1] for k in ("--epochs", "--load", "--save") if k in args}
        fit(world, args[0], int(opt.get("--epochs", 2)), opt.get("--load"), opt.get("--save"))
    print(f"rank {world.rank} ok", flush=True)


if __name__ == "__main__":
    main()
