"""mypy --strict on a typed user script that uses encore as the README does: no error may come
from encore's exports or stubs (issue 28: `__all__` built with sorted() made mypy report 15
"does not explicitly export" errors)."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

USER_SCRIPT = '''
from typing import List, Tuple

import numpy as np

import encore
from encore import callbacks, data, metrics, nn, optim
from encore import Tensor, compare_modes, no_grad, trace


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1D(16, 3, activation="relu")
        self.lstm = nn.LSTM(8, return_sequences=False)
        self.head = nn.Dense(1, activation="sigmoid")

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.lstm(self.conv(x)))


def batches(n: int) -> List[Tuple[np.ndarray, np.ndarray]]:
    x = np.zeros((n, 12, 3), np.float32)
    return [(x, np.zeros((n, 1), np.float32))]


def main() -> float:
    encore.manual_seed(0)
    model = Net()
    x = encore.randn(4, 12, 3)
    y: Tensor = model(x)
    model.summary()
    state = model.state_dict()
    model.load_state_dict(state)
    weights = model.get_weights()
    model.set_weights(weights)
    model.zero_grad()
    model.compile(optim.Adam(model.parameters(), lr=1e-3), "binary_crossentropy",
                  metrics=["accuracy", metrics.AUC(), metrics.Precision()])
    history = model.fit(batches(4), epochs=1, verbose=0, callbacks=[callbacks.EarlyStopping(patience=2)])
    ds = data.ArrayDataset(x, encore.zeros(4, 1), batch_size=2)
    model.evaluate(ds)

    @trace
    def step(a: Tensor) -> Tensor:
        return encore.exp(a).mean() + encore.sum(a)

    with no_grad():
        z = step(x)
    report = compare_modes(lambda a: step(a), data=(x,), modes=["eager"], steps=1)
    print(report.table(), history.history, y.shape, z.item())
    seq = nn.Sequential([nn.Dense(2), nn.Dense(1)])
    seq.build((2, 3))
    return float(encore.tensor([1.0]).sum().item())
'''


def test_mypy_strict_on_a_typed_user_script(tmp_path):
    pytest.importorskip("mypy", reason="mypy is a test requirement (scripts/python_env.sh installs it)")
    import encore

    package = pathlib.Path(encore.__file__).resolve().parent
    if not (package / "_C.pyi").exists() or not (package / "_ops.py").exists():
        pytest.skip("encore is not installed as a plain package (an editable install splits it in two)")
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(USER_SCRIPT))
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / ".mypy_cache"))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(script)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
