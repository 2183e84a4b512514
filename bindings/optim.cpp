// encore.optim: SGD and Adam over a list of parameters. step() is one fused update per device.
#include "bindings.h"

namespace encore::python {

namespace {

std::vector<Tensor> to_params(py::handle params) {
  std::vector<Tensor> out;
  for (py::handle p : params) {
    if (!py::isinstance<Tensor>(p))
      throw py::type_error("optimizer parameters must be Tensors (e.g. model.parameters()), got " +
                           std::string(py::str(py::type::handle_of(p).attr("__name__"))));
    out.push_back(p.cast<Tensor>());
  }
  return out;
}

py::dict state_dict(const nn::NamedTensors& v) {
  py::dict d;
  for (const auto& [name, t] : v) d[py::str(name)] = t;
  return d;
}

}  // namespace

void init_optim(py::module_& m) {
  py::class_<nn::Optimizer, std::shared_ptr<nn::Optimizer>>(m, "Optimizer", "Base of SGD and Adam.")
      .def(
          "step",
          // With the GIL held: parameters, gradients and optimizer state are shared between
          // Python threads, and the eager step is not thread-safe.
          [](nn::Optimizer& o) { o.step(); },
          "Updates every parameter that has a gradient.")
      .def("zero_grad", &nn::Optimizer::zero_grad, py::arg("set_to_none") = true,
           "Clears gradients: to None (default) or to zeros in place.")
      .def_property("lr", &nn::Optimizer::lr, &nn::Optimizer::set_lr,
                    "The learning rate; traced steps pick up a new value without retracing.")
      .def_property_readonly("params", &nn::Optimizer::params)
      .def(
          "state", [](const nn::Optimizer& o) { return state_dict(o.state()); },
          "Optimizer state tensors by name ('dense.kernel.m', 'step', ...).");

  py::class_<nn::SGD, nn::Optimizer, std::shared_ptr<nn::SGD>>(
      m, "SGD",
      "SGD with optional (Nesterov) momentum and L2 weight decay (PyTorch's formulation).")
      .def(py::init([](py::object params, double lr, double momentum, bool nesterov,
                       double weight_decay) {
             return std::make_shared<nn::SGD>(to_params(params), lr,
                                              nn::SGDOptions{momentum, nesterov, weight_decay});
           }),
           py::arg("params"), py::arg("lr") = 0.01, py::arg("momentum") = 0.0,
           py::arg("nesterov") = false, py::arg("weight_decay") = 0.0);

  py::class_<nn::Adam, nn::Optimizer, std::shared_ptr<nn::Adam>>(
      m, "Adam", "Adam with bias correction (PyTorch's update).")
      .def(py::init([](py::object params, double lr, double beta1, double beta2, double epsilon,
                       double weight_decay) {
             return std::make_shared<nn::Adam>(
                 to_params(params), lr, nn::AdamOptions{beta1, beta2, epsilon, weight_decay});
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("beta1") = 0.9,
           py::arg("beta2") = 0.999, py::arg("epsilon") = 1e-7, py::arg("weight_decay") = 0.0)
      .def_property_readonly("iterations", &nn::Adam::iterations, "Updates done so far.");
}

}  // namespace encore::python
