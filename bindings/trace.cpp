// encore.trace for Python callables: a C++ TracedFunction whose Fn calls back into Python
// (holding the GIL) when it traces. A cache hit never enters Python: the arguments are
// converted, the GIL is released, and the Plan replays.
//
// The Python function may return a Tensor, a tuple/list of Tensors, or None; the C++ side
// sees a vector of tensors. The structure is recorded when a signature traces and kept per
// Plan, so every replay returns what the function returned.
#include "graph/trace.h"

#include <thread>
#include <unordered_map>

#include "bindings.h"
#include "core/modes.h"

namespace encore::python {

namespace {

enum class Returns : uint8_t { None, Single, Tuple, List };

struct Structure {
  Returns kind = Returns::None;
  size_t count = 0;
};

// State shared between the binding object and the Fn that calls back into Python.
struct Callback {
  py::object fn;
  std::string name;
  Structure pending;  // the structure of the latest trace
};

class PyTraced {
 public:
  PyTraced(py::object fn, TraceOptions options, py::object on_warning)
      : callback_(std::make_shared<Callback>()) {
    callback_->fn = std::move(fn);
    callback_->name = options.name;
    if (!on_warning.is_none()) {
      // Retrace warnings go through Python's warnings module (the handler is a Python callable).
      auto handler = std::make_shared<py::object>(std::move(on_warning));
      options.on_warning = [handler](const std::string& message) {
        py::gil_scoped_acquire gil;
        (*handler)(message);
      };
    }
    // A reference cycle in the Python function (a closure referring to itself, say) may hold a
    // tensor made while tracing: collect before the trace reports it as kept alive.
    options.collect_garbage = [] {
      py::gil_scoped_acquire gil;
      py::module_::import("gc").attr("collect")();
    };
    traced_ = std::make_unique<TracedFunction>(make_fn(callback_), std::move(options));
  }

  ~PyTraced() {
    // The Fn holds Python objects: destroy it while the GIL is held (it is: Python frees us).
    traced_.reset();
  }

  py::object call(py::args args, const py::kwargs& kwargs) {
    // Keyword arguments are mapped to positions by the Python layer (inspect.signature).
    if (kwargs.size() > 0) {
      if (binder.is_none())
        throw py::type_error("[trace] '" + name() + "' takes positional arguments only");
      args = binder(*args, **kwargs);
    }
    std::vector<Arg> cargs;
    cargs.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i) cargs.push_back(to_arg(args[i], i));

    // One traced call at a time per process (the C++ lock; the GIL is released first, since a
    // trace calls back into Python). The structure is read under the same lock, before another
    // thread's call can retrace.
    const bool nested = tracing();
    std::vector<Tensor> out;
    Structure s;
    const graph::Plan* plan = nullptr;
    bool traced = false;
    {
      py::gil_scoped_release release;
      const auto lock = TracedFunction::lock_calls();
      const int64_t traces_before = traced_->stats().traces;
      out = (*traced_)(cargs);
      s = callback_->pending;
      plan = traced_->last_plan();
      traced = traced_->stats().traces != traces_before;
    }
    if (!nested) {
      if (traced) {
        structures_[plan] = s;
      } else if (auto it = structures_.find(plan); it != structures_.end()) {
        s = it->second;
      }
    }
    return to_python(out, s);
  }

  /// Runs `f(traced function)` while no traced call runs on another thread (that thread works
  /// without the GIL and may be retracing or evicting).
  template <class F> auto inspect(F&& f) {
    std::unique_lock<std::recursive_mutex> lock;
    {
      py::gil_scoped_release release;
      lock = TracedFunction::lock_calls();
    }
    return f(*traced_);
  }
  py::object binder = py::none();  // (*args, **kwargs) -> args tuple
  const std::string& name() const { return callback_->name; }
  py::object python_function() const { return callback_->fn; }
  void clear() {
    inspect([](TracedFunction& f) { f.clear(); });
    structures_.clear();
  }

 private:
  // "argument 1 'lr'": the position, and the name when the signature gave one.
  std::string arg_label(size_t i) const {
    const auto& names = traced_->options().arg_names;
    return "argument " + std::to_string(i) + (i < names.size() ? " '" + names[i] + "'" : "");
  }

