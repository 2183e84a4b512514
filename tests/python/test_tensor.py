"""Tensor API: creation, geometry, operators, indexing, reductions, autograd hooks."""

import math

import numpy as np
import pytest

import encore


def values(t):
    return np.asarray(t.numpy())


class TestCreation:
    def test_tensor_from_lists_and_scalars(self):
        t = encore.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert t.shape == (2, 2) and t.dtype == encore.float32 and t.ndim == 2 and t.numel() == 4
        assert str(t.device) == "cpu" and t.device == "cpu" and t.device == encore.Device("cpu")
        assert encore.tensor([1, 2, 3]).dtype == encore.int64
        assert encore.tensor([True, False]).dtype == encore.float32
        s = encore.tensor(2.5)
        assert s.shape == () and s.item() == 2.5 and isinstance(s.item(), float)
        assert encore.tensor(7).item() == 7 and isinstance(encore.tensor(7).item(), int)
        assert encore.tensor([1, 2], dtype=encore.float64).dtype == encore.float64
        assert encore.tensor([1, 2], dtype="int32").dtype == encore.int32
        assert encore.tensor([1, 2], dtype=np.float64).dtype == encore.float64

    def test_tensor_from_numpy_keeps_dtype_and_copies(self):
        for np_dtype, dtype in [(np.float32, encore.float32), (np.float64, encore.float64),
                                (np.int32, encore.int32), (np.int64, encore.int64),
                                (np.int16, encore.int32), (np.uint8, encore.int32), (np.float16, encore.float32),
                                (np.bool_, encore.float32)]:
            a = np.arange(6).reshape(2, 3).astype(np_dtype)
            t = encore.tensor(a)
            assert t.dtype == dtype, np_dtype
            np.testing.assert_array_equal(values(t), a.astype(values(t).dtype))
        a = np.zeros(3, np.float32)
        t = encore.tensor(a)
        a[0] = 5
        assert t[0].item() == 0  # encore.tensor always copies

    def test_creation_functions(self):
        assert encore.zeros(2, 3).shape == (2, 3)
        assert encore.zeros((2, 3)).shape == (2, 3)
        assert encore.ones([4], dtype=encore.int32).tolist() == [1, 1, 1, 1]
        assert encore.full((2,), 3.5).tolist() == [3.5, 3.5]
        x = encore.ones(2, 2, dtype=encore.float64)
        assert encore.zeros_like(x).dtype == encore.float64 and encore.zeros_like(x).tolist() == [[0, 0], [0, 0]]
        assert encore.ones_like(x).tolist() == [[1, 1], [1, 1]]
        assert encore.full_like(x, 2).tolist() == [[2, 2], [2, 2]]
        assert encore.arange(4).tolist() == [0, 1, 2, 3] and encore.arange(4).dtype == encore.int64
        np.testing.assert_allclose(values(encore.arange(0, 1, 0.25)), [0, 0.25, 0.5, 0.75])
        assert encore.arange(1, 7, 2).tolist() == [1, 3, 5]
        assert encore.zeros(0, 3).numel() == 0
        assert encore.ones(2, requires_grad=True).requires_grad

    def test_random_is_reproducible(self):
        encore.manual_seed(3)
        a = values(encore.randn(100))
        encore.manual_seed(3)
        b = values(encore.randn(100))
        np.testing.assert_array_equal(a, b)
        assert abs(a.mean()) < 0.4 and 0.6 < a.std() < 1.4
        u = values(encore.rand(1000))
        assert u.min() >= 0 and u.max() < 1
        g1, g2 = encore.Generator(5), encore.Generator(5)
        np.testing.assert_array_equal(values(encore.normal((10,), 2.0, 3.0, generator=g1)),
                                      values(encore.normal((10,), 2.0, 3.0, generator=g2)))
        assert g1.seed == 5 and g1.offset > 0 and g1.device == "cpu"
        w = values(encore.uniform((500,), -2.0, -1.0, generator=g1))
        assert w.min() >= -2 and w.max() < -1
        g1.manual_seed(5)
        assert g1.offset == 0


