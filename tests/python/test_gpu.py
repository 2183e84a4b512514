"""GPU behaviour from Python; skipped where no CUDA device is present, except where
ENCORE_EXPECT_CUDA=1 says one is (tests/gpu/run.sh on the lent GPU machine): there they fail."""

import os

import numpy as np
import pytest

import encore

EXPECTED = os.environ.get("ENCORE_EXPECT_CUDA") == "1"
pytestmark = pytest.mark.skipif(not encore.cuda.is_available() and not EXPECTED,
                                reason="no CUDA device (or no CUDA backend)")


def test_cuda_is_available():
    assert encore.cuda.is_available(), encore.cuda.unavailable_reason()


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
        losses = [f(x, y).item()]  # eager, then traced and captured
        before = encore.ledger.as_dict()
        losses += [f(x, y).item() for _ in range(4)]
        after = encore.ledger.as_dict()
        launches = after["graph_launches"] - before["graph_launches"]
        replays = after["replays"] - before["replays"]
        return losses, [p.numpy() for p in model.parameters()], launches, replays

    e, t = run(False), run(True)
    assert (e[2], e[3]) == (0, 0)
    assert (t[2], t[3]) == (4, 4)  # one cudaGraphLaunch per replayed step
    np.testing.assert_array_equal(e[0], t[0])  # eager and replayed steps agree bit for bit
    for a, b in zip(e[1], t[1]):
        np.testing.assert_array_equal(a, b)


def _torch_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        if EXPECTED:
            pytest.fail("torch sees no GPU where ENCORE_EXPECT_CUDA=1 expects one")
        pytest.skip("torch sees no GPU")
    return torch


def test_dlpack_import_is_handed_back_after_encores_queued_work():
    """Memory imported from torch goes back to torch (which reuses it at once) only after the
    kernels encore queued on it ran: here a read queued behind a few large matrix products."""
    torch = _torch_on_the_gpu()
    n = 1 << 22
    busy = encore.randn(2048, 2048, device="cuda")
    for i in range(10):
        t = torch.full((n,), float(i + 1), device="cuda")
        e = encore.from_dlpack(t)
        for _ in range(4):
            busy = encore.matmul(busy, busy) * 1e-3
        doubled = e * 2.0  # reads torch's memory once the products are done
        del e, t
        junk = torch.full((n,), -1.0, device="cuda")  # the freed block, written at once
        assert np.unique(doubled.numpy()).tolist() == [2.0 * (i + 1)], f"round {i}"
        del junk


def test_dlpack_export_is_freed_after_the_consumers_queued_reads():
    """Memory exported to torch is freed (and reused by encore's next allocation) only after
    the kernels torch queued on it ran: here a read queued behind a few large matrix products."""
    torch = _torch_on_the_gpu()
    n = 1 << 22
    for i in range(10):
        e = encore.full((n,), float(i + 1), device="cuda")
        busy = torch.randn(2048, 2048, device="cuda")
        for _ in range(4):
            busy = busy @ busy * 1e-3
        doubled = torch.from_dlpack(e) * 2.0  # queued behind the products; the view is gone
        del e
        junk = [encore.full((n,), -1.0, device="cuda") for _ in range(2)]  # reuse the freed block
        assert torch.unique(doubled).tolist() == [2.0 * (i + 1)], f"round {i}"
        del junk