  Arg to_arg(py::handle v, size_t i) const {
    if (py::isinstance<Tensor>(v)) return v.cast<Tensor>();
    if (PyBool_Check(v.ptr())) return v.cast<bool>();
    if (PyLong_Check(v.ptr())) {
      int overflow = 0;
      const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
      if (overflow)
        throw py::type_error("[trace] " + arg_label(i) + " of '" + name() +
                             "' is an int too large for int64");
      return static_cast<int64_t>(x);
    }
    if (PyFloat_Check(v.ptr())) return v.cast<double>();
    if (PyUnicode_Check(v.ptr())) return v.cast<std::string>();
    if (py::isinstance<py::array>(v))
      return from_numpy(py::reinterpret_borrow<py::array>(v), false);
    // Other numbers (NumPy scalars): integers by __index__, the rest by __float__.
    if (PyIndex_Check(v.ptr())) {
      py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
      if (index) return to_arg(index, i);
      PyErr_Clear();
    }
    if (PyNumber_Check(v.ptr()) && !PySequence_Check(v.ptr())) {
      const double d = PyFloat_AsDouble(v.ptr());
      if (!(d == -1.0 && PyErr_Occurred())) return d;
      PyErr_Clear();
    }
    throw py::type_error(
        "[trace] " + arg_label(i) + " of '" + name() + "' has type " +
        std::string(py::str(py::type::handle_of(v).attr("__name__"))) +
        "; traced functions take Tensors (or NumPy arrays), int, float, bool or str");
  }

  static TracedFunction::Fn make_fn(std::shared_ptr<Callback> cb) {
    // The Fn runs only when a signature traces (or when called inside another trace).
    return [cb = std::move(cb)](const std::vector<Arg>& args) -> std::vector<Tensor> {
      py::gil_scoped_acquire gil;
      py::tuple pyargs(args.size());
      for (size_t i = 0; i < args.size(); ++i)
        pyargs[i] = std::visit([](const auto& a) { return py::cast(a); }, args[i]);
      py::object result = cb->fn(*pyargs);
      std::vector<Tensor> out;
      Structure s;
      if (result.is_none()) {
        s.kind = Returns::None;
      } else if (py::isinstance<Tensor>(result)) {
        s.kind = Returns::Single;
        out.push_back(result.cast<Tensor>());
      } else if (py::isinstance<py::tuple>(result) || py::isinstance<py::list>(result)) {
        s.kind = py::isinstance<py::tuple>(result) ? Returns::Tuple : Returns::List;
        for (py::handle item : result) {
          if (!py::isinstance<Tensor>(item))
            throw py::type_error(
                "[trace] '" + cb->name + "' returned a " +
                std::string(py::str(py::type::handle_of(result).attr("__name__"))) + " holding a " +
                std::string(py::str(py::type::handle_of(item).attr("__name__"))) +
                "; a traced function returns a Tensor, a tuple/list of Tensors, or None");
          out.push_back(item.cast<Tensor>());
        }
      } else {
        throw py::type_error(
            "[trace] '" + cb->name + "' returned a " +
            std::string(py::str(py::type::handle_of(result).attr("__name__"))) +
            "; a traced function returns a Tensor, a tuple/list of Tensors, or None");
      }
      s.count = out.size();
      cb->pending = s;
      return out;
    };
  }

  static py::object to_python(const std::vector<Tensor>& out, const Structure& s) {
    switch (s.kind) {
      case Returns::None:
        return py::none();
      case Returns::Single:
        return out.empty() ? py::none() : py::cast(out[0]);
      case Returns::Tuple: {
        py::tuple t(out.size());
        for (size_t i = 0; i < out.size(); ++i) t[i] = py::cast(out[i]);
        return t;
      }
      case Returns::List:
        break;
    }
    return py::cast(out);
  }