class TestOperators:
    def test_arithmetic_with_tensors_and_scalars(self):
        a = encore.tensor([1.0, 2.0, 4.0])
        b = encore.tensor([2.0, 2.0, 2.0])
        assert (a + b).tolist() == [3, 4, 6]
        assert (a - b).tolist() == [-1, 0, 2]
        assert (a * b).tolist() == [2, 4, 8]
        assert (a / b).tolist() == [0.5, 1, 2]
        assert (a + 1).tolist() == [2, 3, 5] and (1 + a).tolist() == [2, 3, 5]
        assert (a - 1).tolist() == [0, 1, 3] and (1 - a).tolist() == [0, -1, -3]
        assert (a * 2).tolist() == [2, 4, 8] and (2 * a).tolist() == [2, 4, 8]
        assert (a / 2).tolist() == [0.5, 1, 2] and (4 / a).tolist() == [4, 2, 1]
        assert (-a).tolist() == [-1, -2, -4] and (+a).tolist() == [1, 2, 4]
        assert (a ** 2).tolist() == [1, 4, 16]
        assert abs(-a).tolist() == [1, 2, 4]

    def test_augmented_assignment_writes_in_place(self):
        array = np.array([1.0, 2.0, 4.0], dtype=np.float32)
        a = encore.from_numpy(array)
        alias = a
        a += 1
        a *= encore.tensor([2.0, 2.0, 2.0])
        a -= 1
        a /= 2
        assert a is alias and a.tolist() == [1.5, 2.5, 4.5]
        assert array.tolist() == [1.5, 2.5, 4.5]  # the shared NumPy array sees the writes
        with pytest.raises(ValueError):
            a += encore.ones(2, 3)  # the result must fit the tensor's shape

    def test_integer_tensors_refuse_fractional_operands(self):
        i = encore.tensor([1, 2, 3], dtype="int32")
        for compute in (lambda: i < 1.5, lambda: i == 1.5, lambda: i * 2.5, lambda: i / 2.5, lambda: i + 0.5,
                        lambda: 1.5 > i, lambda: 2.5 * i):
            with pytest.raises(ValueError, match="is not a whole number"):
                compute()
        with pytest.raises(ValueError, match="is not a whole number"):
            i += 0.5
        assert (i * 2.0).tolist() == [2, 4, 6] and (i < 2.0).tolist() == [1, 0, 0]
        assert (i.to("float32") * 2.5).tolist() == [2.5, 5.0, 7.5]

    def test_values_an_integer_dtype_cannot_hold_are_refused_at_creation(self):
        for data, dtype in ((np.array([2**40]), "int32"), ([float("nan")], "int32"), ([float("inf")], "int64"),
                            (np.array([2**63 + 5], dtype=np.uint64), None), ([1e30], "int32"),
                            (np.array([-2**31 - 1]), "int32")):
            with pytest.raises(ValueError, match=r"\[tensor\] .*cannot be stored in an int"):
                encore.tensor(data, dtype=dtype)
        assert encore.tensor([1.9, -2.9, 2**31 - 1], dtype="int64").tolist() == [1, -2, 2**31 - 1]
        assert encore.tensor(np.array([2**31 - 1, -2**31]), dtype="int32").tolist() == [2**31 - 1, -2**31]
        assert encore.tensor(np.array([2**63 - 1], dtype=np.uint64)).tolist() == [2**63 - 1]

    def test_augmented_assignment_keeps_autograd_history(self):
        w = encore.tensor([1.0, 2.0], requires_grad=True)
        loss = (w * w).sum()
        first = loss
        loss += (w * 3).sum()  # rebinds: an autograd graph is never written in place
        assert first.item() == 5 and loss.item() == 14
        loss.backward()
        assert w.grad.tolist() == [5, 7]

    def test_augmented_assignment_to_a_view_with_grad_on_is_an_error(self):
        x = encore.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 1.0
        v = y[0:2]
        with pytest.raises(ValueError, match=r"\[\*=\] cannot update .* in place: it is a view of another tensor"):
            v *= 0  # the write would be lost: y would not change
        assert y.tolist() == [1.0, 2.0, 3.0] and v.tolist() == [1.0, 2.0]
        with encore.no_grad():
            v *= 0  # a write into y's memory, as asked
        assert y.tolist() == [0.0, 0.0, 3.0]

    def test_parameter_updates_in_place_under_no_grad(self):
        w = encore.tensor([1.0, 2.0], requires_grad=True)
        (w * w).sum().backward()
        same, ptr = w, w.data_ptr()
        with encore.no_grad():
            w -= 0.5 * w.grad
            w += 1
        assert w is same and w.data_ptr() == ptr and w.tolist() == [1.0, 1.0] and w.requires_grad

    def test_in_place_update_of_a_parameter_with_grad_on_is_an_error(self):
        w = encore.tensor([1.0, 2.0], requires_grad=True)
        w.name = "dense.kernel"
        with pytest.raises(ValueError, match=r"\[\+=\] cannot update 'dense.kernel' .* in place: it requires grad "
                                             r"and grad mode is on.*encore.no_grad"):
            w += 1
        with pytest.raises(ValueError, match=r"\[\*=\]"):
            w *= 2
        assert w.tolist() == [1.0, 2.0]  # neither updated nor rebound

    def test_in_place_update_inside_a_traced_step(self):
        def run(traced):
            w = encore.tensor([1.0, -1.0], requires_grad=True)

            def step(x):
                nonlocal w  # `w -= ...` assigns the name (to the same tensor, updated in place)
                w.grad = None
                loss = (w * x).sum() ** 2
                loss.backward()
                with encore.no_grad():
                    w -= 0.1 * w.grad
                return loss

            f = encore.trace(step) if traced else step
            losses = [f(encore.tensor([float(i), 2.0])).item() for i in range(4)]
            return losses, w.numpy().copy(), f

        eager, eager_w, _ = run(False)
        traced, traced_w, f = run(True)
        assert eager == traced and eager_w.tobytes() == traced_w.tobytes() and f.stats["traces"] == 1

    def test_broadcasting_and_matmul(self):
        a = encore.ones(2, 3)
        b = encore.tensor([1.0, 2.0, 3.0])
        assert (a * b).tolist() == [[1, 2, 3], [1, 2, 3]]
        m = encore.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert (m @ m).tolist() == [[7, 10], [15, 22]]
        assert encore.matmul(m, encore.tensor([1.0, 1.0])).tolist() == [3, 7]

    def test_comparisons_return_masks(self):
        a = encore.tensor([1.0, 2.0, 3.0])
        b = encore.tensor([2.0, 2.0, 2.0])
        assert (a < b).tolist() == [1, 0, 0]
        assert (a <= b).tolist() == [1, 1, 0]
        assert (a > b).tolist() == [0, 0, 1]
        assert (a >= b).tolist() == [0, 1, 1]
        assert (a == b).tolist() == [0, 1, 0]
        assert (a != b).tolist() == [1, 0, 1]
        assert (a > 1.5).tolist() == [0, 1, 1] and (a < 2).tolist() == [1, 0, 0]
        assert (a == 2).tolist() == [0, 1, 0] and (a != 2).tolist() == [1, 0, 1]
        assert (a >= 2).tolist() == [0, 1, 1] and (a <= 2).tolist() == [1, 1, 0]
        assert (a > 1).dtype == encore.float32
        assert (a == None) is False and (a != "x") is True  # noqa: E711
        assert len({a, b}) == 2  # identity hashing

    def test_truth_value(self):
        assert bool(encore.tensor([1.0])) and not bool(encore.tensor(0.0))
        with pytest.raises(ValueError, match="ambiguous"):
            bool(encore.ones(2))
        assert float(encore.tensor(2.5)) == 2.5 and int(encore.tensor(3)) == 3
        assert f"{encore.tensor(2.5):.2f}" == "2.50"

    def test_unary_functions_and_methods(self):
        x = encore.tensor([-1.0, 0.0, 2.0])
        np.testing.assert_allclose(values(encore.exp(x)), np.exp([-1, 0, 2]), rtol=1e-6)
        assert encore.relu(x).tolist() == [0, 0, 2] and x.relu().tolist() == [0, 0, 2]
        np.testing.assert_allclose(values(encore.tanh(x)), np.tanh([-1, 0, 2]), rtol=1e-6)
        np.testing.assert_allclose(values(encore.sigmoid(x)), 1 / (1 + np.exp([1, 0, -2])), rtol=1e-6)
        assert encore.abs(x).tolist() == [1, 0, 2]
        assert encore.clip(x, -0.5, 1).tolist() == [-0.5, 0, 1]
        assert encore.maximum(x, encore.zeros(3)).tolist() == [0, 0, 2]
        assert encore.minimum(x, encore.zeros(3)).tolist() == [-1, 0, 0]
        np.testing.assert_allclose(values(encore.leaky_relu(x, 0.1)), [-0.1, 0, 2], rtol=1e-6)
        np.testing.assert_allclose(values(encore.sqrt(encore.tensor([4.0, 9.0]))), [2, 3])
        np.testing.assert_allclose(values(encore.log(encore.tensor([1.0, math.e]))), [0, 1], rtol=1e-6)
        np.testing.assert_allclose(values(encore.pow(encore.tensor([2.0]), 3)), [8])
        sm = values(encore.softmax(encore.tensor([[1.0, 2.0, 3.0]])))
        np.testing.assert_allclose(sm.sum(), 1, rtol=1e-6)
        np.testing.assert_allclose(values(encore.log_softmax(encore.tensor([[1.0, 2.0, 3.0]]))), np.log(sm), rtol=1e-5)
        assert encore.activation(x, "relu").tolist() == [0, 0, 2]

    def test_data_movement(self):
        a, b = encore.ones(2, 3), encore.zeros(2, 3)
        assert encore.concat([a, b], axis=0).shape == (4, 3)
        assert encore.concat([a, b], axis=1).shape == (2, 6)
        assert encore.stack([a, b]).shape == (2, 2, 3) and encore.stack([a, b], axis=2).shape == (2, 3, 2)
        assert encore.flip(encore.arange(4), 0).tolist() == [3, 2, 1, 0]

    def test_conv1d(self, rng):
        x = rng.standard_normal((2, 10, 3)).astype(np.float32)
        w = rng.standard_normal((3, 3, 4)).astype(np.float32)
        y = encore.conv1d(encore.tensor(x), encore.tensor(w))
        ref = np.stack([np.einsum("bkc,kcf->bf", x[:, t:t + 3], w) for t in range(8)], axis=1)
        np.testing.assert_allclose(values(y), ref, rtol=1e-4, atol=1e-5)
        assert encore.conv1d(encore.tensor(x), encore.tensor(w), padding="same").shape == (2, 10, 4)
        assert encore.conv1d(encore.tensor(x), encore.tensor(w), padding=(2, 0)).shape == (2, 10, 4)
        assert encore.conv1d(encore.tensor(x), encore.tensor(w), stride=2, padding=1).shape == (2, 5, 4)
        assert encore.conv1d(encore.tensor(x), encore.tensor(w), dilation=2).shape == (2, 6, 4)

    def test_dropout_follows_training_mode(self):
        x = encore.ones(1000)
        y = values(encore.dropout(x, 0.5))
        assert set(np.unique(y)) <= {0.0, 2.0} and 300 < (y == 0).sum() < 700
        with encore.training(False):
            assert values(encore.dropout(x, 0.5)).min() == 1
        assert values(encore.dropout(x, 0.5, training=False)).min() == 1


