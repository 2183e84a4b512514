"""GPU behaviour from Python; skipped where no CUDA device is present."""

import numpy as np
import pytest

import encore

pytestmark = pytest.mark.skipif(not encore.cuda.is_available(), reason="no CUDA device (or no CUDA backend)")


def test_tensors_move_between_devices():
    x = encore.arange(6, dtype=encore.float32).reshape(2, 3)
    g = x.to("cuda")
    assert g.device == "cuda:0" and g.device.type == "cuda"
    np.testing.assert_array_equal((g * 2).numpy(), x.numpy() * 2)
    assert (g + 1).cpu().tolist() == (x + 1).tolist()
    assert encore.ones(2, device="cuda").sum().item() == 2


def test_dlpack_on_the_gpu():
    g = encore.arange(4, dtype=encore.float32, device="cuda")
    assert g.__dlpack_device__() == (2, 0)
    back = encore.from_dlpack(g.__dlpack__(stream=None))
    assert back.device == "cuda:0" and back.tolist() == [0, 1, 2, 3]
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        t = torch.from_dlpack(g)
        assert t.is_cuda and t.tolist() == [0, 1, 2, 3]
        assert encore.from_dlpack(t * 2).tolist() == [0, 2, 4, 6]


def test_traced_training_on_the_gpu_matches_eager():
    from encore import nn, optim

    def run(traced):
        encore.manual_seed(0)
        model = nn.Sequential([nn.Conv1D(8, 3, activation="relu"), nn.GlobalAveragePooling1D(), nn.Dense(1)])
        model.build((16, 12, 4))
        model.to("cuda")
        opt = optim.Adam(model.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = nn.mean_squared_error(y, model(x))
            loss.backward()
            opt.step()
            return loss

        f = encore.trace(step) if traced else step
        rng = np.random.default_rng(0)
        x = encore.tensor(rng.standard_normal((16, 12, 4)).astype(np.float32), device="cuda")
        y = encore.tensor(rng.standard_normal((16, 1)).astype(np.float32), device="cuda")
        losses = [f(x, y).item() for _ in range(5)]
        return losses, [p.numpy() for p in model.parameters()]

    e, t = run(False), run(True)
    np.testing.assert_allclose(e[0], t[0], rtol=1e-5)
    for a, b in zip(e[1], t[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