  std::shared_ptr<Callback> callback_;
  std::unique_ptr<TracedFunction> traced_;
  std::unordered_map<const graph::Plan*, Structure> structures_;
};

py::dict record_dict(const TraceRecord& r) {
  py::dict d;
  d["call"] = r.call;
  d["reason"] = r.reason;
  d["signature"] = r.signature;
  d["trace_ms"] = r.trace_ns / 1e6;
  d["optimize_ms"] = r.optimize_ns / 1e6;
  d["plan_ms"] = r.plan_ns / 1e6;
  d["capture_ms"] = r.capture_ns / 1e6;
  d["instantiate_ms"] = r.instantiate_ns / 1e6;
  d["autotune_ms"] = r.autotune_ns / 1e6;
  d["total_ms"] = r.total_ns() / 1e6;
  d["nodes"] = r.nodes;
  d["nodes_removed"] = r.nodes_removed;
  d["copies_elided"] = r.copies_elided;
  d["arena_bytes"] = r.arena_bytes;
  d["intermediate_bytes"] = r.intermediate_bytes;
  d["peak_live_bytes"] = r.peak_live_bytes;
  py::list causes;
  for (const RetraceCause& c : r.causes) {
    py::dict cd;
    cd["kind"] = std::string(kind_name(c.kind));
    cd["arg"] = c.arg >= 0 ? py::object(py::int_(c.arg)) : py::object(py::none());
    cd["arg_name"] = c.arg_name;
    cd["axis"] = c.axis >= 0 ? py::object(py::int_(c.axis)) : py::object(py::none());
    cd["old"] = c.old_value;
    cd["new"] = c.new_value;
    cd["text"] = c.str();
    causes.append(cd);
  }
  d["causes"] = causes;
  return d;
}

py::dict stats_dict(const TraceStats& s) {
  py::dict d;
  d["calls"] = s.calls;
  d["hits"] = s.hits;
  d["eager_calls"] = s.eager_calls;
  d["records_dropped"] = s.records_dropped;
  d["traces"] = s.traces;
  d["evictions"] = s.evictions;
  d["replay_ms"] = s.replay_ns / 1e6;
  d["eager_ms"] = s.eager_ns / 1e6;
  d["break_even_replays"] = s.break_even_replays();
  d["real_elements"] = s.real_elements;
  d["padding_elements"] = s.padding_elements;
  d["retraces_saved"] = s.retraces_saved;
  py::list records;
  for (const TraceRecord& r : s.records) records.append(record_dict(r));
  d["records"] = records;
  return d;
}

template <class F> auto with_last_plan(PyTraced& t, F&& f) {
  return t.inspect([&](TracedFunction& fn) {
    const graph::Plan* p = fn.last_plan();
    ENCORE_CHECK(p, encore::ValueError, "[trace] '", t.name(), "' has no graph yet: call it first");
    return f(*p);
  });
}

}  // namespace

