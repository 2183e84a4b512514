// Activation layout conversions: our channels-last (N, L, C) to oneDNN's blocked nCw{b}c, as a
// plain (N, ceil(C/b), L, b) tensor, and back. They are ordinary ops, so a blocked convolution's
// conversions are nodes of the traced graph, timed per node, and a graph pass
// (graph/passes.h) removes a from_blocked -> to_blocked pair between two blocked convolutions.
// Their time is also counted in the ledger (layout_reorders, layout_reorder_ns).
#include "ops/layout.h"
#include "core/ledger.h"
#include "ops/defs/common.h"

namespace encore {
namespace {

const OpDef& to_blocked_op();
const OpDef& from_blocked_op();

void check_block(const char* op, int64_t block) {
  ENCORE_CHECK(block >= 1, ValueError, "[", op, "] block must be >= 1, got ", block);
}

int infer_to_blocked(const OpDef&, std::span<const Tensor> in, const Attrs& attrs,
                     TensorMeta* out) {
  const Tensor& x = in[0];
  const auto& a = attrs.as<BlockAttrs>();
  check_block("to_blocked", a.block);
  ENCORE_CHECK(x.dim() == 3, ShapeError,
               "[to_blocked] input must be (batch, steps, channels), got ", x.shape().str());
  const int64_t blocks = (x.shape()[2] + a.block - 1) / a.block;
  out[0] = defs::meta({x.shape()[0], blocks, x.shape()[1], a.block}, x.dtype(), x.device());
  return 1;
}

int infer_from_blocked(const OpDef&, std::span<const Tensor> in, const Attrs& attrs,
                       TensorMeta* out) {
  const Tensor& xb = in[0];
  const auto& a = attrs.as<BlockAttrs>();
  ENCORE_CHECK(xb.dim() == 4 && a.channels >= 0 && xb.shape()[3] >= 1 &&
                   xb.shape()[1] == (a.channels + xb.shape()[3] - 1) / xb.shape()[3],
               ShapeError,
               "[from_blocked] input must be (batch, ceil(channels / block), steps, block) for ",
               a.channels, " channels, got ", xb.shape().str());
  out[0] = defs::meta({xb.shape()[0], xb.shape()[2], a.channels}, xb.dtype(), xb.device());
  return 1;
}

void bw_to_blocked(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = from_blocked(c.grads[0], c.input_shape(0)[2]);
}
void bw_from_blocked(const BackwardCtx& c, Tensor* g) {
  if (c.need(0)) g[0] = to_blocked(c.grads[0], c.input_shape(0)[3]);
}

BlockedGeometry geometry(const TensorRef& nwc, int64_t block) {
  return {nwc.shape[0],   nwc.shape[1],   nwc.shape[2],  block,
          nwc.strides[0], nwc.strides[1], nwc.strides[2]};
}

// Blocked entry by entry, as nwc_index maps them, without its divisions: `copy(e, i)` for
// entry e and channels-last index i, `zero(e)` for the tail.
template <class Copy, class Zero>
void for_each_entry(const BlockedGeometry& g, Copy copy, Zero zero) {
  int64_t e = 0;
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t cb = 0; cb < g.blocks(); ++cb)
      for (int64_t l = 0; l < g.length; ++l)
        for (int64_t j = 0, c = cb * g.block; j < g.block; ++j, ++c, ++e)
          if (c < g.channels)
            copy(e, b * g.sn + l * g.sl + c * g.sc);
          else
            zero(e);
}

template <class T> void to_blocked_cpu(const BlockedGeometry& g, const T* x, T* xb) {
  for_each_entry(
      g, [&](int64_t e, int64_t i) { xb[e] = x[i]; }, [&](int64_t e) { xb[e] = T(0); });
}

template <class T> void from_blocked_cpu(const BlockedGeometry& g, const T* xb, T* x) {
  for_each_entry(
      g, [&](int64_t e, int64_t i) { x[i] = xb[e]; }, [](int64_t) {});
}

void to_blocked_kernel(const KernelCtx& c) {
  ScopedTimer timer(Counter::LayoutReorderNs, "reorder", "to_blocked");
  Ledger::global().add(Counter::LayoutReorders, 1);
  const BlockedGeometry g = geometry(c.in[0], c.out[0].shape[3]);
  visit_float(c.in[0].dtype,
              [&]<class T>() { to_blocked_cpu(g, c.in[0].ptr<const T>(), c.out[0].ptr<T>()); });
}

void from_blocked_kernel(const KernelCtx& c) {
  ScopedTimer timer(Counter::LayoutReorderNs, "reorder", "from_blocked");
  Ledger::global().add(Counter::LayoutReorders, 1);
  const BlockedGeometry g = geometry(c.out[0], c.in[0].shape[3]);
  visit_float(c.in[0].dtype,
              [&]<class T>() { from_blocked_cpu(g, c.in[0].ptr<const T>(), c.out[0].ptr<T>()); });
}

OpDef& to_blocked_row = define_op({
    .name = "to_blocked",
    .layout = LayoutRole::ToBlocked,
    .attrs = &attrs_of<BlockAttrs>,
    .infer = infer_to_blocked,
    .backward = bw_to_blocked,
    .cpu = {to_blocked_kernel},
    .signature = "to_blocked(x: Tensor, block: int) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs { return {to_blocked(a.tensor(0), a.integer(1))}; },
    .doc = "x (batch, steps, channels) in oneDNN's blocked layout nCw{block}c: (batch, "
           "ceil(channels / block), "
           "steps, block), the last block's missing channels zero",
    .examples = {{.inputs = {{{2, 3, 5}}}, .args = "block=4"}},
});
OpDef& from_blocked_row = define_op({
    .name = "from_blocked",
    .contiguous_inputs = true,
    .layout = LayoutRole::FromBlocked,
    .attrs = &attrs_of<BlockAttrs>,
    .infer = infer_from_blocked,
    .backward = bw_from_blocked,
    .cpu = {from_blocked_kernel},
    .signature = "from_blocked(xb: Tensor, channels: int) -> Tensor",
    .invoke = [](const CallArgs& a) -> Outputs {
      return {from_blocked(a.tensor(0), a.integer(1))};
    },
    .doc =
        "The inverse of to_blocked: xb (batch, blocks, steps, block) -> (batch, steps, channels)",
    .examples = {{.inputs = {{{2, 2, 3, 4}}}, .args = "channels=5"}},
});
const OpDef& to_blocked_op() { return to_blocked_row; }
const OpDef& from_blocked_op() { return from_blocked_row; }

}  // namespace

Tensor to_blocked(const Tensor& x, int64_t block) {
  ENCORE_CHECK(x.defined(), ValueError, "[to_blocked] undefined operand");
  ENCORE_CHECK(x.dim() == 3, ShapeError,
               "[to_blocked] input must be (batch, steps, channels), got ", x.shape().str());
  return call(to_blocked_op(), {x}, BlockAttrs{block, x.shape()[2]});
}

Tensor from_blocked(const Tensor& xb, int64_t channels) {
  ENCORE_CHECK(xb.defined(), ValueError, "[from_blocked] undefined operand");
  ENCORE_CHECK(xb.dim() == 4, ShapeError,
               "[from_blocked] input must be (batch, blocks, steps, block), got ",
               xb.shape().str());
  return call(from_blocked_op(), {xb}, BlockAttrs{xb.shape()[3], channels});
}

}  // namespace encore
