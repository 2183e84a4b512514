"""DLPack lifetimes against a producer and a consumer written here with ctypes (independent of
encore and NumPy): a producer's memory is handed back exactly once, after the last view of it
(at once when it is read-only and encore copies it); a capsule encore refuses is left to its
producer; a consumer may call encore's deleter without the GIL. The CUDA side (the streams'
queued work) is in test_gpu.py."""

import ctypes
import gc
import weakref

import numpy as np
import pytest

import encore

READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", Deleter), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

PyCapsule_New = ctypes.pythonapi.PyCapsule_New
PyCapsule_New.restype = ctypes.py_object
PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
PyCapsule_SetName = ctypes.pythonapi.PyCapsule_SetName
PyCapsule_SetName.restype = ctypes.c_int
PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
PyCapsule_IsValid.restype = ctypes.c_int
PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Producer:
    """A CPU float32 array exported through a versioned capsule; counts its deleter's calls."""

    def __init__(self, values, flags=0, major=1, code=2, bits=32):
        self.buffer = np.array(values, dtype=np.float32)
        self.shape = (ctypes.c_int64 * 1)(len(values))
        self.deleted = 0
        self.deleter = Deleter(self._delete)  # kept alive as long as the producer
        self.managed = DLManagedTensorVersioned(
            DLPackVersion(major, 0), None, self.deleter, flags,
            DLTensor(self.buffer.ctypes.data, DLDevice(1, 0), 1, DLDataType(code, bits, 1), self.shape, None, 0))
        self.capsule = PyCapsule_New(ctypes.addressof(self.managed), b"dltensor_versioned", None)

    def _delete(self, _):
        self.deleted += 1

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_producer_memory_is_handed_back_once_after_the_last_view():
    p = Producer([1, 2, 3, 4])
    t = encore.from_dlpack(p)
    assert p.deleted == 0 and PyCapsule_IsValid(p.capsule, b"used_dltensor_versioned")
    p.buffer[0] = 9  # zero-copy
    view, array = t[1:], t.numpy()
    assert t.tolist() == [9, 2, 3, 4] and array[0] == 9
    del t
    gc.collect()
    assert p.deleted == 0 and view.tolist() == [2, 3, 4]
    del view
    gc.collect()
    assert p.deleted == 0 and array.tolist() == [9, 2, 3, 4]
    del array
    gc.collect()
    assert p.deleted == 1


def test_read_only_producer_is_copied_and_handed_back_at_once():
    p = Producer([1, 2, 3], flags=READ_ONLY)
    t = encore.from_dlpack(p)
    assert p.deleted == 1
    t.fill_(5)
    assert p.buffer.tolist() == [1, 2, 3] and t.tolist() == [5, 5, 5]


def test_refused_capsules():
    newer = Producer([1, 2], major=2)
    with pytest.raises(BufferError):
        encore.from_dlpack(newer)
    # Refused before it was consumed: the capsule stays its producer's.
    assert newer.deleted == 0 and PyCapsule_IsValid(newer.capsule, b"dltensor_versioned")
    bytes_ = Producer([1, 2], code=1, bits=8)
    with pytest.raises(TypeError):
        encore.from_dlpack(bytes_)
    # Refused after it was consumed (its dtype is read from the tensor): handed back.
    assert bytes_.deleted == 1


def test_consumer_may_call_the_deleter_without_the_gil():
    a = np.arange(5, dtype=np.float32)
    alive = weakref.ref(a)
    capsule = encore.from_numpy(a).__dlpack__(max_version=(1, 0))
    del a
    gc.collect()
    assert alive() is not None  # the capsule keeps the array the tensor viewed
    # Consume it as a C library would: rename, read, and call the deleter (ctypes releases the
    # GIL around the call; encore takes it to drop its reference to the array).
    address = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    assert PyCapsule_SetName(capsule, b"used_dltensor_versioned") == 0
    managed = DLManagedTensorVersioned.from_address(address)
    data = ctypes.cast(managed.dl_tensor.data, ctypes.POINTER(ctypes.c_float))
    assert [data[i] for i in range(5)] == [0, 1, 2, 3, 4]
    managed.deleter(ctypes.pointer(managed))
    del capsule
    gc.collect()
    assert alive() is None


def test_stream_argument():
    t = encore.ones(3)
    with pytest.raises(TypeError, match="stream"):
        t.__dlpack__(stream="default")
    for stream in (None, -1):
        assert encore.from_dlpack(t.__dlpack__(stream=stream)).tolist() == [1, 1, 1]