void init_trace(py::module_& m) {
  py::class_<ShapePolicy>(m, "ShapePolicy",
                          "How argument shapes map to cached graphs: exact() or bucket(...).")
      .def_property_readonly("kind",
                             [](const ShapePolicy& p) {
                               return p.kind == ShapePolicy::Kind::Exact ? "exact" : "bucket";
                             })
      .def_readonly("axis", &ShapePolicy::axis)
      .def_readonly("sizes", &ShapePolicy::sizes)
      .def_readonly("args", &ShapePolicy::args)
      .def("__repr__", [](const ShapePolicy& p) { return "encore.ShapePolicy(" + p.str() + ")"; })
      .def("__str__", &ShapePolicy::str);
  m.def("exact", &ShapePolicy::exact, "One graph per exact signature (the default).");
  m.def(
      "bucket",
      [](int axis, std::vector<int64_t> sizes, std::vector<int> args) {
        return ShapePolicy::bucket(axis, std::move(sizes), std::move(args));
      },
      py::arg("axis"), py::arg("sizes"), py::arg("args") = std::vector<int>{0},
      "Pads the tensor arguments `args` with zeros along `axis` up to the next size in `sizes`. "
      "Exact or "
      "refused: a bucket's first trace checks that no result depends on the padding (else a "
      "ValueError "
      "names what does), and outputs are trimmed on the axes that derive from the padded one.");

  py::class_<PyTraced>(m, "TracedFunction", py::dynamic_attr(),
                       "A Python function traced into replayable graphs (see encore.trace).")
      .def(py::init([](py::object fn, const std::string& name, const ShapePolicy& shapes,
                       size_t max_cached, size_t max_cached_bytes, int retrace_warning,
                       bool alias_outputs, bool optimize, std::vector<std::string> arg_names,
                       py::object on_warning) {
             if (!PyCallable_Check(fn.ptr())) throw py::type_error("[trace] expected a callable");
             TraceOptions o;
             o.name = name;
             o.shapes = shapes;
             o.max_cached = max_cached;
             o.max_cached_bytes = max_cached_bytes;
             o.retrace_warning = retrace_warning;
             o.alias_outputs = alias_outputs;
             o.optimize = optimize;
             o.arg_names = std::move(arg_names);
             return std::make_unique<PyTraced>(std::move(fn), std::move(o), std::move(on_warning));
           }),
           py::arg("fn"), py::arg("name") = "traced", py::arg("shapes") = ShapePolicy::exact(),
           py::arg("max_cached") = 32, py::arg("max_cached_bytes") = 0,
           py::arg("retrace_warning") = 8, py::arg("alias_outputs") = false,
           py::arg("optimize") = true, py::arg("arg_names") = std::vector<std::string>{},
           py::arg("on_warning") = py::none())
      .def("__call__", &PyTraced::call)
      .def_readwrite("_binder", &PyTraced::binder)
      .def_property_readonly("name", &PyTraced::name)
      .def_property_readonly("python_function", &PyTraced::python_function)
      .def_property_readonly(
          "stats",
          [](PyTraced& t) {
            return t.inspect([](TracedFunction& f) { return stats_dict(f.stats()); });
          },
          "calls, hits, traces, evictions, replay_ms and one record per trace.")
      .def(
          "axis_values",
          [](PyTraced& t) {
            py::list out;
            for (const AxisValues& a :
                 t.inspect([](TracedFunction& f) { return f.axis_values(); })) {
              py::dict d;
              d["arg"] = a.arg;
              d["arg_name"] = a.arg_name;
              d["axis"] = a.axis;
              py::dict counts;
              for (const auto& [v, n] : a.counts) counts[py::int_(v)] = n;
              d["counts"] = counts;
              out.append(d);
            }
            return out;
          },
          "Per tensor argument axis, the sizes seen so far: [{arg, arg_name, axis, counts: {size: "
          "calls}}].")
      .def("stats_table",
           [](PyTraced& t) {
             return t.inspect([&](TracedFunction& f) { return f.stats().table(t.name()); });
           })
      .def(
          "explain",
          [](PyTraced& t) { return t.inspect([](TracedFunction& f) { return f.explain(); }); },
          "Every trace so far with its reason, as text.")
      .def(
          "graph",
          [](PyTraced& t) {
            return with_last_plan(t, [](const graph::Plan& p) { return p.str(); });
          },
          "The graph replayed last, one line per node.")
      .def(
          "graph_dot",
          [](PyTraced& t) {
            return with_last_plan(t, [](const graph::Plan& p) { return p.graph().dot(); });
          },
          "The graph replayed last as Graphviz DOT.")
      .def(
          "op_counts",
          [](PyTraced& t) {
            py::dict d;
            const std::vector<graph::Node> nodes =
                with_last_plan(t, [](const graph::Plan& p) { return p.graph().nodes; });
            for (const graph::Node& n : nodes) {
              py::str key(n.op->name);
              d[key] = (d.contains(key) ? d[key].cast<int>() : 0) + 1;
            }
            return d;
          },
          "How many nodes of each op the graph replayed last contains.")
      .def_property_readonly(
          "cache_size",
          [](PyTraced& t) { return t.inspect([](TracedFunction& f) { return f.cache_size(); }); })
      .def_property_readonly(
          "cached_bytes",
          [](PyTraced& t) { return t.inspect([](TracedFunction& f) { return f.cached_bytes(); }); })
      .def_property_readonly(
          "options",
          [](PyTraced& t) {
            const TraceOptions& o =
                t.inspect([](TracedFunction& f) -> const TraceOptions& { return f.options(); });
            py::dict d;
            d["name"] = o.name;
            d["shapes"] = o.shapes;
            d["max_cached"] = o.max_cached;
            d["max_cached_bytes"] = o.max_cached_bytes;
            d["retrace_warning"] = o.retrace_warning;
            d["alias_outputs"] = o.alias_outputs;
            d["optimize"] = o.optimize;
            d["arg_names"] = o.arg_names;
            return d;
          })
      .def("clear", &PyTraced::clear, "Drops every cached graph (statistics are kept).");
}

}  // namespace encore::python
