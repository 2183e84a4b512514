// Devices, dtypes, global modes, grad mode, the cost ledger, CUDA queries and autotuning.
#include <limits>

#include "bindings.h"

#include "core/allocator.h"
#include "core/backend.h"
#include "core/cpu_info.h"
#include "ops/autotune.h"
#include "ops/conv.h"
#include "ops/prepared.h"

namespace encore::python {

Device to_device(py::handle obj) {
  if (obj.is_none()) return Device::cpu();
  if (py::isinstance<Device>(obj)) return obj.cast<Device>();
  if (py::isinstance<py::str>(obj)) {
    const std::string s = obj.cast<std::string>();
    if (s.rfind("cuda:", 0) == 0) {
      const std::string idx = s.substr(5);
      const bool digits = !idx.empty() && idx.size() <= 3 &&
                          idx.find_first_not_of("0123456789") == std::string::npos;
      ENCORE_CHECK(digits && std::stoi(idx) <= std::numeric_limits<int8_t>::max(), DeviceError,
                   "[device] cannot parse device '", s, "' (expected cpu, cuda or cuda:N)");
    }
    return parse_device(s);
  }
  throw py::type_error("expected a device (encore.Device or a string like 'cpu', 'cuda:0'), got " +
                       std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

DType to_dtype(py::handle obj) {
  if (py::isinstance<DType>(obj)) return obj.cast<DType>();
  // numpy.dtype(None) is float64: None is no dtype here (to_dtype(obj, fallback) defaults it).
  if (obj.is_none())
    throw py::type_error("expected a dtype (encore.float32/float64/int32/int64), got None");
  if (py::isinstance<py::str>(obj)) {
    const std::string s = obj.cast<std::string>();
    for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
      if (s == name(t)) return t;
  }
  // numpy dtypes and scalar types (np.float32, np.dtype('int64'), float, int).
  py::object np_dtype;
  try {
    np_dtype = py::module_::import("numpy").attr("dtype")(obj);
  } catch (py::error_already_set&) {
    throw py::type_error("expected a dtype (encore.float32/float64/int32/int64), got " +
                         std::string(py::repr(obj)));
  }
  return dtype_of_numpy(py::dtype::from_args(np_dtype), "dtype");
}

namespace {

int64_t index_value(py::handle obj, const char* op) {
  if (!PyIndex_Check(obj.ptr()) || PyBool_Check(obj.ptr()))
    throw py::type_error(std::string("[") + op + "] shape entries must be ints, got " +
                         std::string(py::repr(obj)));
  py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  ENCORE_CHECK(!overflow, ShapeError, "[", op, "] dimension ", std::string(py::repr(obj)),
               " is too large");
  return v;
}

}  // namespace

Shape to_shape(py::handle obj, const char* op, bool infer) {
  std::vector<int64_t> dims;
  if (PyIndex_Check(obj.ptr())) {
    dims.push_back(index_value(obj, op));
  } else if (PySequence_Check(obj.ptr()) && !py::isinstance<py::str>(obj)) {
    // A tuple owns its items: iterating a py::sequence yields handles to temporaries, which
    // dangle for sequences that make their items on access (NumPy arrays, tensors).
    const py::tuple items = py::reinterpret_steal<py::tuple>(PySequence_Tuple(obj.ptr()));
    if (!items) throw py::error_already_set();
    for (py::handle d : items) dims.push_back(index_value(d, op));
  } else {
    throw py::type_error(std::string("[") + op +
                         "] a shape must be an int or a sequence of ints, got " +
                         std::string(py::repr(obj)));
  }
  const Shape shape(dims);
  // Checked here too because some callers compute with the shape before any op sees it
  // (Module.build); a -1 to infer counts as 1.
  Shape counted = shape;
  for (int64_t& d : counted)
    if (infer && d == -1) d = 1;
  checked_numel(counted, op);
  return shape;
}

Shape shape_from_args(const py::args& args, const char* op, bool infer) {
  if (args.size() == 1 && !PyIndex_Check(args[0].ptr())) return to_shape(args[0], op, infer);
  return to_shape(args, op, infer);
}

namespace {

py::dict ledger_dict() {
  py::dict d;
  const Ledger& l = Ledger::global();
  for (int i = 0; i < static_cast<int>(Counter::Count); ++i)
    d[py::str(std::string(counter_name(static_cast<Counter>(i))))] = l.get(static_cast<Counter>(i));
  d["cpu_threads"] = num_threads();
  d["host_cached_bytes"] = cpu_cached_bytes();
  for (int i = 0; i < static_cast<int>(Gauge::Count); ++i)
    d[py::str(std::string(gauge_name(static_cast<Gauge>(i))))] = l.get(static_cast<Gauge>(i));
  return d;
}

py::dict autotune_entry(const autotune::Entry& e) {
  py::dict d;
  d["op"] = e.op;
  d["key"] = e.key;
  d["algorithm"] = e.algorithm;
  d["time_ms"] = e.time_ms < 0 ? py::object(py::none()) : py::object(py::float_(e.time_ms));
  d["workspace_bytes"] = e.workspace_bytes;
  d["backend"] = e.backend;
  d["source"] = e.source;
  d["math"] = e.math;
  d["from_file"] = e.from_file;
  py::list timings;
  for (const auto& [impl, ms] : e.timings) timings.append(py::make_tuple(impl, ms));
  d["timings"] = timings;
  return d;
}

}  // namespace

void init_runtime(py::module_& m) {
  py::enum_<DType> dtype(m, "DType", "Element type of a tensor.");
  dtype.value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .value("int32", DType::Int32)
      .value("int64", DType::Int64)
      .def_property_readonly("itemsize", [](DType t) { return itemsize(t); })
      .def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); });
  // Replace (not overload) the enum's own str/repr: encore.float32 prints as such.
  dtype.attr("__str__") =
      py::cpp_function([](DType t) { return std::string(name(t)); }, py::is_method(dtype));
  dtype.attr("__repr__") = py::cpp_function(
      [](DType t) { return "encore." + std::string(name(t)); }, py::is_method(dtype));

