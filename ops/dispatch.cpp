#include "ops/dispatch.h"

#include <vector>

#include "core/backend.h"
#include "core/ledger.h"
#include "core/modes.h"
#include "core/threads.h"
#include "ops/prepared.h"

namespace encore {

namespace {

// Fills `r` in place: a returned TensorRef copied into the kernel's array would be re-read
// across the halves of its stores (a store-forwarding stall on every input of every op).
void fill_ref(TensorRef& r, const Tensor& t) {
  const TensorImpl* i = t.impl();
  r.data = static_cast<char*>(i->storage->data()) + i->offset * itemsize(i->dtype);
  r.shape = i->shape;
  r.strides = i->strides;
  r.dtype = i->dtype;
  r.device = i->device;
}

}  // namespace

TensorRef ref(const Tensor& t) {
  TensorRef r;
  fill_ref(r, t);
  return r;
}

namespace {

// Whether `a` and `b` may share an element without being the same view: then a kernel that
// writes `a` element by element while reading `b` reads values it has already overwritten
// (m.copy_(m.T)).
bool overlaps_differently(const Tensor& a, const Tensor& b) {
  if (a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return false;
  if (a.offset() == b.offset() && a.shape() == b.shape() && a.strides() == b.strides())
    return false;
  auto span = [](const Tensor& t) {  // the first and last element the view can reach
    int64_t lo = t.offset(), hi = t.offset();
    for (int d = 0; d < t.dim(); ++d)
      (t.strides()[d] < 0 ? lo : hi) += (t.shape()[d] - 1) * t.strides()[d];
    return std::pair{lo, hi};
  };
  const auto [alo, ahi] = span(a);
  const auto [blo, bhi] = span(b);
  return alo <= bhi && blo <= ahi;
}

thread_local Recorder* g_recorder = nullptr;
TapeHook g_tape_hook = nullptr;

void check_inputs(const OpDef& def, std::span<const Tensor> in, const Attrs& attrs, bool tracing) {
  const int n = static_cast<int>(in.size());
  ENCORE_CHECK(n >= def.min_inputs && (def.max_inputs < 0 || n <= def.max_inputs), ValueError, "[",
               def.name, "] expects ",
               def.max_inputs == def.min_inputs ? std::to_string(def.min_inputs)
                                                : "at least " + std::to_string(def.min_inputs),
               " tensor inputs, got ", n);
  for (int i = 0; i < n; ++i) {
    ENCORE_CHECK(in[i].defined(), ValueError, "[", def.name, "] input ", i,
                 " is an undefined tensor");
    if (!tracing) {
      ENCORE_CHECK(!in[i].is_symbolic(), ValueError, "[", def.name, "] input ", i, " ",
                   describe(in[i]),
                   " was created inside a trace and has no data outside it; return it from the "
                   "traced function to get its value");
    }
    if (!def.mixed_devices && i > 0) {
      ENCORE_CHECK(in[i].device() == in[0].device(), DeviceError, "[", def.name,
                   "] inputs are on different devices: ", in[0].device().str(), " and ",
                   in[i].device().str());
    }
    if (def.writes(i, n, attrs) && GradMode::enabled()) {
      ENCORE_CHECK(!in[i].requires_grad(), ValueError, "[", def.name,
                   "] cannot write in place into a tensor that requires grad ", describe(in[i]),
                   "; do it under NoGradGuard");
    }
  }
}

void run_kernel(const OpDef& def, std::span<const Tensor> in, std::span<Tensor> out,
                const Attrs& attrs, Device device) {
  const KernelFn kernel = def.kernels[static_cast<int>(device.type)].run;
  ENCORE_CHECK(kernel, UnsupportedError, "[", def.name, "] has no kernel for ", device.str());
  constexpr int kInline = 8;
  TensorRef in_inline[kInline];
  std::vector<TensorRef> in_heap;
  TensorRef* in_refs = in_inline;
  if (in.size() > kInline) {
    in_heap.resize(in.size());
    in_refs = in_heap.data();
  }
  for (size_t i = 0; i < in.size(); ++i) fill_ref(in_refs[i], in[i]);
  TensorRef out_refs[kMaxOutputs];
  for (size_t i = 0; i < out.size(); ++i) fill_ref(out_refs[i], out[i]);
  KernelCtx ctx{{in_refs, in.size()}, {out_refs, out.size()}, attrs, nullptr, def.name};
  // Per-shape state (a oneDNN primitive, a cuDNN algorithm) from the dispatcher's cache: the
  // kernel runs exactly as it does in a Plan, which holds the same state.
  const std::shared_ptr<void> state = prepared_state(def, device, ctx);
  ctx.state = state.get();
  const DenormalScope denormals;
  sync_threads();
  Ledger& ledger = Ledger::global();
  if (!ledger.profiling()) {
    kernel(ctx);
    return;
  }
  ledger.add(Counter::KernelsTimed, 1);
  if (!device.is_cpu()) {
    require_backend(device, def.name).time_kernel(device.index, def.name, [&] { kernel(ctx); });
    return;
  }
  run_profiled(def, device, kernel, ctx);
}

void append_tensors(std::string& s, const char* key, std::span<const TensorRef> refs,
                    int64_t& bytes) {
  s += ",\"";
  s += key;
  s += "\":[";
  for (size_t i = 0; i < refs.size(); ++i) {
    const TensorRef& r = refs[i];
    s += i ? ",\"" : "\"";
    s += r.shape.str();
    s += ' ';
    s += name(r.dtype);
    s += '"';
    bytes += r.numel() * static_cast<int64_t>(itemsize(r.dtype));
  }
  s += ']';
}

}  // namespace

void run_profiled(const OpDef& def, Device device, KernelFn kernel, const KernelCtx& ctx) {
  const int64_t start = now_ns();
  kernel(ctx);
  const int64_t ns = now_ns() - start;
  Ledger& ledger = Ledger::global();
  ledger.add(Counter::KernelNs, ns);
  // Made after the kernel ran, outside its time.
  std::string args = "\"op\":\"" + json_escape(def.name) + "\",\"device\":\"" + device.str() + "\"";
  int64_t bytes = 0;
  append_tensors(args, "inputs", ctx.in, bytes);
  append_tensors(args, "outputs", ctx.out, bytes);
  args += ",\"bytes\":" + std::to_string(bytes);
  const DescribeFn describe = def.kernels[static_cast<int>(device.type)].describe;
  if (describe && ctx.state)
    if (const std::string impl = describe(ctx.state); !impl.empty())
      args += ",\"implementation\":\"" + json_escape(impl) + "\"";
  ledger.record({def.name, "kernel", start, ns, std::move(args)});
}

Recorder* recorder() { return g_recorder; }
void set_recorder(Recorder* r) { g_recorder = r; }
void set_tape_hook(TapeHook hook) { g_tape_hook = hook; }

OutList dispatch(const OpDef& def, std::span<const Tensor> in, const Attrs& attrs) {
  const int64_t start = now_ns();
  Recorder* const rec = g_recorder;
  ENCORE_CHECK(def.kind != OpKind::Composite && def.infer, UnsupportedError, "[", def.name,
               "] is a composition of other ops and is never dispatched itself");
  check_inputs(def, in, attrs, rec != nullptr);
  if (def.contiguous_inputs) {
    for (const Tensor& t : in) {
      if (t.is_contiguous()) continue;
      // Copies are ordinary (differentiable, traceable) ops; then dispatch again.
      std::vector<Tensor> dense(in.begin(), in.end());
      for (Tensor& d : dense) d = d.contiguous();
      return dispatch(def, dense, attrs);
    }
  }

  // copy_ and add_ read a source the user gives; the optimizer updates' inputs are distinct
  // tensors the optimizer checked. A source overlapping the written tensor is read from a copy.
  if (def.kind == OpKind::InPlace && in.size() == 2 && def.writes(0, 2, attrs) &&
      overlaps_differently(in[0], in[1])) {
    const Tensor copied[] = {in[0], in[1].clone()};
    return dispatch(def, copied, attrs);
  }

  TensorMeta metas[kMaxOutputs];
  OutList out;
  out.n = def.infer(def, in, attrs, metas);
  for (int i = 0; i < out.n; ++i) checked_numel(metas[i].shape, def.name);

  if (def.kind == OpKind::View) {
    const TensorMeta& m = metas[0];
    out[0] = Tensor::make_view(in[0].storage(), m.shape, m.strides, m.offset, m.dtype);
    out[0].impl()->view = true;
    if (rec) rec->on_view(in[0]);
  } else if (rec) {
    for (int i = 0; i < out.n; ++i) out[i] = rec->make_output(metas[i]);
    rec->record(def, attrs, in, {out.t.data(), static_cast<size_t>(out.n)});
  } else {
    for (int i = 0; i < out.n; ++i)
      out[i] = Tensor::empty(metas[i].shape, metas[i].dtype, metas[i].device);
    Device device = out.n ? metas[0].device : in[0].device();
    // A transfer runs on the accelerator side, which can address both memories.
    if (def.mixed_devices && device.is_cpu()) device = in[0].device();
    run_kernel(def, in, {out.t.data(), static_cast<size_t>(out.n)}, attrs, device);
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (def.writes(static_cast<int>(i), static_cast<int>(in.size()), attrs))
      in[i].storage()->bump_version();

  if (def.differentiable() && GradMode::enabled() && g_tape_hook) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (!def.never_differentiated(i) && in[i].requires_grad()) {
        g_tape_hook(def, attrs, in, {out.t.data(), static_cast<size_t>(out.n)});
        break;
      }
    }
  }
  Ledger& ledger = Ledger::global();
  ledger.add(rec ? Counter::OpsTraced : Counter::OpsDispatched, 1);
  if (!rec) ledger.add(Counter::DispatchNs, now_ns() - start);
  return out;
}

}  // namespace encore
