// encore.compare_modes for Python callables: the C++ comparison (train/compare.h) calls back into
// Python (the GIL is held throughout: a comparison is one thread's work). The Pythonic layer
// (bindings/python/encore/compare.py) normalizes batches and results and draws the plot.
#include "train/compare.h"

#include <pybind11/functional.h>

#include "bindings.h"

namespace encore::python {

namespace {

CompareOptions options_from(const py::dict& o) {
  CompareOptions c;
  if (o.contains("modes")) c.modes = o["modes"].cast<std::vector<std::string>>();
  if (o.contains("steps")) c.steps = o["steps"].cast<int>();
  if (o.contains("warmup")) c.warmup = o["warmup"].cast<int>();
  if (o.contains("profile_steps")) c.profile_steps = o["profile_steps"].cast<int>();
  if (o.contains("length") && !o["length"].is_none())
    c.length = o["length"].cast<std::function<int64_t(int64_t)>>();
  if (o.contains("length_axis")) c.length_axis = o["length_axis"].cast<int>();
  if (o.contains("length_args")) c.length_args = o["length_args"].cast<std::vector<int>>();
  if (o.contains("buckets")) c.buckets = o["buckets"].cast<std::vector<int64_t>>();
  if (o.contains("predict") && !o["predict"].is_none()) c.predict = o["predict"].cast<Step>();
  if (o.contains("state")) c.state = o["state"].cast<std::vector<Tensor>>();
  if (o.contains("name")) c.name = o["name"].cast<std::string>();
  if (o.contains("arg_names")) c.arg_names = o["arg_names"].cast<std::vector<std::string>>();
  if (o.contains("on_warning") && !o["on_warning"].is_none())
    c.on_warning = o["on_warning"].cast<std::function<void(const std::string&)>>();
  c.collect_garbage = [] { py::module_::import("gc").attr("collect")(); };
  return c;
}

BatchSource source_from(const std::vector<Batch>& batches, const py::object& make) {
  BatchSource s{batches};
  if (!make.is_none()) s.make = make.cast<std::function<Batch(int64_t)>>();
  return s;
}

}  // namespace

void init_compare(py::module_& m) {
  py::class_<CompareReport>(m, "CompareReport",
                            "What each mode cost (encore.compare_modes wraps it).")
      .def("table", &CompareReport::table)
      .def("json", &CompareReport::json);
  m.def(
      "compare_modes",
      [](const Step& step, const std::vector<Batch>& batches, const py::object& make,
         const py::dict& options) {
        return compare_modes(step, source_from(batches, make), options_from(options));
      },
      py::arg("step"), py::arg("batches"), py::arg("make"), py::arg("options"));
  m.def(
      "compare_modes_model",
      [](nn::Module& model, const LossFn& loss, nn::Optimizer& optimizer,
         const std::vector<Batch>& batches, const py::object& make, const py::dict& options) {
        return compare_modes(model, loss, optimizer, source_from(batches, make),
                             options_from(options));
      },
      py::arg("model"), py::arg("loss"), py::arg("optimizer"), py::arg("batches"), py::arg("make"),
      py::arg("options"));
}

}  // namespace encore::python
