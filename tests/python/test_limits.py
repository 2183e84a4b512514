"""Sizes and values at the limits, as the fuzzing campaign reached them from Python: empty
axes, element counts that overflow, huge slice steps, integers that overflow, int64 scalars
above 2**53, precision of log_softmax. Each used to crash, hang or answer wrongly."""

import math

import numpy as np
import pytest

import encore
from encore import nn

I64 = np.iinfo(np.int64)
I32 = np.iinfo(np.int32)


# ---- zero-size tensors (these recursed until the stack overflowed) -------------------------

def test_softmax_of_an_empty_axis_is_empty():
    for shape in [(2, 0), (0, 3), (0,)]:
        for axis in (0, -1):
            assert encore.softmax(encore.zeros(*shape), axis).shape == shape
            assert encore.log_softmax(encore.zeros(*shape), axis).shape == shape


def test_layers_and_losses_on_an_empty_batch():
    x = encore.zeros(0, 6, 3, requires_grad=True)
    y = nn.Conv1D(4, 3, padding="same")(x)
    assert y.shape == (0, 6, 4)
    y.sum().backward()
    assert x.grad.shape == (0, 6, 3)
    assert encore.conv1d(encore.zeros(0, 5, 3), encore.ones(2, 3, 4)).shape == (0, 4, 4)
    assert nn.Dropout(0.5)(encore.zeros(0, 7)).shape == (0, 7)
    assert nn.Flatten()(encore.randn(0, 3, 4)).shape == (0, 12)
    assert encore.zeros(2, 0, 4).flatten(1).shape == (2, 0)
    assert nn.LSTM(3)(encore.zeros(0, 4, 2)).shape == (0, 3)
    with pytest.raises(encore.ShapeError, match="steps >= 1"):
        nn.LSTM(3)(encore.zeros(2, 0, 2))
    # The mean over no samples is NaN, as in Keras and NumPy.
    assert math.isnan(nn.binary_crossentropy(encore.zeros(0, 1), encore.zeros(0, 1)).item())
    assert math.isnan(nn.mean_squared_error(encore.zeros(0, 3), encore.zeros(0, 3)).item())
    labels = encore.zeros(0, dtype=encore.int64)
    assert math.isnan(nn.sparse_categorical_crossentropy(labels, encore.zeros(0, 5), from_logits=True).item())
    assert math.isnan(encore.zeros(2, 0).mean().item())


def test_conv1d_kernel_size_zero_is_a_value_error():
    with pytest.raises(ValueError, match=r"\[conv1d\] kernel size must be >= 1"):
        encore.conv1d(encore.ones(1, 8, 2), encore.ones(0, 2, 1))
    for filters, kernel_size in [(4, 0), (0, 3), (-1, 3), (4, -2)]:
        with pytest.raises(ValueError, match=r"\[conv1d\] filters, kernel_size"):
            nn.Conv1D(filters, kernel_size)


# ---- element counts and slices ------------------------------------------------------------

def test_element_counts_that_overflow_are_shape_errors():
    a = encore.zeros(1, 1).expand(2**33, 1)
    b = encore.zeros(1, 1).expand(1, 2**31)
    with pytest.raises(encore.ShapeError, match=r"\[add\] shape \(8589934592, 2147483648\) has too many"):
        a + b
    with pytest.raises(encore.ShapeError, match=r"\[conv1d\] shape \(2097152, 4194304, 2097152\)"):
        nn.Conv1D(2**21, 2**21).build((1, 2**22, 2**22))
    with pytest.raises(encore.ShapeError, match="too many elements"):
        encore.zeros(1).expand(2**61)
    assert encore.zeros(2**40, 0).shape == (2**40, 0)


def test_conv1d_with_a_stride_or_dilation_far_beyond_the_input():
    x = encore.randn(2, 5, 3)
    assert nn.Conv1D(4, 3, strides=2**40)(x).shape == (2, 1, 4)
    # Causal at dilation 2**40: only the last tap reads the input (oneDNN refused the sizes, and
    # 2**29 crashed it); the taps that read only padding are left out, exactly.
    layer = nn.Conv1D(4, 3, dilation_rate=2**40, padding="causal", use_bias=False)
    y = layer(x)
    kernel = layer.parameters()[0]
    np.testing.assert_allclose(y.numpy(), x.numpy() @ kernel.numpy()[2], rtol=1e-5, atol=1e-6)
    y.sum().backward()
    assert not kernel.grad.numpy()[:2].any() and kernel.grad.numpy()[2].any()
    # Short sequences of a dilated causal stack (taps reading padding only) give the same sums.
    w = encore.randn(3, 3, 4)
    padded = encore.conv1d(x.pad(1, 14, 0), w, dilation=7)
    np.testing.assert_allclose(encore.conv1d(x, w, dilation=7, padding="causal").numpy(), padded.numpy(), atol=1e-5)


