"""NumPy and DLPack interop: memory sharing, lifetimes, copies where sharing is impossible."""

import gc
import weakref

import numpy as np
import pytest

import encore


class TestNumpy:
    def test_from_numpy_shares_memory_both_ways(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        t = encore.from_numpy(a)
        assert t.shape == (2, 3) and t.dtype == encore.float32
        a[0, 0] = 42
        assert t[0, 0].item() == 42
        t[1].fill_(-1)
        assert (a[1] == -1).all()
        assert t.data_ptr() == a.ctypes.data

    def test_from_numpy_keeps_the_array_alive(self):
        a = np.arange(1000, dtype=np.float64)
        ref = weakref.ref(a) if hasattr(a, "__weakref__") else None
        t = encore.from_numpy(a)
        del a
        gc.collect()
        assert t.sum().item() == sum(range(1000))
        if ref is not None:
            assert ref() is not None
            del t
            gc.collect()
            assert ref() is None

    @pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
    def test_supported_dtypes_share(self, dtype):
        a = np.arange(4).astype(dtype)
        t = encore.from_numpy(a)
        assert t.dtype == getattr(encore, np.dtype(dtype).name)
        a[0] = 9
        assert t[0].item() == 9

    def test_non_contiguous_or_readonly_arrays_are_copied(self):
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        t = encore.from_numpy(a[:, ::2])
        np.testing.assert_array_equal(t.numpy(), a[:, ::2])
        a[0, 0] = 100
        assert t[0, 0].item() == 0
        r = np.arange(3, dtype=np.float32)
        r.flags.writeable = False
        t = encore.from_numpy(r)
        t.fill_(5)  # writes its own copy, never the read-only buffer
        assert r.tolist() == [0, 1, 2]
        big_endian = np.arange(3, dtype=">f4")
        with pytest.raises(TypeError):
            encore.from_numpy(big_endian)
        np.testing.assert_array_equal(encore.tensor(big_endian).numpy(), [0, 1, 2])

    def test_unsupported_dtype(self):
        with pytest.raises(TypeError, match="unsupported NumPy dtype"):
            encore.from_numpy(np.zeros(3, np.uint8))
        with pytest.raises(TypeError):
            encore.tensor(np.array(["a", "b"]))
        with pytest.raises(TypeError):
            encore.tensor([1 + 2j])

    def test_numpy_of_contiguous_tensor_shares_and_keeps_storage_alive(self):
        t = encore.arange(6, dtype=encore.float32)
        a = t.numpy()
        assert a.ctypes.data == t.data_ptr()
        a[0] = 7
        assert t[0].item() == 7
        t.fill_(1)
        assert a.sum() == 6
        del t
        gc.collect()
        assert a.sum() == 6  # the array's base holds the storage
        assert a.base is not None

    def test_numpy_of_strided_tensor_copies(self):
        t = encore.arange(6, dtype=encore.float32).reshape(2, 3)
        a = t.T.numpy()
        np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3).T)
        a[0, 0] = 50
        assert t[0, 0].item() == 0
        c = t.numpy(copy=True)
        c[0, 0] = 50
        assert t[0, 0].item() == 0

    def test_round_trip_and_array_protocol(self, rng):
        for dtype in (np.float32, np.float64, np.int32, np.int64):
            a = (rng.standard_normal((3, 4, 5)) * 10).astype(dtype)
            np.testing.assert_array_equal(encore.tensor(a).numpy(), a)
            np.testing.assert_array_equal(np.asarray(encore.tensor(a)), a)
        t = encore.ones(2, 2)
        assert np.asarray(t, dtype=np.float64).dtype == np.float64
        assert np.array(t).tolist() == [[1, 1], [1, 1]]
        assert t.tolist() == [[1.0, 1.0], [1.0, 1.0]]
        assert encore.tensor(3).tolist() == 3

    def test_arrays_are_accepted_wherever_a_tensor_is(self):
        t = encore.tensor([1.0, 2.0])
        a = np.array([10.0, 20.0], np.float32)
        for r in (t + a, a + t, t * a, a * t, t - a, a - t, a / t, t / a, encore.maximum(t, a)):
            assert isinstance(r, encore.Tensor), type(r)
        assert (a - t).tolist() == [9, 18]
        assert (a / t).tolist() == [10, 10]
        assert encore.exp(np.zeros(2, np.float32)).tolist() == [1, 1]
        m = np.eye(2, dtype=np.float32)
        assert isinstance(m @ encore.ones(2, 2), encore.Tensor)
        assert encore.nn.mean_squared_error(a, a).item() == 0
        with pytest.raises(TypeError):
            t + np.array([1.0, 2.0])  # float64 array with a float32 tensor: dtypes differ

    def test_as_tensor_and_tensor_constructor_share(self):
        a = np.zeros(3, np.float32)
        for t in (encore.as_tensor(a), encore.Tensor(a)):
            a[1] = 3
            assert t[1].item() == 3
        assert encore.Tensor([1, 2]).dtype == encore.int64