  py::class_<Device>(m, "Device", "Where a tensor lives: 'cpu' or 'cuda:N'.")
      .def(py::init([](py::object spec) { return to_device(spec); }), py::arg("device"))
      .def(py::init([](const std::string& type, int index) {
             ENCORE_CHECK(type == "cuda" || (type == "cpu" && index == 0), DeviceError,
                          "[device] no device '", type, ":", index, "'");
             ENCORE_CHECK(index >= 0 && index <= 127, DeviceError, "[device] bad device index ",
                          index);
             return type == "cpu" ? Device::cpu() : Device::cuda(index);
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](Device d) { return d.is_cpu() ? "cpu" : "cuda"; })
      .def_property_readonly("index", [](Device d) { return static_cast<int>(d.index); })
      .def("__str__", &Device::str)
      .def("__repr__", [](Device d) { return "encore.Device('" + d.str() + "')"; })
      .def("__eq__",
           [](Device a, py::object b) {
             if (py::isinstance<Device>(b)) return a == b.cast<Device>();
             if (py::isinstance<py::str>(b)) {
               try {
                 return a == to_device(b);
               } catch (const Error&) {
                 return false;
               }
             }
             return false;
           })
      .def("__hash__", [](Device d) { return static_cast<int>(d.type) * 256 + d.index; })
      .def(py::pickle([](Device d) { return d.str(); },
                      [](const std::string& s) { return parse_device(s); }));
  py::implicitly_convertible<py::str, Device>();

  // ---- global modes ---------------------------------------------------------------------
  m.def("is_grad_enabled", &GradMode::enabled,
        "Whether ops record the autograd tape (thread-local).");
  m.def("_set_grad_enabled", &GradMode::set_enabled, py::arg("enabled"));
  m.def("is_training", &training, "Training mode: dropout is active (thread-local, default on).");
  m.def("set_training", &set_training, py::arg("on"));
  m.def("allow_tf32", &allow_tf32, "Whether TF32 matrix math is allowed on the GPU (default off).");
  m.def("set_allow_tf32", &set_allow_tf32, py::arg("on"));
  m.def("flush_denormal", &flush_denormal,
        "Whether CPU kernels flush subnormal floats to zero (default on).");
  m.def("set_flush_denormal", &set_flush_denormal, py::arg("on"));

  // ---- what this encore is (encore.__version__, encore.show_config()) -------------------
  m.def("version", &encore::version, "encore's version: that of the C++ library.");
  m.def("show_config", &encore::show_config,
        "encore's version and build, its libraries' versions, thread counts and backends.");
  m.def(
      "cpu_info",
      [] {
        const CpuInfo& c = cpu_info();
        py::dict d;
        d["model"] = c.model;
        d["vendor"] = c.vendor;
        d["isa"] = name(c.isa);
        d["ghz"] = cpu_clock_ghz();
        d["nominal_ghz"] = c.nominal_ghz;
        d["measured_ghz"] = measured_cpu_clock_ghz();
        d["flops_per_cycle"] = c.flops_per_cycle;
        d["peak_basis"] = c.peak_basis;
        return d;
      },
      "The CPU as encore reads it (cpuid, /proc/cpuinfo, a timed chain of dependent adds): model, "
      "vendor, vector ISA, clock in GHz (the faster of nominal_ghz, /proc/cpuinfo's, and "
      "measured_ghz, turbo included), float32 FMA flops per cycle and core, and how that was "
      "derived. The theoretical peak of n cores is ghz * flops_per_cycle * n GFLOP/s.");
  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "Threads of the CPU kernels: oneDNN and BLAS share one OpenMP pool of this size.");
  m.def("num_threads", &num_threads,
        "Threads of the CPU kernels (initially ENCORE_NUM_THREADS, else OpenMP's default).");
  m.def("release_cached_memory", &release_cached_memory, py::call_guard<py::gil_scoped_release>(),
        "Hands the memory encore keeps for reuse back to the system: the host allocator's cached "
        "blocks (ledger 'host_cached_bytes'), the per-shape kernel states (ledger "
        "'prepared_bytes') and the unused part of each CUDA device's pool. Tensors and traced "
        "graphs keep theirs; the next steps allocate and prepare afresh.");
  m.def(
      "set_prepared_limit",
      [](int64_t bytes) {
        ENCORE_CHECK(bytes >= 0, ValueError, "[set_prepared_limit] bytes must be >= 0, got ",
                     bytes);
        set_prepared_limit(static_cast<size_t>(bytes));
      },
      py::arg("bytes"),
      "The most bytes the per-shape kernel states (oneDNN primitives, cuDNN algorithms and "
      "workspaces, RNN setups) may hold; least recently used ones are evicted past it "
      "(default 256 MiB; 0 keeps none).");
  m.def("prepared_limit", &prepared_limit,
        "The byte limit of the per-shape kernel states (set_prepared_limit).");

