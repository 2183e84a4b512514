// Creation ops: full and arange take no tensor input; uniform and normal read and advance a
// generator state (their only input), so a traced step draws fresh values on every replay.
// Rows, shape inference, CPU kernels, and the public creation functions.
#include <cmath>
#include <cstring>

#include "ops/creation.h"
#include "ops/defs/common.h"
#include "ops/functors.h"
#include "ops/philox.h"
#include "ops/random.h"

namespace encore {
namespace {

// The dispatcher checks the shape (negative or too many elements) as for every op output.
int infer_full(const OpDef& op, std::span<const Tensor>, const Attrs& a, TensorMeta* out) {
  const auto& f = a.as<FullAttrs>();
  f.value.check(f.dtype, op.name);
  f.step.check(f.dtype, op.name);
  out[0] = defs::meta(f.shape, f.dtype, f.device);
  return 1;
}

int infer_random(const OpDef& op, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const auto& f = a.as<FullAttrs>();
  ENCORE_CHECK(is_floating(f.dtype), DTypeError, "[", op.name, "] needs a floating dtype, got ",
               name(f.dtype));
  ENCORE_CHECK(in[0].dtype() == DType::Int64 && in[0].numel() == 2, DTypeError, "[", op.name,
               "] input must be a generator state, got ", describe(in[0]));
  ENCORE_CHECK(in[0].device() == f.device, DeviceError, "[", op.name, "] generator is on ",
               in[0].device().str(), " but the tensor is requested on ", f.device.str());
  return infer_full(op, in, a, out);
}

void full_kernel(const KernelCtx& c) {
  const Scalar& v = c.attrs.as<FullAttrs>().value;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    const int64_t n = c.out[0].numel();
    const T value = fn::scalar_as<T>(v);
    for (int64_t i = 0; i < n; ++i) out[i] = value;
  });
}

// Integral start and step count exactly in int64 (every value lies between start and stop, so
// the wrapped product is the exact one); others in double.
void arange_kernel(const KernelCtx& c) {
  const auto& a = c.attrs.as<FullAttrs>();
  const bool exact = a.value.integral && a.step.integral;
  visit_dtype(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    const int64_t n = c.out[0].numel();
    for (int64_t i = 0; i < n; ++i)
      out[i] = exact ? static_cast<T>(fn::wrap_add(a.value.i, fn::wrap_mul(a.step.i, i)))
                     : fn::cast_value<T>(a.value.d + a.step.d * static_cast<double>(i));
  });
}

void uniform_kernel(const KernelCtx& c) {
  const auto& a = c.attrs.as<FullAttrs>();
  int64_t* state = c.in[0].ptr<int64_t>();
  const uint64_t seed = state[0], offset = state[1];
  const int64_t n = c.out[0].numel();
  visit_float(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(a.value.d +
                              (a.step.d - a.value.d) * uniform01(philox_value(seed, offset, i)));
  });
  state[1] = static_cast<int64_t>(offset + philox_blocks(n));
}

// Box-Muller on value pairs (2i, 2i + 1) of the stream.
void normal_kernel(const KernelCtx& c) {
  const auto& a = c.attrs.as<FullAttrs>();
  int64_t* state = c.in[0].ptr<int64_t>();
  const uint64_t seed = state[0], offset = state[1];
  const int64_t n = c.out[0].numel();
  visit_float(c.out[0].dtype, [&]<class T>() {
    T* out = c.out[0].ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      const double u1 = (philox_value(seed, offset, 2 * i) + 1.0) / 4294967296.0;
      const double u2 = philox_value(seed, offset, 2 * i + 1) / 4294967296.0;
      out[i] = static_cast<T>(a.value.d + a.step.d * std::sqrt(-2.0 * std::log(u1)) *
                                              std::cos(2.0 * M_PI * u2));
    }
  });
  state[1] = static_cast<int64_t>(offset + philox_blocks(2 * n));
}

Outputs one(Tensor t) { return {std::move(t)}; }