class TestIndexing:
    def setup_method(self):
        self.np = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        self.t = encore.tensor(self.np)

    @pytest.mark.parametrize("key", [
        1, -1, (0, 2), (1, -1, -2), slice(None), slice(1, None), (slice(None), slice(1, 3)),
        (Ellipsis, slice(None, None, 2)), (Ellipsis, 0), (None,), (0, None, slice(None)), (slice(None), None, 1),
        (Ellipsis, slice(None, None, -1)), (slice(None, None, -2),), (slice(None), slice(2, 0, -1)),
        (slice(5, 10),), (slice(None), slice(-2, None)), (0, Ellipsis, None), (),
    ])
    def test_matches_numpy(self, key):
        np.testing.assert_array_equal(values(self.t[key]), self.np[key])

    def test_integer_indexing_returns_views(self):
        row = self.t[1]
        row.fill_(-1)
        assert values(self.t)[1].min() == -1
        sub = self.t[:, 1:3]
        assert sub.shape == (2, 2, 4)
        sub.zero_()
        assert values(self.t)[:, 1:3].max() == 0 and values(self.t)[0, 0, 0] == 0 and values(self.t)[0, 0, 1] == 1

    def test_setitem(self):
        t = encore.zeros(3, 4)
        t[1] = 5.0
        t[:, 0] = encore.tensor([1.0, 2.0, 3.0])
        t[2, 1:3] = np.array([7.0, 8.0])
        expected = np.zeros((3, 4), np.float32)
        expected[1] = 5
        expected[:, 0] = [1, 2, 3]
        expected[2, 1:3] = [7, 8]
        np.testing.assert_array_equal(values(t), expected)

    def test_bad_indices(self):
        with pytest.raises(IndexError):
            self.t[2]
        with pytest.raises(IndexError):
            self.t[0, 0, 0, 0]
        with pytest.raises(IndexError):
            self.t[..., ...]
        with pytest.raises(TypeError):
            self.t[[0, 1]]
        with pytest.raises(TypeError):
            self.t["a"]
        with pytest.raises(TypeError):
            self.t[encore.tensor([0])]

    def test_len_and_iteration(self):
        assert len(self.t) == 2
        rows = list(self.t)
        assert len(rows) == 2 and rows[1].shape == (3, 4)
        with pytest.raises(TypeError):
            len(encore.tensor(1.0))
        with pytest.raises(TypeError):
            iter(encore.tensor(1.0)).__next__()