  // ---- CUDA -----------------------------------------------------------------------------
  m.def("cuda_device_count", &cuda_device_count,
        "CUDA devices present (0 without a GPU or CUDA backend).");
  m.def("cuda_is_available", &cuda_available);
  m.def("cuda_is_built", &cuda_built,
        "Whether the CUDA backend is present: built, and its plugin loaded.");
  m.def("cuda_unavailable_reason", &cuda::unavailable_reason,
        "Why CUDA is not available (no plugin, plugin failed to load, no driver, no device).");
  m.def(
      "cuda_stream",
      [](py::object device) {
        const Device d = to_device(device.is_none() ? py::str("cuda") : device);
        ENCORE_CHECK(d.is_cuda(), DeviceError, "[cuda.stream] ", d.str(), " is not a CUDA device");
        return reinterpret_cast<uintptr_t>(require_backend(d, "cuda.stream").stream(d.index));
      },
      py::arg("device") = py::none(),
      "The stream encore queues the calling thread's work for a CUDA device on, as an int (a "
      "cudaStream_t).");
  m.def(
      "synchronize",
      [](py::object device) {
        const Device d = to_device(device.is_none() ? py::str("cuda") : device);
        if (d.is_cuda() && !cuda_available()) return;
        py::gil_scoped_release release;
        synchronize(d);
      },
      py::arg("device") = py::none(),
      "Waits for all queued work on a device (default: cuda:0; a no-op without a GPU).");

  // ---- ledger ---------------------------------------------------------------------------
  m.def("ledger_table", [] { return Ledger::global().table(); });
  m.def("ledger_dict", &ledger_dict);
  m.def("ledger_reset", [] { Ledger::global().reset(); });
  m.def("ledger_profiling", [] { return Ledger::global().profiling(); });
  m.def(
      "ledger_set_profiling", [](bool on) { Ledger::global().set_profiling(on); }, py::arg("on"));
  m.def("ledger_chrome_trace_json", [] { return Ledger::global().chrome_trace_json(); });
  m.def(
      "ledger_write_chrome_trace",
      [](const std::string& path) { Ledger::global().write_chrome_trace(path); }, py::arg("path"));
  m.def("ledger_events", [] {
    py::list out;
    for (const TraceEvent& e : Ledger::global().events())
      out.append(py::make_tuple(e.name, e.category, e.start_ns, e.duration_ns));
    return out;
  });

  // ---- autotuning -----------------------------------------------------------------------
  m.def(
      "autotune_set_policy",
      [](const std::string& p) { autotune::set_policy(autotune::parse_policy(p)); },
      py::arg("policy"));
  m.def("autotune_policy", [] { return std::string(autotune::name(autotune::policy())); });
  m.def("autotune_entries", [] {
    py::list out;
    for (const autotune::Entry& e : autotune::entries()) out.append(autotune_entry(e));
    return out;
  });
  m.def("autotune_save", &autotune::save, py::arg("path"));
  m.def("autotune_load", &autotune::load, py::arg("path"));
  m.def("autotune_clear", &autotune::clear);
  m.def("conv1d_primitives", [] {
    py::list out;
    for (const ConvPrimitiveInfo& p : conv1d_primitives())
      out.append(py::make_tuple(p.key, p.impl));
    return out;
  });
  m.def("clear_conv1d_primitives", &clear_conv1d_primitives);
  m.def(
      "set_conv1d_layout", [](const std::string& l) { set_conv1d_layout(parse_conv1d_layout(l)); },
      py::arg("layout"));
  m.def("conv1d_layout", [] {
    return std::string(conv1d_layout() == Conv1dLayout::Blocked ? "blocked" : "native");
  });
}

}  // namespace encore::python
