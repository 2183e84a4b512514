#!/usr/bin/env python3
"""Train your own data with Module.fit: a Conv1D classifier of noisy multichannel signals, with a
progress bar per epoch and the cost summary (traces and why, replays, time tracing vs
replaying) at the end of fit; then evaluate, predict, and resume from a checkpoint.

The task: does a noisy signal contain a tone of the target frequency (label 1) or of a
distractor frequency (label 0)? The tone is on a random third of the channels.

  python examples/train_fit.py [--epochs 10] [--samples 4096] [--mode traced|eager]

Exits with status 1 when the validation accuracy stays below 0.85.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

import encore
from encore import callbacks, nn, optim


def make_data(n: int, steps: int = 64, channels: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.float32)
    freq = np.where(y == 1, 0.25, rng.choice([0.125, 0.1], n))
    t = np.arange(steps)
    carries = rng.random((n, 1, channels)) < 1 / 3
    amplitude = carries * (0.5 + rng.random((n, 1, channels)))
    phase = 2 * np.pi * rng.random((n, 1, channels))
    tone = amplitude * np.sin(2 * np.pi * freq[:, None, None] * t[None, :, None] + phase)
    x = rng.standard_normal((n, steps, channels)) + tone
    return x.astype(np.float32), y[:, None]


class ToneDetector(nn.Module):
    """A custom model: Python attributes become its layers, forward says how they connect."""

    def __init__(self, filters: int = 32):
        super().__init__()
        self.conv = nn.Conv1D(filters, 8, strides=4, padding="same")
        self.pool = nn.GlobalAveragePooling1D()
        self.drop = nn.Dropout(0.3)
        self.hidden = nn.Dense(32, activation="relu")
        self.out = nn.Dense(1, activation="sigmoid")

    def forward(self, x):
        return self.out(self.hidden(self.drop(self.pool(self.conv(x)))))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--mode", choices=["traced", "eager"], default="traced")
    args = p.parse_args()

    x, y = make_data(args.samples)
    x_test, y_test = make_data(512, seed=1)

    encore.manual_seed(0)
    model = ToneDetector()
    steps_per_epoch = -(-int(args.samples * 0.8) // args.batch_size)
    schedule = optim.warmup(optim.cosine_decay(1e-2, args.epochs * steps_per_epoch, alpha=0.1), steps_per_epoch)
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"], mode=args.mode)

    with tempfile.TemporaryDirectory() as folder:
        best = os.path.join(folder, "best.safetensors")
        history = model.fit(
            x, y, batch_size=args.batch_size, epochs=args.epochs, validation_split=0.2, seed=0,
            callbacks=[callbacks.LearningRateScheduler(schedule),
                       callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True),
                       callbacks.ModelCheckpoint(best, monitor="val_accuracy", save_best_only=True)])

        loss, accuracy = model.evaluate(x_test, y_test)
        print(f"test loss {loss:.4f}, accuracy {accuracy:.3f}")
        probabilities = model.predict(x_test[:4])
        print("predictions", np.round(probabilities[:, 0], 3), "labels", y_test[:4, 0])

        # Resume: a fresh model loads the best checkpoint (parameters, optimizer state, generator
        # state, counters) and trains one more epoch from where that one stopped.
        encore.manual_seed(123)
        resumed = ToneDetector()
        resumed.build(x[:1].shape)
        resumed.compile("adam", "binary_crossentropy", metrics=["accuracy"], mode=args.mode)
        resumed.load_checkpoint(best)
        print(f"resumed at epoch {resumed.epoch}, step {resumed.iterations}, "
              f"lr {resumed.optimizer.lr:.2e}")
        resumed.fit(x, y, batch_size=args.batch_size, epochs=resumed.epoch + 1, initial_epoch=resumed.epoch,
                    validation_split=0.2, seed=0, verbose=2)

    best_val = max(history.history["val_accuracy"])
    print(f"best validation accuracy {best_val:.3f}")
    return 0 if best_val >= 0.85 else 1


if __name__ == "__main__":
    sys.exit(main())
