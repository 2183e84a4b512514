#include "graph/tracer.h"

#include <algorithm>
#include <atomic>

#include "core/modes.h"

namespace encore::graph {

namespace {
const TensorExtension<TensorImpl> kTraceGrad("the graph layer's gradient buffers (graph/tracer.h)");
}  // namespace

std::shared_ptr<TensorImpl> trace_grad(const TensorImpl& leaf) { return kTraceGrad.shared(leaf); }
void set_trace_grad(TensorImpl& leaf, std::shared_ptr<TensorImpl> buffer) {
  kTraceGrad.set(leaf, std::move(buffer));
}

namespace {
std::atomic<uint64_t> g_next_trace_id{1};
}

Tracer::Tracer(Graph& graph)
    : graph_(graph),
      id_(g_next_trace_id.fetch_add(1)),
      installed_(true),
      previous_recorder_(recorder()),
      previous_observer_(grad_observer()),
      previous_tracing_(tracing()) {
  set_recorder(this);
  set_grad_observer(this);
  set_tracing(true);
}

Tracer::~Tracer() { uninstall(); }

void Tracer::uninstall() {
  if (!installed_) return;
  installed_ = false;
  set_recorder(previous_recorder_);
  set_grad_observer(previous_observer_);
  set_tracing(previous_tracing_);
}

Tensor Tracer::symbolic(uint32_t buffer, size_t nbytes, const Shape& shape, const Strides& strides,
                        DType dtype, Device device) {
  auto storage = Storage::symbolic(nbytes, device, id_, buffer);
  symbolic_.push_back(storage);
  return Tensor::make_view(std::move(storage), shape, strides, 0, dtype);
}

Tensor Tracer::input(int index, const Tensor& arg, std::string label) {
  // The elements a view reaches: one past its last element's offset (strides are >= 0).
  int64_t extent = arg.numel() > 0 ? 1 : 0;
  for (int d = 0; d < arg.dim() && extent; ++d) extent += (arg.shape()[d] - 1) * arg.strides()[d];
  const auto b = static_cast<uint32_t>(graph_.buffers.size());
  Buffer buf;
  buf.kind = BufferKind::Input;
  buf.nbytes = static_cast<size_t>(extent) * itemsize(arg.dtype());
  buf.device = arg.device();
  buf.input = index;
  buf.label = std::move(label);
  graph_.buffers.push_back(std::move(buf));
  Tensor t =
      symbolic(b, graph_.buffers[b].nbytes, arg.shape(), arg.strides(), arg.dtype(), arg.device());
  t.impl()->requires_grad = arg.requires_grad();
  inputs_.push_back(t.impl());
  graph_.inputs.push_back(value(t, "trace"));
  return t;
}

Tensor Tracer::make_output(const TensorMeta& meta) {
  const auto b = static_cast<uint32_t>(graph_.buffers.size());
  Buffer buf;
  buf.nbytes = meta.shape.numel() * itemsize(meta.dtype);
  buf.device = meta.device;
  buf.label = detail::cat("%", b);
  graph_.buffers.push_back(std::move(buf));
  return symbolic(b, graph_.buffers[b].nbytes, meta.shape, contiguous_strides(meta.shape),
                  meta.dtype, meta.device);
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
      if (!t.name().empty())
        buf.label = t.name();
      else if (auto g = grad_labels_.find(s); g != grad_labels_.end())
        buf.label = g->second;
      else
        buf.label = "captured" + std::to_string(captured_.size() - 1);
      graph_.buffers.push_back(std::move(buf));
    }
    b = it->second;
    Buffer& buf = graph_.buffers[b];
    if (buf.label.rfind("captured", 0) == 0 && !t.name().empty()) buf.label = t.name();
    const bool known = std::any_of(buf.owners.begin(), buf.owners.end(), [&](const Owner& o) {
      return !o.tensor.owner_before(t.impl_ptr()) && !t.impl_ptr().owner_before(o.tensor);
    });
    if (!known) buf.owners.push_back({t.impl_ptr(), t.requires_grad()});
  }
  return {b, t.offset(), t.shape(), t.strides(), t.dtype()};
}

void Tracer::record(const OpDef& def, const Attrs& attrs, std::span<const Tensor> in,
                    std::span<const Tensor> out) {
  Node node{&def, attrs, {}, {}};
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

GradSlot* Tracer::slot(const std::shared_ptr<TensorImpl>& leaf) {
  // Leaves made inside the trace are the graph's own: nobody outside sees their gradients.
  if (leaf->storage && leaf->storage->is_symbolic()) return nullptr;
  // The address keys the slot; the weak pointer tells a reused address from the same leaf.
  auto [it, inserted] = slot_index_.try_emplace(leaf.get(), grad_slots_.size());
  if (!inserted && grad_slots_[it->second].leaf.lock() == leaf) return &grad_slots_[it->second];
  it->second = grad_slots_.size();
  grad_slots_.push_back({leaf, leaf->grad, false, false});
  return &grad_slots_.back();
}

void Tracer::on_view(const Tensor& base) {
  if (!base.storage()->is_symbolic()) value(base, "view");
}

void Tracer::on_grad_read(const std::shared_ptr<TensorImpl>& leaf) {
  GradSlot* s = slot(leaf);
  if (s && !s->written) s->read_first = true;
  // Retrace reasons then name a gradient by its parameter, not as "captured7".
  const TensorImpl* grad = leaf->grad.get();
  if (!grad || !grad->name.empty() || leaf->name.empty() || grad->storage->is_symbolic()) return;
  const Storage* storage = grad->storage.get();
  const std::string label = leaf->name + ".grad";
  grad_labels_.try_emplace(storage, label);
  if (auto it = captured_.find(storage); it != captured_.end()) {
    std::string& buf = graph_.buffers[it->second].label;
    if (buf.rfind("captured", 0) == 0) buf = label;
  }
}

void Tracer::on_grad_write(const std::shared_ptr<TensorImpl>& leaf) {
  // Replays do not write gradients back into the caller's arguments: refuse, never drop them.
  const auto arg = std::find(inputs_.begin(), inputs_.end(), leaf.get());
  ENCORE_CHECK(arg == inputs_.end(), UnsupportedError, "[trace] backward() reaches argument ",
               arg - inputs_.begin(), " '",
               graph_.buffers[graph_.inputs[arg - inputs_.begin()].buffer].label,
               "', which requires grad: a traced function does not write its arguments' .grad. "
               "Make that tensor a "
               "captured one (defined outside the function) or stop it requiring grad");
  if (GradSlot* s = slot(leaf)) s->written = true;
}

void Tracer::restore_grads() const {
  for (const GradSlot& s : grad_slots_)
    if (auto leaf = s.leaf.lock()) leaf->grad = s.before;
}

int64_t Tracer::escaped_buffer() const {
  for (const auto& w : symbolic_)
    if (auto s = w.lock()) return s->buffer();
  return -1;
}

}  // namespace encore::graph