OpDef& full_op = define_op({
    .name = "full",
    .min_inputs = 0,
    .max_inputs = 0,
    .attrs = &attrs_of<FullAttrs>,
    .infer = infer_full,
    .cpu = {full_kernel},
    .signature = "full(shape: tuple[int, ...], fill_value: float, dtype: DType | None = None, "
                 "device: Device | None = None, requires_grad: bool = False) -> Tensor",
    .invoke =
        [](const CallArgs& a) {
          return one(
              full(Shape(a.integers(0)), a.scalar(1), a.dtype(2), a.device(3), a.boolean(4)));
        },
    .examples = {{.args = "shape=(2, 3), fill_value=2.5"}},
});
OpDef& arange_op = define_op({
    .name = "arange",
    .min_inputs = 0,
    .max_inputs = 0,
    .attrs = &attrs_of<FullAttrs>,
    .infer = infer_full,
    .cpu = {arange_kernel},
    .signature = "arange(start: float, stop: float | None = None, step: float = 1, dtype: DType | "
                 "None = None, "
                 "device: Device | None = None, requires_grad: bool = False) -> Tensor",
    .invoke =
        [](const CallArgs& a) {
          const std::optional<Scalar> stop =
              a.is_none(1) ? std::nullopt : std::optional<Scalar>(a.scalar(1));
          return one(arange(a.scalar(0), stop, a.scalar(2), a.dtype(3), a.device(4), a.boolean(5)));
        },
    .doc = "arange(stop) or arange(start, stop, step=1): int64 for integer bounds, else float32",
    .examples = {{.args = "start=1, stop=4.5, step=0.5, dtype='float64'"}},
});
OpDef& uniform_op = define_op({
    .name = "uniform",
    .mutates = 1,
    .attrs = &attrs_of<FullAttrs>,
    .infer = infer_random,
    .cpu = {uniform_kernel},
    .signature = "uniform(shape: tuple[int, ...], low: float = 0.0, high: float = 1.0, *, dtype: "
                 "DType | None = None, "
                 "device: Device | None = None, generator: Generator | None = None, requires_grad: "
                 "bool = False) -> Tensor",
    .invoke =
        [](const CallArgs& a) {
          return one(uniform(Shape(a.integers(0)), a.real(1), a.real(2), a.dtype(3), a.device(4),
                             a.generator(5), a.boolean(6)));
        },
    .examples = {{.args = "shape=(3, 4), low=-2.0, high=3.0"}},
});
OpDef& normal_op = define_op({
    .name = "normal",
    .mutates = 1,
    .attrs = &attrs_of<FullAttrs>,
    .infer = infer_random,
    .cpu = {normal_kernel},
    .signature = "normal(shape: tuple[int, ...], mean: float = 0.0, std: float = 1.0, *, dtype: "
                 "DType | None = None, "
                 "device: Device | None = None, generator: Generator | None = None, requires_grad: "
                 "bool = False) -> Tensor",
    .invoke =
        [](const CallArgs& a) {
          return one(normal(Shape(a.integers(0)), a.real(1), a.real(2), a.dtype(3), a.device(4),
                            a.generator(5), a.boolean(6)));
        },
    .examples = {{.args = "shape=(3, 4), mean=1.0, std=2.0"}},
});

// ---- compositions ----------------------------------------------------------------------
template <Tensor (*F)(const Shape&, std::optional<DType>, std::optional<Device>, bool)>
Outputs filled(const CallArgs& a) {
  return one(F(Shape(a.integers(0)), a.dtype(1), a.device(2), a.boolean(3)));
}
template <Tensor (*F)(const Tensor&, std::optional<DType>, std::optional<Device>)>
Outputs filled_like(const CallArgs& a) {
  return one(F(a.tensor(0), a.dtype(1), a.device(2)));
}
template <Tensor (*F)(const Shape&, std::optional<DType>, std::optional<Device>, Generator*, bool)>
Outputs random(const CallArgs& a) {
  return one(F(Shape(a.integers(0)), a.dtype(1), a.device(2), a.generator(3), a.boolean(4)));
}

