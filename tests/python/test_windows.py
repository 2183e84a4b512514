"""Sliding windows: pad, the windowed view (unfold) and the checked window count shared by
convolutions and pools, against NumPy; causal padding against Keras' definition."""

import numpy as np
import pytest

import encore
from encore import nn


def test_unfold_is_numpys_sliding_window_view():
    x = np.random.default_rng(0).standard_normal((2, 9, 3)).astype(np.float32)
    for size, step in [(3, 1), (3, 2), (4, 4), (9, 1), (1, 3)]:
        got = encore.unfold(x, axis=1, size=size, step=step)
        want = np.lib.stride_tricks.sliding_window_view(x, size, axis=1)[:, ::step]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
    # A view: no copy, the window axis last, and the same storage.
    t = encore.tensor(x)
    w = t.unfold(1, 3, 2)
    assert w.data_ptr() == t.data_ptr() and not w.is_contiguous()


def test_unfold_gradient_sums_overlapping_windows():
    x = encore.ones(1, 6, 1, requires_grad=True)
    encore.unfold(x, 1, size=3, step=1).sum().backward()
    # Entry i is read by min(i + 1, 3, 6 - i) windows.
    assert x.grad.reshape(6).tolist() == [1, 2, 3, 3, 2, 1]
    y = encore.ones(1, 7, 1, requires_grad=True)
    encore.unfold(y, 1, size=2, step=3).sum().backward()
    assert y.grad.reshape(7).tolist() == [1, 1, 0, 1, 1, 0, 0]  # the tail no window reaches


def test_pad_is_numpys_pad():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    np.testing.assert_array_equal(encore.pad(x, axis=1, before=2, after=1, value=-1).numpy(),
                                  np.pad(x, ((0, 0), (2, 1)), constant_values=-1))
    np.testing.assert_array_equal(encore.pad(x, 0, 0, 2).numpy(), np.pad(x, ((0, 2), (0, 0))))
    t = encore.tensor(x)
    assert encore.pad(t, -1, 0, 0).tolist() == x.tolist()
    with pytest.raises(ValueError, match=r"^\[pad\] amounts must be >= 0"):
        encore.pad(t, 1, -1, 0)
    with pytest.raises(encore.ShapeError, match=r"^\[pad\] axis 2"):
        encore.pad(t, 2, 1, 1)
    with pytest.raises(ValueError, match=r"^\[pad\] the value 1099511627776 cannot be stored in an int32"):
        encore.pad(encore.ones(2, dtype="int32"), 0, 1, 1, value=2**40)  # not an int32


def test_too_few_steps_for_one_window_is_a_shape_error():
    # Truncating division once counted a window that does not fit: (3 - 5) / 2 + 1 == 0 + 1.
    with pytest.raises(encore.ShapeError, match=r"^\[conv1d\] input length 3 .* too short for kernel size 5"):
        encore.conv1d(encore.ones(1, 3, 2), encore.ones(5, 2, 1), stride=2)
    with pytest.raises(encore.ShapeError, match=r"^\[unfold\] input length 2 .* too short for kernel size 3"):
        encore.unfold(encore.ones(1, 2, 1), 1, 3, 2)
    with pytest.raises(encore.ShapeError, match=r"^\[conv1d\]"):
        nn.Conv1D(1, 5, strides=2).build((1, 3, 2))


def test_padding_errors_name_their_caller():
    with pytest.raises(ValueError, match=r"^\[conv1d\] unknown padding 'full'"):
        encore.conv1d(encore.ones(1, 8, 2), encore.ones(3, 2, 1), padding="full")
    with pytest.raises(ValueError, match=r"^\[conv1d\] unknown padding 'full'"):
        nn.Conv1D(1, 3, padding="full")