class TestGeometry:
    def test_views(self):
        t = encore.arange(6, dtype=encore.float32)
        m = t.reshape(2, 3)
        assert m.shape == (2, 3) and t.reshape((3, 2)).shape == (3, 2) and t.reshape(-1, 2).shape == (3, 2)
        assert m.view(3, 2).shape == (3, 2)
        w = encore.arange(6, dtype=encore.float32).reshape(2, 3)
        w.view(6)[0] = 9.0  # a view writes through
        assert w[0, 0].item() == 9.0
        with pytest.raises(encore.ShapeError, match=r"\[view\] cannot view .* without copying: use reshape"):
            w.T.view(6)  # its writes would have gone to a copy
        assert w.T.reshape(6).tolist() == [9, 3, 1, 4, 2, 5]
        assert encore.zeros(0, 3).T.view(3, 0).shape == (3, 0)  # nothing to copy: a view of nothing
        assert m.T.shape == (3, 2) and m.T.tolist() == [[0, 3], [1, 4], [2, 5]]
        assert m.transpose(0, 1).tolist() == m.T.tolist()
        c = encore.zeros(2, 3, 4)
        assert c.permute(2, 0, 1).shape == (4, 2, 3) and c.permute((1, 2, 0)).shape == (3, 4, 2)
        assert c.permute(-1, -3, -2).shape == (4, 2, 3)  # axes count from the end
        assert c.T.shape == (4, 3, 2)
        assert not m.T.is_contiguous() and m.T.contiguous().is_contiguous()
        assert encore.zeros(1, 3, 1).squeeze().shape == (3,) and encore.zeros(1, 3).squeeze(0).shape == (3,)
        assert encore.zeros(3).unsqueeze(0).shape == (1, 3)
        assert c.flatten(1).shape == (2, 12) and c.flatten().shape == (24,)
        assert encore.ones(1, 3).expand(4, 3).shape == (4, 3)
        assert m.strides == (3, 1) and m.T.strides == (1, 3)
        assert m.size() == (2, 3) and m.size(-1) == 3

    def test_reductions(self):
        a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        t = encore.tensor(a)
        assert t.sum().item() == a.sum()
        np.testing.assert_allclose(values(t.sum(axis=1)), a.sum(axis=1))
        np.testing.assert_allclose(values(t.mean(axis=(0, 2))), a.mean(axis=(0, 2)))
        assert t.max(axis=-1, keepdims=True).shape == (2, 3, 1)
        np.testing.assert_allclose(values(t.max(axis=-1)), a.max(axis=-1))
        np.testing.assert_allclose(values(encore.sum(t, axis=0)), a.sum(axis=0))
        np.testing.assert_allclose(values(encore.mean(t)), a.mean())
        np.testing.assert_allclose(values(encore.max(t, 2)), a.max(axis=2))

    def test_conversions(self):
        t = encore.tensor([1.5, 2.5])
        assert t.to(encore.float64).dtype == encore.float64
        assert t.to("float64").dtype == encore.float64
        assert t.to(dtype=encore.int32).tolist() == [1, 2]
        assert t.to("cpu").tolist() == [1.5, 2.5] and t.to(device="cpu").data_ptr() == t.data_ptr()
        assert t.to(encore.Device("cpu"), encore.float64).dtype == encore.float64
        assert t.double().dtype == encore.float64 and t.long().dtype == encore.int64
        assert t.int().dtype == encore.int32 and t.double().float().dtype == encore.float32
        c = t.clone()
        c.fill_(0)
        assert t.tolist() == [1.5, 2.5]
        c.copy_(t)
        assert c.tolist() == [1.5, 2.5]
        c.zero_()
        assert c.tolist() == [0, 0]

    def test_repr_and_name(self):
        t = encore.tensor([1.0, 2.0])
        assert repr(t) == str(t) == "tensor([1., 2.], dtype=float32)"
        assert "requires_grad=True" in repr(encore.ones(1, requires_grad=True))
        assert t.name == ""
        t.name = "weights"
        assert t.name == "weights"
        assert repr(encore.float32) == "encore.float32" and str(encore.int64) == "int64"
        assert encore.float64.itemsize == 8 and encore.float32.is_floating_point and not encore.int32.is_floating_point
        assert repr(encore.Device("cuda:1")) == "encore.Device('cuda:1')"
        assert encore.Device("cuda:1").type == "cuda" and encore.Device("cuda:1").index == 1