OpDef& zeros_op = define_op({
    .name = "zeros",
    .kind = OpKind::Composite,
    .signature = "zeros(*shape: int, dtype: DType | None = None, device: Device | None = None, "
                 "requires_grad: bool = False) -> Tensor",
    .invoke = filled<zeros>,
    .examples = {{.args = "shape=(2, 3)"}},
});
OpDef& ones_op = define_op({
    .name = "ones",
    .kind = OpKind::Composite,
    .signature = "ones(*shape: int, dtype: DType | None = None, device: Device | None = None, "
                 "requires_grad: bool = False) -> Tensor",
    .invoke = filled<ones>,
    .examples = {{.args = "shape=(2, 3), dtype='int32'"}},
});
OpDef& empty_op = define_op({
    .name = "empty",
    .kind = OpKind::Composite,
    .signature =
        "empty(*shape: int, dtype: DType | None = None, device: Device | None = None) -> Tensor",
    .invoke =
        [](const CallArgs& a) { return one(empty(Shape(a.integers(0)), a.dtype(1), a.device(2))); },
    .examples = {{.args = "shape=(0, 3)"}},
});
OpDef& zeros_like_op = define_op({
    .name = "zeros_like",
    .kind = OpKind::Composite,
    .signature =
        "zeros_like(t: Tensor, dtype: DType | None = None, device: Device | None = None) -> Tensor",
    .invoke = filled_like<zeros_like>,
    .examples = {{.inputs = {{{2, 3}}}}},
});
OpDef& ones_like_op = define_op({
    .name = "ones_like",
    .kind = OpKind::Composite,
    .signature =
        "ones_like(t: Tensor, dtype: DType | None = None, device: Device | None = None) -> Tensor",
    .invoke = filled_like<ones_like>,
    .examples = {{.inputs = {{{2, 3}}}}},
});
OpDef& full_like_op = define_op({
    .name = "full_like",
    .kind = OpKind::Composite,
    .signature = "full_like(t: Tensor, fill_value: float, dtype: DType | None = None, device: "
                 "Device | None = None) "
                 "-> Tensor",
    .invoke =
        [](const CallArgs& a) {
          return one(full_like(a.tensor(0), a.scalar(1), a.dtype(2), a.device(3)));
        },
    .examples = {{.inputs = {{{2, 3}}}, .args = "fill_value=-1.5"}},
});
OpDef& rand_op = define_op({
    .name = "rand",
    .kind = OpKind::Composite,
    .signature = "rand(*shape: int, dtype: DType | None = None, device: Device | None = None, "
                 "generator: Generator | None = None, requires_grad: bool = False) -> Tensor",
    .invoke = random<rand>,
    .examples = {{.args = "shape=(3, 4)"}},
});
OpDef& randn_op = define_op({
    .name = "randn",
    .kind = OpKind::Composite,
    .signature = "randn(*shape: int, dtype: DType | None = None, device: Device | None = None, "
                 "generator: Generator | None = None, requires_grad: bool = False) -> Tensor",
    .invoke = random<randn>,
    .examples = {{.args = "shape=(3, 4)"}},
});

}  // namespace

namespace {

// The defaults of every creation function: float32, on the CPU.
DType or_float32(std::optional<DType> dtype) { return dtype.value_or(DType::Float32); }
Device or_cpu(std::optional<Device> device) { return device.value_or(Device::cpu()); }

Tensor leaf(Tensor t, bool requires_grad) {
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

}  // namespace

Tensor full(const Shape& shape, Scalar fill_value, std::optional<DType> dtype,
            std::optional<Device> device, bool requires_grad) {
  const FullAttrs attrs{shape, or_float32(dtype), or_cpu(device), fill_value, 0};
  return leaf(call(full_op, {}, attrs), requires_grad);
}
Tensor zeros(const Shape& shape, std::optional<DType> dtype, std::optional<Device> device,
             bool requires_grad) {
  return full(shape, 0, dtype, device, requires_grad);
}
Tensor ones(const Shape& shape, std::optional<DType> dtype, std::optional<Device> device,
            bool requires_grad) {
  return full(shape, 1, dtype, device, requires_grad);
}
Tensor empty(const Shape& shape, std::optional<DType> dtype, std::optional<Device> device) {
  return Tensor::empty(shape, or_float32(dtype), or_cpu(device));
}
Tensor full_like(const Tensor& t, Scalar fill_value, std::optional<DType> dtype,
                 std::optional<Device> device) {
  return full(t.shape(), fill_value, dtype.value_or(t.dtype()), device.value_or(t.device()));
}
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype, std::optional<Device> device) {
  return full_like(t, 0, dtype, device);
}
Tensor ones_like(const Tensor& t, std::optional<DType> dtype, std::optional<Device> device) {
  return full_like(t, 1, dtype, device);
}

