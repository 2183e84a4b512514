#include "graph/tracer.h"

#include <algorithm>
#include <atomic>

#include "core/ledger.h"

namespace encore::graph {

thread_local Tracer* Tracer::current_ = nullptr;

namespace {
std::atomic<uint64_t> g_next_trace_id{1};
}

Tracer::Tracer(Graph& graph)
    : graph_(graph), id_(g_next_trace_id.fetch_add(1)), previous_(current_) {
  current_ = this;
}

Tracer::~Tracer() { current_ = previous_; }

Tensor Tracer::input(int index, const Shape& shape, DType dtype, Device device,
                     bool requires_grad, std::string label) {
  const auto b = static_cast<uint32_t>(graph_.buffers.size());
  Buffer buf;
  buf.kind = BufferKind::Input;
  buf.nbytes = shape.numel() * itemsize(dtype);
  buf.device = device;
  buf.input = index;
  buf.label = std::move(label);
  graph_.buffers.push_back(std::move(buf));
  Tensor t = Tensor::make_view(Storage::symbolic(shape.numel() * itemsize(dtype), device, id_, b),
                               shape, contiguous_strides(shape), 0, dtype);
  t.impl()->requires_grad = requires_grad;
  graph_.inputs.push_back(value(t, "trace"));
  return t;
}

Tensor Tracer::make_output(const TensorMeta& meta) {
  const auto b = static_cast<uint32_t>(graph_.buffers.size());
  const size_t nbytes = meta.shape.numel() * itemsize(meta.dtype);
  Buffer buf;
  buf.nbytes = nbytes;
  buf.device = meta.device;
  buf.label = detail::cat("%", b);
  graph_.buffers.push_back(std::move(buf));
  return Tensor::make_view(Storage::symbolic(nbytes, meta.device, id_, b), meta.shape,
                           contiguous_strides(meta.shape), 0, meta.dtype);
}

Value Tracer::value(const Tensor& t, const char* op) {
  const Storage* s = t.storage().get();
  uint32_t b;
  if (s->is_symbolic()) {
    ENCORE_CHECK(s->trace_id() == id_, ValueError, "[", op, "] ", describe(t),
                 " was created by a different trace and has no data here");
    b = s->buffer();
  } else {
    auto [it, inserted] = captured_.try_emplace(s, static_cast<uint32_t>(graph_.buffers.size()));
    if (inserted) {
      Buffer buf;
      buf.kind = BufferKind::External;
      buf.nbytes = s->nbytes();
      buf.device = s->device();
      buf.storage = t.storage();
      buf.label = t.name().empty() ? "captured" + std::to_string(captured_.size() - 1) : t.name();
      graph_.buffers.push_back(std::move(buf));
    }
    b = it->second;
    Buffer& buf = graph_.buffers[b];
    if (buf.label.rfind("captured", 0) == 0 && !t.name().empty()) buf.label = t.name();
    const bool known = std::any_of(buf.owners.begin(), buf.owners.end(), [&](const auto& w) {
      return !w.owner_before(t.impl_ptr()) && !t.impl_ptr().owner_before(w);
    });
    if (!known) buf.owners.push_back(t.impl_ptr());
  }
  return {b, t.offset(), t.shape(), t.strides(), t.dtype()};
}

void Tracer::record(OpId op, const OpDef& def, const Attrs& attrs, std::span<const Tensor> in,
                    std::span<const Tensor> out) {
  Node node{op, attrs, {}, {}};
  node.in.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    node.in.push_back(value(in[i], def.name));
    if (def.writes(static_cast<int>(i), static_cast<int>(in.size()), attrs))
      graph_.buffers[node.in.back().buffer].written = true;
  }
  node.out.reserve(out.size());
  for (const Tensor& t : out) node.out.push_back(value(t, def.name));
  graph_.nodes.push_back(std::move(node));
}

PauseTrace::PauseTrace() : paused_(Tracer::current_) { Tracer::current_ = nullptr; }
PauseTrace::~PauseTrace() { Tracer::current_ = paused_; }

}  // namespace encore::graph