class TestDLPack:
    def test_numpy_consumes_encore(self):
        t = encore.arange(6, dtype=encore.float32).reshape(2, 3)
        a = np.from_dlpack(t)
        np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3))
        t.fill_(3)
        assert (a == 3).all()  # zero-copy
        del t
        gc.collect()
        assert a.sum() == 18  # the capsule's deleter keeps the storage alive

    def test_numpy_consumes_a_strided_view(self):
        t = encore.arange(12, dtype=encore.float64).reshape(3, 4)
        a = np.from_dlpack(t[:, 1::2].T)
        np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4)[:, 1::2].T)

    def test_encore_consumes_numpy(self):
        a = np.arange(12, dtype=np.int64).reshape(3, 4)
        t = encore.from_dlpack(a)
        assert t.dtype == encore.int64 and t.shape == (3, 4)
        a[2, 3] = -5
        assert t[2, 3].item() == -5
        s = encore.from_dlpack(a[:, ::2])  # strided: a view with strides, no copy
        a[0, 2] = 99
        assert s[0, 1].item() == 99
        del a
        gc.collect()
        assert t.sum().item() == sum(range(11)) - 5 + 99 - 2

    def test_round_trip(self, rng):
        for dtype in (np.float32, np.float64, np.int32, np.int64):
            a = (rng.standard_normal((2, 3)) * 100).astype(dtype)
            back = np.from_dlpack(encore.from_dlpack(a))
            np.testing.assert_array_equal(back, a)
            assert back.ctypes.data == a.ctypes.data

    def test_capsules_and_protocol_details(self):
        t = encore.ones(3)
        assert t.__dlpack_device__() == (1, 0)
        legacy = t.__dlpack__()
        assert "dltensor" in repr(legacy)
        assert encore.from_dlpack(legacy).tolist() == [1, 1, 1]
        with pytest.raises(TypeError):
            encore.from_dlpack(legacy)  # already consumed
        versioned = t.__dlpack__(max_version=(1, 0))
        assert "dltensor_versioned" in repr(versioned)
        del versioned  # never consumed: its destructor frees it
        gc.collect()
        copy = encore.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
        copy.fill_(2)
        assert t.tolist() == [1, 1, 1]
        assert encore.from_dlpack(t) is t
        with pytest.raises(TypeError):
            encore.from_dlpack([1, 2, 3])

    def test_readonly_producer_is_copied(self):
        a = np.arange(3, dtype=np.float32)
        a.flags.writeable = False
        t = encore.from_dlpack(a)
        t.fill_(9)
        assert a.tolist() == [0, 1, 2]

    def test_unsupported_dtype(self):
        with pytest.raises(TypeError):
            encore.from_dlpack(np.zeros(3, np.uint8))

    def test_torch_round_trip(self):
        torch = pytest.importorskip("torch")
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        t = encore.from_dlpack(x)
        x[0, 0] = 7
        assert t[0, 0].item() == 7
        y = torch.from_dlpack(t)
        assert y.data_ptr() == x.data_ptr()


class TestViewsOutliveTheTensorsStorage:
    """Arrays and DLPack consumers keep the storage they view alive, not the tensor: set_data
    and Module.to give the tensor other storage while they still read the old one (reading it
    after it was freed returned garbage or crashed; the ASan build reported it)."""

    N = 100_000

    def _reuse_freed_memory(self):
        # Freed blocks of this size come back to the next allocations: overwrite them.
        return [encore.full((self.N,), -7.0) for _ in range(8)]

    def test_numpy_array_after_set_data(self):
        t = encore.arange(self.N, dtype=encore.float32)
        a = t.numpy()
        t.set_data(encore.zeros(self.N))
        gc.collect()
        junk = self._reuse_freed_memory()
        assert a[0] == 0 and a[-1] == self.N - 1
        np.testing.assert_array_equal(a, np.arange(self.N, dtype=np.float32))
        assert t.sum().item() == 0 and len(junk) == 8

    def test_dlpack_consumer_after_set_data(self):
        t = encore.arange(self.N, dtype=encore.float64)
        a = np.from_dlpack(t)
        capsule = t.__dlpack__()  # exported, not consumed yet
        t.set_data(encore.zeros(self.N, dtype=encore.float64))
        gc.collect()
        junk = self._reuse_freed_memory()
        np.testing.assert_array_equal(a, np.arange(self.N, dtype=np.float64))
        np.testing.assert_array_equal(encore.from_dlpack(capsule).numpy(), np.arange(self.N))
        assert len(junk) == 8

    def test_parameter_array_after_module_to(self):
        model = encore.nn.Sequential([encore.nn.Dense(1000)])
        model.build((1, 100))
        kernel = model.parameters()[0]
        a = kernel.numpy()
        before = a.copy()
        model.to("float64")
        gc.collect()
        junk = self._reuse_freed_memory()
        assert kernel.dtype == encore.float64 and a.dtype == np.float32
        np.testing.assert_array_equal(a, before)
        np.testing.assert_array_equal(kernel.numpy(), before.astype(np.float64))
        assert len(junk) == 8
