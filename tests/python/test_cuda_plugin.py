"""The CUDA backend is a plugin (libencore_cuda.so next to libencore.so): without it, its CUDA
libraries, a driver or a GPU, the same package imports, trains on the CPU and says why CUDA is
not available."""

import os
import subprocess
import sys

import pytest

import encore


def test_unavailable_reason_is_empty_exactly_when_cuda_is_available():
    reason = encore.cuda.unavailable_reason()
    assert encore.cuda.is_available() == (reason == "")
    if not encore.cuda.is_built():
        assert f"\n  cuda: not available ({reason})\n" in encore._C.show_config()


def test_cuda_tensor_without_the_backend_says_why():
    if encore.cuda.is_built():
        pytest.skip("the CUDA backend is loaded")
    with pytest.raises(encore.DeviceError) as info:
        encore.ones(2, device="cuda")
    assert str(info.value) == f"[alloc] device cuda:0 is not available: {encore.cuda.unavailable_reason()}"


def test_trains_on_the_cpu_without_the_plugin(tmp_path):
    missing = tmp_path / "libencore_cuda.so"
    code = ("import encore\n"
            "model = encore.nn.Dense(1)\n"
            "x = encore.randn(8, 3)\n"
            "loss = ((model(x) - 1.0) * (model(x) - 1.0)).mean()\n"
            "loss.backward()\n"
            "assert model.parameters()[0].grad is not None\n"
            "print(encore.cuda.is_available(), encore.cuda.unavailable_reason())\n")
    env = {**os.environ, "ENCORE_CUDA_PLUGIN": str(missing)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    if encore.cuda.unavailable_reason().startswith("this build has no CUDA backend"):
        assert out == f"False {encore.cuda.unavailable_reason()}\n"
    else:
        assert out == f"False no CUDA plugin: {missing} not found\n"
