"""A training run that can stop after k steps (or epochs), saving a checkpoint, and resume from it
in a fresh process; test_resume.py compares it with an uninterrupted run bit for bit.

    python resume_program.py API MODE TOTAL OUT [--stop-at K --save PATH] [--load PATH]

API: "model" (train_on_batch steps), "loop" (a hand-written step with optimizer and checkpoint
functions) or "fit" (epochs, ModelCheckpoint); MODE: "eager" or "traced". OUT receives the final
parameters, optimizer state and generator state (.npz)."""

import argparse

import numpy as np

import encore
from encore import callbacks, nn, optim


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((48, 6)).astype(np.float32)
    y = (x[:, :2].sum(axis=1, keepdims=True) > 0).astype(np.float32)
    return x, y


def network():
    encore.manual_seed(11)
    net = nn.Sequential([nn.Dense(16, activation="relu"), nn.Dropout(0.3), nn.Dense(1, activation="sigmoid")])
    net.build((1, 6))
    return net


def main():
    p = argparse.ArgumentParser()
    p.add_argument("api")
    p.add_argument("mode")
    p.add_argument("total", type=int)
    p.add_argument("out")
    p.add_argument("--stop-at", type=int)
    p.add_argument("--save")
    p.add_argument("--load")
    a = p.parse_args()
    x, y = data()
    net = network()
    opt = optim.Adam(net.parameters(), lr=0.01, global_clipnorm=1.0)
    end = a.stop_at if a.stop_at is not None else a.total

    if a.api == "model":
        net.compile(opt, "binary_crossentropy", ["accuracy"], mode=a.mode)
        if a.load:
            net.load_checkpoint(a.load)
        for step in range(net.iterations, end):
            i = step % 6
            net.train_on_batch(x[8 * i:8 * i + 8], y[8 * i:8 * i + 8])
        if a.save:
            net.save_checkpoint(a.save)
    elif a.api == "loop":
        def step(xb, yb):
            opt.zero_grad()
            loss = nn.binary_crossentropy(yb, net(xb))
            loss.backward()
            opt.step()
            return loss

        run = encore.trace(step) if a.mode == "traced" else step
        start = int(nn.load_checkpoint(net, a.load, opt)["steps"]) if a.load else 0
        for s in range(start, end):
            i = s % 6
            run(x[8 * i:8 * i + 8], y[8 * i:8 * i + 8])
        if a.save:
            nn.save_checkpoint(net, a.save, opt, metadata={"steps": str(end)})
    else:
        net.compile(opt, "binary_crossentropy", ["accuracy"], mode=a.mode)
        save = [callbacks.ModelCheckpoint(a.save, monitor="loss")] if a.save else []
        initial = 0
        if a.load:
            net.load_checkpoint(a.load)
            initial = net.epoch
        net.fit(x, y, batch_size=10, epochs=end, initial_epoch=initial, seed=4, callbacks=save, verbose=0)

    state = {f"param/{n}": p.numpy() for n, p in net.named_parameters()}
    state.update({f"optimizer/{k}": v.numpy() for k, v in opt.state().items()})
    state["generator"] = encore.default_generator().state.numpy()
    np.savez(a.out, **state)


if __name__ == "__main__":
    main()
