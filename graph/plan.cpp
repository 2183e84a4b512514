#include "graph/plan.h"

#include "core/ledger.h"
#include "core/modes.h"
#include "graph/cuda_graph.h"

namespace encore::graph {

#if !ENCORE_CUDA
CudaGraph::~CudaGraph() = default;
#endif

namespace {

Device step_device(const Graph& g, const Node& n) {
  const OpDef& def = op_def(n.op);
  Device d = !n.out.empty() ? g.buffers[n.out[0].buffer].device : g.buffers[n.in[0].buffer].device;
  if (def.mixed_devices && d.is_cpu()) d = g.buffers[n.in[0].buffer].device;
  return d;
}

}  // namespace

Plan::Plan(Graph graph) : graph_(std::move(graph)) {
  ScopedTimer timer(Counter::PlanNs, "plan");
  const int64_t start = now_ns();
  // One device runs all steps: a CUDA Graph cannot contain host kernels.
  device_ = Device::cpu();
  bool any_cpu = false;
  for (const Node& n : graph_.nodes) {
    const Device d = step_device(graph_, n);
    if (d.is_cuda()) device_ = d;
    else any_cpu = true;
  }
  ENCORE_CHECK(!(any_cpu && device_.is_cuda()), UnsupportedError,
               "[trace] the traced function runs ops on both the CPU and ", device_.str(),
               "; a CUDA Graph can only replay GPU work. Move the CPU work outside the traced function");
  const bool cuda = device_.is_cuda();
  memory_ = MemoryPlan::build(graph_, cuda);
  for (const auto& [dev, bytes] : memory_.arenas) arenas_.push_back(Storage::allocate(bytes, dev));

  input_sites_.assign(graph_.inputs.size(), {});
  bound_.assign(graph_.inputs.size(), nullptr);
  bound_inputs_.assign(graph_.inputs.size(), Tensor());
  steps_.reserve(graph_.nodes.size());
  for (const Node& n : graph_.nodes) {
    const OpDef& def = op_def(n.op);
    const Device dev = step_device(graph_, n);
    Step s{n.op, def.kernel[static_cast<int>(dev.type)], dev, {}, {}, n.attrs, nullptr};
    ENCORE_CHECK(s.kernel, UnsupportedError, "[trace] ", def.name, " has no kernel for ", dev.str());
    for (const Value& v : n.in) s.in.push_back(resolve(v));
    for (const Value& v : n.out) s.out.push_back(resolve(v));
    if (const PrepareFn prepare = def.prepare[static_cast<int>(dev.type)])
      s.state = prepare(KernelCtx{s.in, s.out, s.attrs, nullptr});
    steps_.push_back(std::move(s));
  }
  // Record where each input's address goes, now that the step vectors are stable.
  if (!cuda) {
    for (Step& s : steps_) {
      for (auto* refs : {&s.in, &s.out})
        for (size_t k = 0; k < refs->size(); ++k) {
          const Node& n = graph_.nodes[&s - steps_.data()];
          const Value& v = refs == &s.in ? n.in[k] : n.out[k];
          const Buffer& b = graph_.buffers[v.buffer];
          if (b.kind == BufferKind::Input)
            input_sites_[b.input].push_back({&(*refs)[k], v.offset * static_cast<int64_t>(itemsize(v.dtype))});
        }
    }
  }
  times_.plan_ns = now_ns() - start;
#if ENCORE_CUDA
  if (cuda) cuda_graph_ = CudaGraph::capture(steps_, device_.index, times_);
#endif
}

Plan::~Plan() = default;

std::shared_ptr<Storage> Plan::storage_of(uint32_t buffer) const {
  const Buffer& b = graph_.buffers[buffer];
  switch (b.kind) {
    case BufferKind::External: return b.storage;
    case BufferKind::Input:
      if (!device_.is_cuda()) return bound_inputs_[b.input].storage();
      [[fallthrough]];
    case BufferKind::Internal:
      for (size_t a = 0; a < memory_.arenas.size(); ++a)
        if (memory_.arenas[a].first == b.device) return arenas_[a];
  }
  return nullptr;
}

TensorRef Plan::resolve(const Value& v) const {
  const Buffer& b = graph_.buffers[v.buffer];
  TensorRef r{nullptr, v.shape, v.strides, v.dtype, b.device};
  const int64_t byte_offset = v.offset * static_cast<int64_t>(itemsize(v.dtype));
  if (b.kind == BufferKind::External) {
    r.data = static_cast<char*>(b.storage->data()) + byte_offset;
  } else if (b.kind == BufferKind::Internal || device_.is_cuda()) {
    r.data = static_cast<char*>(storage_of(v.buffer)->data()) + memory_.offset[v.buffer] + byte_offset;
  }
  return r;  // CPU inputs are patched in at bind time
}

void Plan::bind_inputs(const std::vector<Tensor>& inputs) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& t = inputs[k];
    if (device_.is_cuda()) {
      const Value& v = graph_.inputs[k];
      void* slot = static_cast<char*>(storage_of(v.buffer)->data()) + memory_.offset[v.buffer];
#if ENCORE_CUDA
      CudaGraph::copy_in(slot, t.data_ptr(), t.nbytes(), device_.index);
#else
      (void)slot;
#endif
      continue;
    }
    bound_inputs_[k] = t;
    const void* p = t.data_ptr();
    if (p == bound_[k]) continue;
    bound_[k] = p;
    for (const Site& s : input_sites_[k]) s.ref->data = static_cast<char*>(const_cast<void*>(p)) + s.byte_offset;
  }
}