@pytest.mark.parametrize("kernel,dilation,stride", [(3, 1, 1), (4, 2, 1), (2, 3, 2), (1, 1, 1)])
def test_causal_convolution_pads_the_past_only(kernel, dilation, stride):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 11, 3))
    w = rng.standard_normal((kernel, 3, 4))
    got = encore.conv1d(x, w, stride=stride, padding="causal", dilation=dilation)
    left = (kernel - 1) * dilation
    want = encore.conv1d(np.pad(x, ((0, 0), (left, 0), (0, 0))), w, stride=stride, dilation=dilation)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if stride == 1:
        assert got.shape[1] == 11
    # Step t never depends on a later step.
    x2 = x.copy()
    x2[:, 6:] += 1.0
    changed = encore.conv1d(x2, w, stride=stride, padding="causal", dilation=dilation).numpy()
    last_unchanged = (6 - 1) // stride  # output steps t with t * stride <= 5
    np.testing.assert_array_equal(changed[:, :last_unchanged + 1], got.numpy()[:, :last_unchanged + 1])


def test_causal_conv1d_layer():
    layer = nn.Conv1D(4, 3, padding="causal", dilation_rate=2)
    y = layer(encore.ones(2, 10, 3))
    assert y.shape == (2, 10, 4)


# ---- pools: Keras semantics -----------------------------------------------------------------

def keras_pool(x, pool, stride, padding, reduce):
    """TensorFlow's pooling: 'same' gives ceil(steps / stride) windows and ignores padded steps."""
    steps = x.shape[1]
    if padding == "valid":
        starts = range(0, steps - pool + 1, stride)
        return np.stack([reduce(x[:, s:s + pool], axis=1) for s in starts], axis=1)
    out = -(-steps // stride)
    left = max((out - 1) * stride + pool - steps, 0) // 2
    windows = [x[:, max(t * stride - left, 0):min(t * stride - left + pool, steps)] for t in range(out)]
    return np.stack([reduce(w, axis=1) for w in windows], axis=1)


@pytest.mark.parametrize("pool,strides,padding", [(2, None, "valid"), (3, 1, "valid"), (3, 2, "same"),
                                                  (4, 3, "same"), (5, 2, "same"), (1, 1, "valid")])
def test_max_pooling1d_matches_keras(pool, strides, padding):
    x = np.random.default_rng(pool).standard_normal((2, 11, 3)).astype(np.float32)
    layer = nn.MaxPooling1D(pool, strides=strides, padding=padding)
    want = keras_pool(x, pool, strides or pool, padding, np.max)
    assert layer.build((2, 11, 3)) == want.shape
    np.testing.assert_array_equal(layer(encore.tensor(x)).numpy(), want)
    np.testing.assert_array_equal(encore.max_pool1d(x, pool, strides, padding).numpy(), want)


def test_max_pooling1d_gradient_goes_to_each_windows_max():
    x = encore.tensor([[[1.0], [5.0], [2.0], [4.0], [3.0]]], requires_grad=True)
    encore.max_pool1d(x, pool_size=2, strides=1).sum().backward()  # windows 1|5, 5|2, 2|4, 4|3
    assert x.grad.reshape(5).tolist() == [0, 2, 0, 2, 0]
    ints = encore.tensor([[[3], [-7], [2]]])  # integer tensors pool too; padding is int64's lowest
    assert encore.max_pool1d(ints, 2, padding="same").reshape(2).tolist() == [3, 2]


def test_max_pooling1d_in_a_traced_model_matches_eager():
    model = nn.Sequential([nn.Conv1D(4, 3, padding="causal"), nn.MaxPooling1D(2, padding="same"),
                           nn.GlobalAveragePooling1D(), nn.Dense(1)])
    x = encore.randn(3, 9, 2, generator=encore.Generator(5))
    eager = model(x)
    traced = encore.trace(lambda x: model(x))
    assert traced(x).tolist() == eager.tolist() and traced(x).tolist() == eager.tolist()


def test_pool_errors():
    with pytest.raises(ValueError, match=r"^\[max_pooling1d\] padding must be 'valid' or 'same'"):
        nn.MaxPooling1D(2, padding="causal")
    with pytest.raises(ValueError, match=r"^\[max_pooling1d\] pool_size and strides must be >= 1"):
        nn.MaxPooling1D(0)
    with pytest.raises(encore.ShapeError, match=r"^\[max_pool1d\] input length 2 .* too short for kernel size 3"):
        encore.max_pool1d(encore.ones(1, 2, 1), 3)
    with pytest.raises(encore.ShapeError, match=r"^\[max_pool1d\] expects \(batch, steps, channels\)"):
        encore.max_pool1d(encore.ones(4, 2), 2)