class TestAutograd:
    def test_backward_and_grad(self):
        x = encore.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = (x * x).sum()
        y.backward()
        assert x.grad.tolist() == [2, 4, 6]
        assert x.is_leaf and not y.is_leaf
        x.grad = None
        assert x.grad is None
        (x * 3).backward(encore.ones(3))
        assert x.grad.tolist() == [3, 3, 3]
        x.grad = encore.zeros(3)
        assert x.grad.tolist() == [0, 0, 0]
        with pytest.raises(ValueError):
            x.grad = encore.zeros(4)

    def test_requires_grad_and_detach(self):
        x = encore.ones(2)
        assert not x.requires_grad
        x.requires_grad = True
        assert x.requires_grad
        d = (x * 2).detach()
        assert not d.requires_grad and d.is_leaf
        with pytest.raises(TypeError):
            encore.ones(2, dtype=encore.int64).requires_grad = True
        with pytest.raises(ValueError):
            encore.ones(2).sum().backward()

    def test_no_grad_blocks_recording(self):
        x = encore.ones(2, requires_grad=True)
        with encore.no_grad():
            y = x * 2
        assert not y.requires_grad
        assert (x * 2).requires_grad

    def test_gradients_through_indexing(self):
        x = encore.arange(6, dtype=encore.float32).reshape(2, 3)
        x.requires_grad = True
        (x[1, ::2].sum() + x[:, 1].sum() * 2).backward()
        assert x.grad.tolist() == [[0, 2, 0], [1, 2, 1]]
