// Creation ops: full and arange take no tensor input; uniform and normal read and advance a
// generator state (their only input), so a traced step draws fresh values on every replay.
#include "ops/defs/common.h"

namespace encore {
namespace {

// The dispatcher checks the shape (negative or too many elements) as for every op output.
template <OpId Op> int infer_full(std::span<const Tensor>, const Attrs& a, TensorMeta* out) {
  const auto& f = std::get<FullAttrs>(a);
  defs::check_scalars(op_name(Op), a, f.dtype);
  out[0] = defs::meta(f.shape, f.dtype, f.device);
  return 1;
}

template <OpId Op> int infer_random(std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const auto& f = std::get<FullAttrs>(a);
  ENCORE_CHECK(is_floating(f.dtype), DTypeError, "[", op_name(Op), "] needs a floating dtype, got ",
               name(f.dtype));
  ENCORE_CHECK(in[0].dtype() == DType::Int64 && in[0].numel() == 2, DTypeError, "[", op_name(Op),
               "] input must be a generator state, got ", describe(in[0]));
  ENCORE_CHECK(in[0].device() == f.device, DeviceError, "[", op_name(Op), "] generator is on ",
               in[0].device().str(), " but the tensor is requested on ", f.device.str());
  return infer_full<Op>(in, a, out);
}

}  // namespace

void define_creation_ops() {
  for (auto [op, infer] : {std::pair<OpId, InferFn>{OpId::full, infer_full<OpId::full>},
                           std::pair<OpId, InferFn>{OpId::arange, infer_full<OpId::arange>}}) {
    OpDef& d = defs::define(op);
    d.min_inputs = d.max_inputs = 0;
    d.infer = infer;
  }
  for (auto [op, infer] : {std::pair<OpId, InferFn>{OpId::uniform, infer_random<OpId::uniform>},
                           std::pair<OpId, InferFn>{OpId::normal, infer_random<OpId::normal>}}) {
    OpDef& d = defs::define(op);
    d.mutates = 1;
    d.infer = infer;
  }
}

}  // namespace encore
