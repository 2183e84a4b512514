// Collectives (ops/collective.h): rows, shape inference, backward formulas, CPU kernels and the
// public functions. The CPU kernels hand the call to the world's engine (core/dist.h: MPI on
// its communication thread); in a group of one they copy. The CUDA kernels, from the same rows,
// are in ops/cuda/collective.cpp.
#include "ops/collective.h"

#include <cstring>

#include "core/ledger.h"
#include "ops/defs/common.h"

namespace encore {
namespace {

using dist::Collective;
using dist::ReduceOp;

int infer_same(const OpDef& op, std::span<const Tensor> in, const Attrs& a, TensorMeta* out) {
  const CollectiveAttrs& c = a.as<CollectiveAttrs>();
  ENCORE_CHECK(!(c.op == ReduceOp::Mean && !is_floating(in[0].dtype())), DTypeError, "[", op.name,
               "] op='mean' needs a floating tensor, got ", describe(in[0]), "; use op='sum'");
  const int size = dist::size();
  ENCORE_CHECK(c.root >= 0 && c.root < size, ValueError, "[", op.name, "] root ", c.root,
               " is not a rank of the world (size ", size, ")");
  out[0] = defs::meta_like(in[0]);
  return 1;
}

int infer_gather(const OpDef&, std::span<const Tensor> in, const Attrs&, TensorMeta* out) {
  Shape s = in[0].dim() == 0 ? Shape{1} : in[0].shape();
  s[0] *= dist::size();
  out[0] = defs::meta(s, in[0].dtype(), in[0].device());
  return 1;
}

// In place: no outputs. Contiguous, since the engine reduces the buffer as one run of elements.
int infer_in_place(const OpDef& op, std::span<const Tensor> in, const Attrs& a, TensorMeta*) {
  ENCORE_CHECK(in[0].is_contiguous(), ValueError, "[", op.name, "] needs a contiguous tensor, got ",
               describe(in[0]));
  if (!a.empty()) {
    TensorMeta unused;
    infer_same(op, in, a, &unused);
  }
  return 0;
}

void bw_all_reduce(const BackwardCtx& c, Tensor* g) {
  const ReduceOp op = c.attrs.as<CollectiveAttrs>().op;
  if (op != ReduceOp::Max) {
    g[0] = dist::all_reduce(c.grads[0], op);
    return;
  }
  // Every rank holding the maximum gets the whole gradient (as max over an axis does on ties).
  g[0] = dist::all_reduce(c.grads[0], ReduceOp::Sum) * eq(c.inputs[0], c.outputs[0]);
}

void bw_all_gather(const BackwardCtx& c, Tensor* g) {
  const Tensor summed = dist::all_reduce(c.grads[0], ReduceOp::Sum);
  const Shape& shape = c.input_shape(0);
  const int64_t rows = shape.size() == 0 ? 1 : shape[0];
  g[0] = summed.slice(0, dist::rank() * rows, (dist::rank() + 1) * rows).reshape(shape);
}

Collective describe_call(Collective::Kind kind, const KernelCtx& k) {
  Collective c;
  c.kind = kind;
  c.in = k.in[0].data;
  c.out = k.out.empty() ? k.in[0].data : k.out[0].data;  // in place without outputs
  c.count = k.in[0].numel();
  c.dtype = k.in[0].dtype;
  c.op = k.attrs.as<CollectiveAttrs>().op;
  c.root = k.attrs.as<CollectiveAttrs>().root;
  c.device = k.in[0].device;
  c.op_name = k.op;
  return c;
}

void count(const Collective& c) {
  Ledger& ledger = Ledger::global();
  ledger.add(Counter::Collectives, 1);
  ledger.add(Counter::CollectiveBytes, c.count * static_cast<int64_t>(itemsize(c.dtype)));
}

// A group of one: every collective is the identity (in place: nothing to do).
void copy_locally(const Collective& c) {
  if (c.out != c.in) std::memcpy(c.out, c.in, c.count * itemsize(c.dtype));
}

template <Collective::Kind Kind> void collective_cpu(const KernelCtx& k) {
  const Collective c = describe_call(Kind, k);
  count(c);
  dist::Engine* e = dist::engine(c.device, k.op);
  if (!e) return copy_locally(c);
  e->run_now(c);
}

void all_reduce_start_cpu(const KernelCtx& k) {
  const Collective c = describe_call(Collective::Kind::AllReduce, k);
  count(c);
  dist::Engine* e = dist::engine(c.device, k.op);
  if (!e) return copy_locally(c);
  e->start(c);
}

void all_reduce_wait_cpu(const KernelCtx& k) {
  if (dist::Engine* e = dist::engine(k.in[0].device, k.op)) e->wait(k.in[0].data);
}

Outputs one(const Tensor& t) { return {t}; }

// Stand-ins (graph/effects.h): what a probe the runtime makes on its own runs in a collective's
// place, local and of the same shapes: a group of one's value (the identity; this rank's rows
// once per rank for all_gather), and nothing for the in-place pair.
void stand_in_cpu(const KernelCtx& k) {
  const size_t bytes = static_cast<size_t>(k.in[0].numel()) * itemsize(k.in[0].dtype);
  const int64_t copies = k.in[0].numel() ? k.out[0].numel() / k.in[0].numel() : 0;
  for (int64_t i = 0; i < copies; ++i)
    std::memcpy(static_cast<char*>(k.out[0].data) + i * bytes, k.in[0].data, bytes);
}
void stand_in_in_place(const KernelCtx&) {}

}  // namespace

OpDef& all_reduce_stand_in_op = define_op({
    .name = "all_reduce_stand_in",
    .attrs = &attrs_of<CollectiveAttrs>,
    .infer = infer_same,
    .cpu = {stand_in_cpu},
    .doc = "What a probe runs in place of all_reduce and broadcast: the identity",
    .examples =
        {{.inputs = {{{3, 4}}},
          .call = [](std::span<const Tensor> x) -> Outputs {
            return {call(all_reduce_stand_in_op, {x[0]}, CollectiveAttrs{ReduceOp::Sum, 0})};
          }}},
});
OpDef& all_gather_stand_in_op = define_op({
    .name = "all_gather_stand_in",
    .attrs = &attrs_of<CollectiveAttrs>,
    .infer = infer_gather,
    .cpu = {stand_in_cpu},
    .doc = "What a probe runs in place of all_gather: this rank's rows once per rank",
    .examples =
        {{.inputs = {{{2, 3}}},
          .call = [](std::span<const Tensor> x) -> Outputs {
            return {call(all_gather_stand_in_op, {x[0]}, CollectiveAttrs{ReduceOp::Sum, 0})};
          }}},
});
OpDef& all_reduce_start_stand_in_op = define_op({
    .name = "all_reduce_start_stand_in_",
    .kind = OpKind::InPlace,
    .mutates = 0b1,
    .attrs = &attrs_of<CollectiveAttrs>,
    .infer = infer_in_place,
    .cpu = {stand_in_in_place},
    .doc = "What a probe runs in place of all_reduce_start_: nothing",
    .examples = {{.inputs = {{{5}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const Tensor y = x[0].detach().clone();  // written in place: no history
                    call(all_reduce_start_stand_in_op, {y}, CollectiveAttrs{ReduceOp::Sum, 0});
                    return {y};
                  }}},
});
OpDef& all_reduce_wait_stand_in_op = define_op({
    .name = "all_reduce_wait_stand_in_",
    .kind = OpKind::InPlace,
    .mutates = 0b1,
    .infer = infer_in_place,
    .cpu = {stand_in_in_place},
    .doc = "What a probe runs in place of all_reduce_wait_: nothing",
    .examples = {{.inputs = {{{5}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const Tensor y = x[0].detach().clone();  // written in place: no history
                    call(all_reduce_wait_stand_in_op, {y});
                    return {y};
                  }}},
});

OpDef& all_reduce_op = define_op({
    .name = "all_reduce",
    .save = Save::Inputs | Save::Outputs,
    .contiguous_inputs = true,
    .external_effect = true,
    .stand_in = []() -> const OpDef& { return all_reduce_stand_in_op; },
    .attrs = &attrs_of<CollectiveAttrs>,
    .infer = infer_same,
    .backward = bw_all_reduce,
    .cpu = {collective_cpu<Collective::Kind::AllReduce>},
    .signature = "all_reduce(x: Tensor, op: str = 'sum') -> Tensor",
    .invoke = [](const CallArgs& a) { return one(dist::all_reduce(a.tensor(0), a.string(1))); },
    .doc = "The elementwise sum, mean or max of x over the ranks of the world, on every rank (the "
           "identity "
           "in a group of one). Its gradient is the all-reduce of the incoming gradient",
    .examples = {{.inputs = {{{3, 4}}}, .args = "op='mean'"}},
});
OpDef& broadcast_op = define_op({
    .name = "broadcast",
    .contiguous_inputs = true,
    .external_effect = true,
    .stand_in = []() -> const OpDef& { return all_reduce_stand_in_op; },
    .attrs = &attrs_of<CollectiveAttrs>,
    .infer = infer_same,
    .cpu = {collective_cpu<Collective::Kind::Broadcast>},
    .signature = "broadcast(x: Tensor, root: int = 0) -> Tensor",
    .invoke =
        [](const CallArgs& a) {
          return one(dist::broadcast(a.tensor(0), static_cast<int>(a.integer(1))));
        },
    .doc =
        "The root rank's x on every rank (same shape and dtype on all ranks). Not differentiable",
    .examples = {{.inputs = {{{2, 3}}}, .args = "root=0"}},
});
OpDef& all_gather_op = define_op({
    .name = "all_gather",
    .contiguous_inputs = true,
    .external_effect = true,
    .stand_in = []() -> const OpDef& { return all_gather_stand_in_op; },
    .attrs = &attrs_of<CollectiveAttrs>,
    .infer = infer_gather,
    .backward = bw_all_gather,
    .cpu = {collective_cpu<Collective::Kind::AllGather>},
    .signature = "all_gather(x: Tensor) -> Tensor",
    .invoke = [](const CallArgs& a) { return one(dist::all_gather(a.tensor(0))); },
    .doc = "The ranks' x concatenated along axis 0 in rank order (a scalar gives one row per rank)",
    .examples = {{.inputs = {{{2, 3}}}}},
});
OpDef& all_reduce_start_op = define_op({
    .name = "all_reduce_start_",
    .kind = OpKind::InPlace,
    .mutates = 0b1,
    .external_effect = true,
    .stand_in = []() -> const OpDef& { return all_reduce_start_stand_in_op; },
    .attrs = &attrs_of<CollectiveAttrs>,
    .infer = infer_in_place,
    .cpu = {all_reduce_start_cpu},
    .examples = {{.inputs = {{{5}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const Tensor y = x[0].detach().clone();  // written in place: no history
                    dist::all_reduce_start_(y, ReduceOp::Mean);
                    dist::all_reduce_wait_(y);
                    return {y};
                  }}},
});
OpDef& all_reduce_wait_op = define_op({
    .name = "all_reduce_wait_",
    .kind = OpKind::InPlace,
    .mutates = 0b1,
    .external_effect = true,
    .stand_in = []() -> const OpDef& { return all_reduce_wait_stand_in_op; },
    .infer = infer_in_place,
    .cpu = {all_reduce_wait_cpu},
    .examples = {{.inputs = {{{5}}},
                  .call = [](std::span<const Tensor> x) -> Outputs {
                    const Tensor y = x[0].detach().clone();  // written in place: no history
                    dist::all_reduce_start_(y, ReduceOp::Sum);
                    dist::all_reduce_wait_(y);
                    return {y};
                  }}},
});

namespace dist {

Tensor all_reduce(const Tensor& x, ReduceOp op) {
  return call(all_reduce_op, {x}, CollectiveAttrs{op, 0});
}
Tensor all_reduce(const Tensor& x, const std::string& op) {
  return all_reduce(x, parse_reduce_op(op, "all_reduce"));
}
Tensor broadcast(const Tensor& x, int root) {
  return call(broadcast_op, {x}, CollectiveAttrs{ReduceOp::Sum, root});
}
Tensor all_gather(const Tensor& x) { return call(all_gather_op, {x}, CollectiveAttrs{}); }
void all_reduce_start_(const Tensor& x, ReduceOp op) {
  dispatch(all_reduce_start_op, {&x, 1}, CollectiveAttrs{op, 0});
}
void all_reduce_wait_(const Tensor& x) { dispatch(all_reduce_wait_op, {&x, 1}); }

}  // namespace dist
}  // namespace encore
