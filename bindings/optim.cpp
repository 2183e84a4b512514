// encore.optim: SGD, Adam, AdamW and RMSprop over a list of parameters. step() is one fused update
// per device. Every optimizer takes Keras' global_clipnorm / clipvalue.
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

// Keras' clipping arguments: None or 0 leave it off.
template <class O>
std::shared_ptr<O> clipped(std::shared_ptr<O> o, py::object global_clipnorm, py::object clipvalue) {
  o->set_clipping({global_clipnorm.is_none() ? 0.0 : global_clipnorm.cast<double>(),
                   clipvalue.is_none() ? 0.0 : clipvalue.cast<double>()});
  return o;
}

}  // namespace

void init_optim(py::module_& m) {
  py::class_<nn::Optimizer, std::shared_ptr<nn::Optimizer>>(m, "Optimizer", "Base of SGD and Adam.")
      .def(
          "step",
          // With the GIL held: parameters, gradients and optimizer state are shared between
          // Python threads, and the eager step is not thread-safe.
          [](nn::Optimizer& o) { o.step(); }, "Updates every parameter that has a gradient.")
      .def("zero_grad", &nn::Optimizer::zero_grad, py::arg("set_to_none") = true,
           "Clears gradients: to None (default) or to zeros in place.")
      .def_property("lr", &nn::Optimizer::lr, &nn::Optimizer::set_lr,
                    "The learning rate; traced steps pick up a new value without retracing.")
      .def_property_readonly("params", &nn::Optimizer::params)
      .def(
          "state", [](const nn::Optimizer& o) { return state_dict(o.state()); },
          "Optimizer state tensors by name ('dense.kernel.m', 'lr', 'step', ...).")
      .def(
          "load_state",
          [](nn::Optimizer& o, py::dict state) {
            nn::NamedTensors s;
            for (auto [k, v] : state) s.emplace_back(k.cast<std::string>(), v.cast<Tensor>());
            o.load_state(s);
          },
          py::arg("state"),
          "Restores a state() of an optimizer of the same kind over the same parameters, all or "
          "nothing (tensors are written in place: traced steps keep replaying).")
      .def("match_param_dtypes", &nn::Optimizer::match_param_dtypes,
           "Converts the state to the parameters' dtypes in place, as the step after "
           "model.to(dtype) needs (fit does it); not inside a traced function.")
      .def_property_readonly("kind", &nn::Optimizer::kind, "'sgd', 'adam', 'adamw' or 'rmsprop'.")
      .def_property_readonly("global_clipnorm",
                             [](const nn::Optimizer& o) {
                               return o.clipping().global_norm ? py::cast(o.clipping().global_norm)
                                                               : py::none();
                             })
      .def_property_readonly("clipvalue", [](const nn::Optimizer& o) {
        return o.clipping().value ? py::cast(o.clipping().value) : py::none();
      });

  py::class_<nn::SGD, nn::Optimizer, std::shared_ptr<nn::SGD>>(
      m, "SGD",
      "SGD with optional (Nesterov) momentum and L2 weight decay (PyTorch's formulation).")
      .def(py::init([](py::object params, double lr, double momentum, bool nesterov,
                       double weight_decay, py::object global_clipnorm, py::object clipvalue) {
             return clipped(
                 std::make_shared<nn::SGD>(to_params(params), lr,
                                           nn::SGDOptions{momentum, nesterov, weight_decay}),
                 global_clipnorm, clipvalue);
           }),
           py::arg("params"), py::arg("lr") = 0.01, py::arg("momentum") = 0.0,
           py::arg("nesterov") = false, py::arg("weight_decay") = 0.0, py::kw_only(),
           py::arg("global_clipnorm") = py::none(), py::arg("clipvalue") = py::none());

  py::class_<nn::Adam, nn::Optimizer, std::shared_ptr<nn::Adam>>(
      m, "Adam",
      "Adam with bias correction: PyTorch's update by default, w -= lr_t m / (sqrt(v_hat) + eps); "
      "epsilon_hat=True places epsilon as Keras does, w -= lr_t m / ((sqrt(v) + eps) / "
      "sqrt(1 - beta2^t)). The two differ for gradients near epsilon (about 3x at 1e-6).")
      .def(py::init([](py::object params, double lr, double beta1, double beta2, double epsilon,
                       double weight_decay, bool epsilon_hat, py::object global_clipnorm,
                       py::object clipvalue) {
             return clipped(std::make_shared<nn::Adam>(
                                to_params(params), lr,
                                nn::AdamOptions{beta1, beta2, epsilon, weight_decay, epsilon_hat}),
                            global_clipnorm, clipvalue);
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("beta1") = 0.9,
           py::arg("beta2") = 0.999, py::arg("epsilon") = 1e-7, py::arg("weight_decay") = 0.0,
           py::kw_only(), py::arg("epsilon_hat") = false, py::arg("global_clipnorm") = py::none(),
           py::arg("clipvalue") = py::none())
      .def_property_readonly("iterations", &nn::Adam::iterations, "Updates done so far.");

  py::class_<nn::AdamW, nn::Adam, std::shared_ptr<nn::AdamW>>(
      m, "AdamW",
      "Adam with decoupled weight decay: w *= 1 - lr * weight_decay before each update.")
      .def(py::init([](py::object params, double lr, double beta1, double beta2, double epsilon,
                       double weight_decay, bool epsilon_hat, py::object global_clipnorm,
                       py::object clipvalue) {
             return clipped(std::make_shared<nn::AdamW>(
                                to_params(params), lr,
                                nn::AdamOptions{beta1, beta2, epsilon, weight_decay, epsilon_hat}),
                            global_clipnorm, clipvalue);
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("beta1") = 0.9,
           py::arg("beta2") = 0.999, py::arg("epsilon") = 1e-7, py::arg("weight_decay") = 0.01,
           py::kw_only(), py::arg("epsilon_hat") = false, py::arg("global_clipnorm") = py::none(),
           py::arg("clipvalue") = py::none());

  py::class_<nn::RMSprop, nn::Optimizer, std::shared_ptr<nn::RMSprop>>(
      m, "RMSprop",
      "RMSprop as Keras computes it: w -= lr g / sqrt(v + eps) with v = rho v + (1 - rho) g^2; "
      "centered divides by the variance estimate; momentum accumulates the increments.")
      .def(py::init([](py::object params, double lr, double rho, double momentum, double epsilon,
                       bool centered, py::object global_clipnorm, py::object clipvalue) {
             return clipped(
                 std::make_shared<nn::RMSprop>(
                     to_params(params), lr, nn::RMSpropOptions{rho, momentum, epsilon, centered}),
                 global_clipnorm, clipvalue);
           }),
           py::arg("params"), py::arg("lr") = 1e-3, py::arg("rho") = 0.9, py::arg("momentum") = 0.0,
           py::arg("epsilon") = 1e-7, py::arg("centered") = false, py::kw_only(),
           py::arg("global_clipnorm") = py::none(), py::arg("clipvalue") = py::none());
}

}  // namespace encore::python
