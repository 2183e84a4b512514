#include "graph/plan.h"

#include <algorithm>

#include "core/backend.h"
#include "core/ledger.h"
#include "core/modes.h"
#include "core/threads.h"
#include "graph/device_graph.h"
#include "ops/dispatch.h"
#include "ops/prepared.h"

namespace encore::graph {

namespace {

CaptureFn g_captures[kNumDeviceTypes] = {};

Device step_device(const Graph& g, const Node& n) {
  const OpDef& def = *n.op;
  Device d = !n.out.empty() ? g.buffers[n.out[0].buffer].device : g.buffers[n.in[0].buffer].device;
  if (def.mixed_devices && d.is_cpu()) d = g.buffers[n.in[0].buffer].device;
  return d;
}

}  // namespace

bool register_graph_capture(DeviceType type, CaptureFn capture) {
  g_captures[static_cast<int>(type)] = capture;
  return true;
}

CaptureFn graph_capture(DeviceType type) {
  (void)backend(type);  // its plugin registers the capture
  const CaptureFn capture = g_captures[static_cast<int>(type)];
  ENCORE_CHECK(capture, UnsupportedError, "[capture] ", Device{type, 0}.str(),
               " has no graph capture: ", backend_status(type));
  return capture;
}

Plan::Plan(Graph graph) : graph_(std::move(graph)) {
  ScopedTimer timer(Counter::PlanNs, "plan");
  const int64_t start = now_ns();
  // One device runs all steps: a CUDA Graph cannot contain host kernels.
  device_ = Device::cpu();
  bool any_cpu = false;
  for (const Node& n : graph_.nodes) {
    const Device d = step_device(graph_, n);
    if (d.is_cuda())
      device_ = d;
    else
      any_cpu = true;
  }
  ENCORE_CHECK(
      !(any_cpu && device_.is_cuda()), UnsupportedError,
      "[trace] the traced function runs ops on both the CPU and ", device_.str(),
      "; a CUDA Graph can only replay GPU work. Move the CPU work outside the traced function");
  const bool cuda = device_.is_cuda();
  memory_ = MemoryPlan::build(graph_, cuda);
  for (const auto& [dev, bytes] : memory_.arenas) arenas_.push_back(Storage::allocate(bytes, dev));

  for (const Buffer& b : graph_.buffers) {
    if (b.kind == BufferKind::Input && b.written) written_inputs_.push_back(b.input);
    if (b.kind != BufferKind::External) continue;
    captured_storages_.push_back(b.storage.get());
    if (b.written) written_captured_storages_.push_back(b.storage.get());
  }
  std::sort(captured_storages_.begin(), captured_storages_.end());
  std::sort(written_captured_storages_.begin(), written_captured_storages_.end());
  input_sites_.assign(graph_.inputs.size(), {});
  bound_.assign(graph_.inputs.size(), nullptr);
  bound_inputs_.assign(graph_.inputs.size(), Tensor());
  steps_.reserve(graph_.nodes.size());
  for (const Node& n : graph_.nodes) {
    const OpDef& def = *n.op;
    const Device dev = step_device(graph_, n);
    Step s{n.op, def.kernels[static_cast<int>(dev.type)].run, dev, {}, {}, n.attrs, nullptr};
    ENCORE_CHECK(s.kernel, UnsupportedError, "[trace] ", def.name, " has no kernel for ",
                 dev.str());
    for (const Value& v : n.in) s.in.push_back(resolve(v));
    for (const Value& v : n.out) s.out.push_back(resolve(v));
    // The per-shape state of this geometry from the dispatcher's cache (on the CPU an eager
    // call's; on CUDA the graphs' own, see StateUser), held by the step: replays and captures
    // never prepare anything.
    s.state = prepared_state(def, dev, KernelCtx{s.in, s.out, s.attrs, nullptr, def.name},
                             cuda ? StateUser::Graph : StateUser::Eager);
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
            input_sites_[b.input].push_back(
                {&(*refs)[k], v.offset * static_cast<int64_t>(itemsize(v.dtype))});
        }
    }
  }
  times_.plan_ns = now_ns() - start;
  if (cuda) device_graph_ = graph_capture(device_.type)(steps_, device_.index, times_);
}

Plan::~Plan() = default;

std::string Plan::str() const {
  return graph_.str([this](size_t i) -> std::string {
    const Step& s = steps_[i];
    const DescribeFn describe = s.op->kernels[static_cast<int>(s.device.type)].describe;
    return describe && s.state ? describe(s.state.get()) : std::string();
  });
}

std::shared_ptr<Storage> Plan::storage_of(uint32_t buffer) const {
  const Buffer& b = graph_.buffers[buffer];
  switch (b.kind) {
    case BufferKind::External:
      return b.storage;
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
    r.data =
        static_cast<char*>(storage_of(v.buffer)->data()) + memory_.offset[v.buffer] + byte_offset;
  }
  return r;  // CPU inputs are patched in at bind time
}

