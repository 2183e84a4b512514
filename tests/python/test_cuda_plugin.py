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


# The CUDA libraries a loaded plugin maps (libcuda is the driver, loaded through libcudart).
_CUDA_LIBRARIES = ("libencore_cuda", "libcudart", "libcublas", "libcudnn", "libcuda.so")

_MAPPED = ("import sys\n"
           "def mapped():\n"
           "    names = {{line.split()[-1].rsplit('/', 1)[-1] for line in open('/proc/self/maps') if '/' in line}}\n"
           "    return sorted(n for n in names if n.startswith({libs!r}))\n"
           "import encore\n"
           "after_import = mapped()\n"
           "{then}\n"
           "print(repr((after_import, mapped(), encore.cuda.is_built())))\n")


def _mapped_after(then):
    code = _MAPPED.format(libs=_CUDA_LIBRARIES, then=then)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return eval(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps (Linux)")
def test_import_maps_no_cuda_library_until_cuda_is_used():
    # `import encore` used to load the plugin and its CUDA libraries (~0.9 s on a machine without a
    # GPU): binding the op functions listed the plugin's ops, and _C.cuda_built asked for it.
    after_import, after_training, _ = _mapped_after(
        "m = encore.nn.Sequential([encore.nn.Conv1D(4, 3), encore.nn.LSTM(3, return_sequences=True),\n"
        "                          encore.nn.Dense(1)])\n"
        "m.compile('adam', 'mse'); m.fit(encore.randn(8, 6, 2), encore.randn(8, 4, 1), verbose=0)")
    assert after_import == [] and after_training == [], (after_import, after_training)
    # Asking about CUDA loads the plugin (when this build has one and its libraries are there).
    after_import, after_query, built = _mapped_after("encore.cuda.is_available()")
    assert after_import == []
    plugin = os.path.join(os.path.dirname(encore._C.__file__), "libencore_cuda.so")
    if built:
        assert "libencore_cuda.so" in after_query and any(n.startswith("libcudart") for n in after_query)
    elif not os.path.exists(plugin):
        assert after_query == []