Tensor arange(Scalar start, std::optional<Scalar> stop_or_none, Scalar step,
              std::optional<DType> dtype_or_none, std::optional<Device> device,
              bool requires_grad) {
  // arange(stop): from 0.
  const Scalar stop = stop_or_none.value_or(start);
  if (!stop_or_none) start = Scalar(int64_t{0});
  const DType dtype = dtype_or_none.value_or(
      start.integral && stop.integral && step.integral ? DType::Int64 : DType::Float32);
  ENCORE_CHECK(
      step.d != 0.0 && std::isfinite(start.d) && std::isfinite(stop.d) && std::isfinite(step.d),
      ValueError, "[arange] needs finite bounds and a non-zero step");
  double n;
  if (start.integral && stop.integral && step.integral) {
    // ceil((stop - start) / step), exactly: stop - start may need 65 bits.
    const __int128 span = static_cast<__int128>(stop.i) - start.i;
    const __int128 count = span / step.i + (span % step.i != 0 && (span > 0) == (step.i > 0));
    n = static_cast<double>(std::max<__int128>(count, 0));
  } else {
    n = std::max(0.0, std::ceil((stop.d - start.d) / step.d));
  }
  ENCORE_CHECK(n <= static_cast<double>(kMaxNumel), ShapeError, "[arange] ", n,
               " elements are too many (at most 2^60 - 1)");
  const int64_t count = static_cast<int64_t>(n);
  // The last value must fit the dtype too (the first is checked with the attributes).
  if (count > 0 && !is_floating(dtype)) {
    const Scalar last =
        start.integral && step.integral
            ? Scalar(static_cast<int64_t>(start.i + static_cast<__int128>(step.i) * (count - 1)))
            : Scalar(start.d + step.d * static_cast<double>(count - 1));
    last.check(dtype, "arange");
  }
  return leaf(call(arange_op, {}, FullAttrs{{count}, dtype, or_cpu(device), start, step}),
              requires_grad);
}

template <class T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape, Device device) {
  ENCORE_CHECK(static_cast<int64_t>(data.size()) == checked_numel(shape, "from_vector"), ShapeError,
               "[from_vector] ", data.size(), " values cannot fill shape ", shape.str());
  Tensor t = Tensor::empty(shape, dtype_of<T>::value, Device::cpu());
  if (!data.empty()) std::memcpy(t.data_ptr(), data.data(), data.size() * sizeof(T));
  return t.to(device);
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);

Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dtype,
              Device device) {
  return from_vector(std::vector<double>(values), shape).to(dtype).to(device);
}

Tensor uniform(const Shape& shape, double low, double high, std::optional<DType> dtype,
               std::optional<Device> device, Generator* generator, bool requires_grad) {
  const Device d = or_cpu(device);
  return leaf(call(uniform_op, {generator_for(generator, d, "uniform").state()},
                   FullAttrs{shape, or_float32(dtype), d, low, high}),
              requires_grad);
}

Tensor normal(const Shape& shape, double mean, double std, std::optional<DType> dtype,
              std::optional<Device> device, Generator* generator, bool requires_grad) {
  const Device d = or_cpu(device);
  return leaf(call(normal_op, {generator_for(generator, d, "normal").state()},
                   FullAttrs{shape, or_float32(dtype), d, mean, std}),
              requires_grad);
}

Tensor rand(const Shape& shape, std::optional<DType> dtype, std::optional<Device> device,
            Generator* generator, bool requires_grad) {
  return uniform(shape, 0.0, 1.0, dtype, device, generator, requires_grad);
}
Tensor randn(const Shape& shape, std::optional<DType> dtype, std::optional<Device> device,
             Generator* generator, bool requires_grad) {
  return normal(shape, 0.0, 1.0, dtype, device, generator, requires_grad);
}

}  // namespace encore