void Plan::check_aliasing(const std::vector<Tensor>& args) const {
  if (written_inputs_.empty() && written_captured_storages_.empty()) return;
  auto label = [&](size_t k) { return graph_.buffers[graph_.inputs[k].buffer].label; };
  auto captured_label = [&](const Storage* s) {
    for (const Buffer& b : graph_.buffers)
      if (b.kind == BufferKind::External && b.storage.get() == s) return b.label;
    return std::string("a captured tensor");
  };
  auto written = [&](size_t k) {
    return std::find(written_inputs_.begin(), written_inputs_.end(), static_cast<int>(k)) !=
           written_inputs_.end();
  };
  for (size_t k = 0; k < args.size(); ++k) {
    const Storage* s = args[k].storage().get();
    const auto& pool = written(k) ? captured_storages_ : written_captured_storages_;
    ENCORE_CHECK(
        !std::binary_search(pool.begin(), pool.end(), s), ValueError, "[trace] argument ", k, " '",
        label(k), "' shares memory with '", captured_label(s), "', and the traced function writes ",
        written(k) ? "the argument" : "that tensor",
        " in place: a replay cannot keep that aliasing exact. Pass a copy (clone()) instead");
    if (!written(k)) continue;
    for (size_t j = 0; j < args.size(); ++j)
      ENCORE_CHECK(
          j == k || args[j].storage().get() != s, ValueError, "[trace] arguments ", k, " '",
          label(k), "' and ", j, " '", label(j),
          "' share memory and the traced function writes argument ", k,
          " in place: a replay cannot keep that aliasing exact. Pass a copy (clone()) instead");
  }
}

void Plan::bind_inputs(const std::vector<Tensor>& args) {
  for (size_t k = 0; k < args.size(); ++k) {
    if (device_.is_cuda()) {
      // The graph reads fixed addresses: copy each argument into its slot, strides and all.
      if (memory_.offset[graph_.inputs[k].buffer] == MemoryPlan::kUnplaced) continue;  // never read
      const TensorRef in[] = {input_ref(k), ref(args[k])};
      copy_inplace_op_def().kernels[static_cast<int>(device_.type)].run(
          KernelCtx{in, {}, {}, nullptr});
      continue;
    }
    // The CPU reads and writes the caller's memory where it is.
    const Tensor& t = bound_inputs_[k] = args[k];
    const void* p = t.data_ptr();
    if (p == bound_[k]) continue;
    bound_[k] = p;
    for (const Site& s : input_sites_[k])
      s.ref->data = static_cast<char*>(const_cast<void*>(p)) + s.byte_offset;
  }
}

TensorRef Plan::input_ref(size_t k) const {
  const Value& v = graph_.inputs[k];
  return TensorRef{static_cast<char*>(storage_of(v.buffer)->data()) + memory_.offset[v.buffer],
                   v.shape, v.strides, v.dtype, device_};
}

void Plan::write_back(const std::vector<Tensor>& args) const {
  if (!device_.is_cuda()) return;  // the CPU wrote into the caller's tensors directly
  for (int k : written_inputs_) {
    const TensorRef in[] = {ref(args[k]), input_ref(k)};
    copy_inplace_op_def().kernels[static_cast<int>(device_.type)].run(
        KernelCtx{in, {}, {}, nullptr});
  }
}

std::optional<std::vector<Tensor>> Plan::copies_of_own_memory(
    const std::vector<Tensor>& args) const {
  std::optional<std::vector<Tensor>> copies;
  for (size_t k = 0; k < args.size(); ++k) {
    const Storage* s = args[k].storage().get();
    if (std::none_of(arenas_.begin(), arenas_.end(), [&](const auto& a) { return a.get() == s; }))
      continue;
    const bool written = std::find(written_inputs_.begin(), written_inputs_.end(),
                                   static_cast<int>(k)) != written_inputs_.end();
    ENCORE_CHECK(
        !written, ValueError, "[trace] argument ", k, " '",
        graph_.buffers[graph_.inputs[k].buffer].label,
        "' is an output of this traced function's previous replay (alias_outputs), which the "
        "function writes "
        "in place: the replay overwrites that memory while it runs. Pass a copy (clone()) instead");
    if (!copies) copies = args;
    (*copies)[k] = copy_with_layout(args[k]);
  }
  return copies;
}

void Plan::run(const std::vector<Tensor>& args) {
  // An aliased output fed back as an argument: the steps would overwrite it while reading it.
  if (std::optional<std::vector<Tensor>> copies = copies_of_own_memory(args)) return run(*copies);
  check_aliasing(args);
  Ledger& ledger = Ledger::global();
  if (!ledger.profiling()) {
    bind_inputs(args);
  } else {
    ScopedTimer timer(Counter::CopyInNs, "copy_in");
    bind_inputs(args);
  }
  if (device_graph_) {
    device_graph_->launch();
    write_back(args);
    return;
  }
  const DenormalScope denormals;
  sync_threads();
  if (!ledger.profiling()) {
    for (const Step& s : steps_)
      s.kernel(KernelCtx{s.in, s.out, s.attrs, s.state.get(), s.op->name});
  } else {
    for (const Step& s : steps_)
      run_profiled(*s.op, s.device, s.kernel,
                   KernelCtx{s.in, s.out, s.attrs, s.state.get(), s.op->name});
    ledger.add(Counter::KernelsTimed, static_cast<int64_t>(steps_.size()));
  }
  write_back(args);
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
    copy_op_def().kernels[static_cast<int>(b.device.type)].run(
        KernelCtx{{&src, 1}, {&dst, 1}, {}, nullptr});
    out.push_back(copy);
  }
  return out;
}

Tensor copy_with_layout(const Tensor& t) {
  int64_t extent = t.numel() > 0 ? 1 : 0;  // the elements the view reaches (strides are >= 0)
  for (int d = 0; d < t.dim() && extent; ++d) extent += (t.shape()[d] - 1) * t.strides()[d];
  const Tensor base = Tensor::empty({extent}, t.dtype(), t.device());
  Tensor copy = Tensor::make_view(base.storage(), t.shape(), t.strides(), 0, t.dtype());
  const NoGradGuard no_grad;
  copy.copy_(t);
  return copy;
}

}  // namespace encore::graph