void Plan::run(const std::vector<Tensor>& inputs) {
  bind_inputs(inputs);
#if ENCORE_CUDA
  if (cuda_graph_) {
    cuda_graph_->launch();
    return;
  }
#endif
  const DenormalScope denormals;
  Ledger& ledger = Ledger::global();
  if (!ledger.profiling()) {
    for (const Step& s : steps_) s.kernel(KernelCtx{s.in, s.out, s.attrs, s.state.get()});
    return;
  }
  for (const Step& s : steps_) {
    ScopedTimer timer(Counter::KernelNs, "kernel", op_name(s.op));
    s.kernel(KernelCtx{s.in, s.out, s.attrs, s.state.get()});
  }
  ledger.add(Counter::KernelsTimed, static_cast<int64_t>(steps_.size()));
}

std::vector<Tensor> Plan::outputs(bool alias) const {
  std::vector<Tensor> out;
  out.reserve(graph_.outputs.size());
  for (const Value& v : graph_.outputs) {
    const Buffer& b = graph_.buffers[v.buffer];
    std::shared_ptr<Storage> storage = storage_of(v.buffer);
    int64_t offset = v.offset;
    if (b.kind == BufferKind::Internal || (b.kind == BufferKind::Input && device_.is_cuda()))
      offset += static_cast<int64_t>(memory_.offset[v.buffer] / itemsize(v.dtype));
    else if (b.kind == BufferKind::Input)
      offset += bound_inputs_[b.input].offset();
    const Tensor view = Tensor::make_view(storage, v.shape, v.strides, offset, v.dtype);
    if (alias) {
      out.push_back(view);
      continue;
    }
    Tensor copy = Tensor::empty(v.shape, v.dtype, b.device);
    const TensorRef src = TensorRef{view.data_ptr(), v.shape, v.strides, v.dtype, b.device};
    const TensorRef dst = TensorRef{copy.data_ptr(), v.shape, copy.strides(), v.dtype, b.device};
    op_def(OpId::copy).kernel[static_cast<int>(b.device.type)](KernelCtx{{&src, 1}, {&dst, 1}, NoAttrs{}, nullptr});
    out.push_back(copy);
  }
  return out;
}

}  // namespace encore::graph