def test_padding_too_large_names_the_op_called():
    x = encore.randn(2, 5, 3)
    with pytest.raises(encore.ShapeError, match=r"\[max_pool1d\] padding \(2, 5, 3\) by .* too many elements"):
        nn.MaxPooling1D(2**62, padding="same")(x)
    with pytest.raises(encore.ShapeError, match=r"\[avg_pool1d\] padding \(2, 5, 3\)"):
        nn.AveragePooling1D(2**62, padding="same")(x)
    for before, after in [(2**62, 2**62), (I64.max, 1)]:
        with pytest.raises(encore.ShapeError, match=r"\[pad\] padding \(2, 5, 3\) by .* along axis 1"):
            x.pad(1, before, after)


def test_slices_with_huge_steps():
    t = encore.arange(5)
    for step in (2**63 - 1, 2**63, 2**100):
        assert t[0:2:step].tolist() == [0]
        assert t[1::step].tolist() == [1]
        assert t[::-step].tolist() == [4]
    assert encore.zeros(3, 4)[:, 1::2**63].shape == (3, 1)


def test_repr_of_a_long_empty_tensor_is_short():
    text = repr(encore.zeros(2**31, 0))
    assert len(text) < 200 and "..." in text


# ---- integers -----------------------------------------------------------------------------

def test_integer_arithmetic_wraps_like_numpy():
    with np.errstate(over="ignore"):
        for dtype, info in ((np.int64, I64), (np.int32, I32)):
            a = np.array([info.max, info.min, info.min, -1], dtype=dtype)
            b = np.array([1, -1, info.min, info.max], dtype=dtype)
            x, y = encore.tensor(a), encore.tensor(b)
            np.testing.assert_array_equal((x + y).numpy(), a + b)
            np.testing.assert_array_equal((x - y).numpy(), a - b)
            np.testing.assert_array_equal((x * y).numpy(), a * b)
            np.testing.assert_array_equal((-x).numpy(), -a)
            np.testing.assert_array_equal(abs(x).numpy(), np.abs(a))
            np.testing.assert_array_equal((x + 1).numpy(), a + dtype(1))
            np.testing.assert_array_equal((x * 3).numpy(), a * dtype(3))
            assert x.sum().item() == a.sum(dtype=dtype)
            x += y
            np.testing.assert_array_equal(x.numpy(), a + b)


def test_float_to_integer_casts_are_defined():
    x = encore.tensor([math.nan, math.inf, -math.inf, 1e300, -2.9, 2.9], dtype=encore.float64)
    assert x.to(encore.int64).tolist() == [0, I64.max, I64.min, I64.max, -2, 2]
    assert x.to(encore.int32).tolist() == [0, I32.max, I32.min, I32.max, -2, 2]


def test_int64_scalars_are_exact():
    big = 2**62 + 1
    assert encore.full((1,), big, dtype=encore.int64).item() == big
    t = encore.zeros(2, dtype=encore.int64)
    t.fill_(big)
    assert t.tolist() == [big, big]
    assert (t - big).tolist() == [0, 0]
    assert (t - (big - 1)).tolist() == [1, 1]
    assert (encore.ones(1, dtype=encore.int64) * big).item() == big
    assert encore.arange(big, big + 2).tolist() == [big, big + 1]
    t[0] = big + 2
    assert t.tolist() == [big + 2, big]
    assert encore.arange(np.int64(3)).tolist() == [0, 1, 2]


def test_scalars_an_integer_tensor_cannot_hold_are_value_errors():
    t = encore.zeros(2, dtype=encore.int64)
    for bad in (math.nan, math.inf, -math.inf, 1e300, 2**64):
        with pytest.raises(ValueError, match=r"\[fill_\] the value .* cannot be stored in an int64 tensor"):
            t.fill_(bad)
        with pytest.raises(ValueError, match=r"\[full\]"):
            encore.full((1,), bad, dtype=encore.int64)
        with pytest.raises(ValueError, match=r"\[add_scalar\]"):
            t + bad
    with pytest.raises(ValueError, match="int32"):
        encore.zeros(1, dtype=encore.int32).fill_(2**31)
    t.fill_(2.5)  # truncates toward zero, as NumPy and PyTorch do
    assert t.tolist() == [2, 2]
    f = encore.zeros(1)
    f.fill_(math.nan)  # floating tensors take anything
    assert math.isnan(f.item())


# ---- precision ------------------------------------------------------------------------------

def test_log_softmax_is_precise_when_one_entry_dominates():
    x = np.array([[200, 190, 180], [1e-3, 0, -1e-3], [-50, 30, 30.5]])
    ref = x - x.max(axis=1, keepdims=True)
    ref = ref - np.log(np.exp(ref).sum(axis=1, keepdims=True))
    got = encore.log_softmax(encore.tensor(x.astype(np.float32))).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert abs(got[0, 0] - -4.5400960e-5) < 1e-11
