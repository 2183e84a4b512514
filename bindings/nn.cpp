// encore.nn: Keras-style layers, Sequential, Python subclasses of Module, checkpoint save/load and
// the losses.
//
// Modules are held by pybind11's smart_holder, so a layer can live in Python and in a Sequential
// (or a Model) at once. A Python subclass of Module is a real C++ Module through the trampoline
// PyModule: its forward (and an optional build hook) run in Sequential, under encore.trace and
// in Model::fit. The trampoline inherits trampoline_self_life_support: a shared_ptr that C++
// holds to a Python subclass keeps the Python object alive, so its forward never disappears
// while C++ can still call it.
#include <pybind11/trampoline_self_life_support.h>

#include "bindings.h"
#include "nn/init.h"

namespace encore::python {

namespace {

using ModulePtr = std::shared_ptr<nn::Module>;

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (int i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

class PyModule : public nn::Module, public py::trampoline_self_life_support {
 public:
  std::string type_name() const override {
    if (type_name_.empty()) {
      py::gil_scoped_acquire gil;
      const py::handle self = py::detail::get_object_handle(
          static_cast<const nn::Module*>(this), py::detail::get_type_info(typeid(nn::Module)));
      type_name_ =
          self ? nn::snake_case(std::string(py::str(py::type::handle_of(self).attr("__name__"))))
               : "module";
    }
    return type_name_;
  }

  // A build hook (the subclass' `build(self, input_shape)`, kept as `_build_hook`) creates
  // weights; the output shape is what it returns, or else that of one forward on zeros without
  // autograd in inference mode (which also builds children made in __init__).
  Shape build_impl(const Shape& input_shape) override {
    py::gil_scoped_acquire gil;
    if (py::function hook = py::get_override(static_cast<const nn::Module*>(this), "_build_hook")) {
      struct Building {
        bool& on;
        ~Building() { on = false; }
      } scope{building = true};
      const py::object shape = hook(shape_tuple(input_shape));
      if (!shape.is_none()) return to_shape(shape, "build");
    }
    NoGradGuard no_grad;
    TrainingGuard inference(false);
    return forward_impl(zeros(input_shape)).shape();
  }

  Tensor forward_impl(const Tensor& x) override {
    py::gil_scoped_acquire gil;
    const py::function forward = py::get_override(static_cast<const nn::Module*>(this), "forward");
    if (!forward)
      // pybind11 also finds no override while the Python forward runs for this module: a
      // forward that calls self(x) lands here instead of recursing.
      throw encore::UnsupportedError(
          "[" + label() +
          "] defines no forward(self, x), or its forward calls the module "
          "itself (self(x) inside forward): a subclass of nn.Module needs a forward that "
          "calls its layers");
    const py::object out = forward(x);
    if (!py::isinstance<Tensor>(out))
      throw py::type_error("[" + label() + "] forward returned a " +
                           std::string(py::str(py::type::handle_of(out).attr("__name__"))) +
                           ", not a Tensor");
    return out.cast<Tensor>();
  }

  using nn::Module::add_child;
  using nn::Module::add_parameter;
  using nn::Module::remove;

  bool building =
      false;  // inside the build hook: super().build(...) is Keras' "mark built", a no-op

 private:
  mutable std::string type_name_;
};

PyModule& custom(nn::Module& m, const char* what) {
  auto* p = dynamic_cast<PyModule*>(&m);
  ENCORE_CHECK(p, encore::ValueError, "[", m.label(), "] ", what,
               " is for subclasses of nn.Module, not for built-in layers");
  return *p;
}

// Keras' fan-in and fan-out of a weight shape (receptive field times channels for kernels).
std::pair<int64_t, int64_t> fans(const Shape& s) {
  if (s.size() == 0) return {1, 1};
  if (s.size() == 1) return {s[0], s[0]};
  int64_t receptive = 1;
  for (int i = 0; i + 2 < s.size(); ++i) receptive *= s[i];
  return {s[s.size() - 2] * receptive, s[s.size() - 1] * receptive};
}

Tensor initial_weight(const Shape& shape, py::handle initializer, DType dtype) {
  if (py::isinstance<py::str>(initializer)) {
    const std::string name = initializer.cast<std::string>();
    if (name == "zeros") return zeros(shape, dtype);
    if (name == "ones") return ones(shape, dtype);
    if (name == "glorot_uniform") {
      const auto [in, out] = fans(shape);
      return nn::init::glorot_uniform(shape, in, out).to(dtype);
    }
    throw encore::ValueError("[add_weight] unknown initializer '" + name +
                             "': use glorot_uniform, zeros, ones, or initial values");
  }
  Tensor t = tensor_from_data(initializer, py::cast(dtype), py::none(), false, false);
  ENCORE_CHECK(t.shape() == shape, ShapeError, "[add_weight] initial values ", describe(t),
               " do not have the shape ", shape.str());
  return t;
}

py::list named(const nn::NamedTensors& v) {
  py::list out;
  for (const auto& [name, t] : v) out.append(py::make_tuple(name, t));
  return out;
}

// The docstring of a layer class: its full signature, what it does, and each option.
std::string layer_doc(const nn::LayerDef& def) {
  std::string doc = nn::layer_signature(def).str() + "\n\n" + def.doc;
  const std::span<const nn::OptionField> options = nn::layer_options(def);
  if (!options.empty()) doc += "\n\nOptions:";
  for (const nn::OptionField& f : options) doc += "\n    " + f.param.name + ": " + f.doc;
  return doc;
}

// A built-in layer's class, its __init__ bound from the layer's row (nn/layer.h): the arguments
// are converted by the row's signature, with the defaults of its options list, so the Python
// class cannot drift from the C++ one.
template <class L, class Base = nn::Module>
py::class_<L, Base, py::smart_holder> layer_class(py::module_& m, const char* name) {
  const nn::LayerDef& def = nn::layer_def(name);
  const std::string doc = layer_doc(def);
  py::class_<L, Base, py::smart_holder> cls(m, name, py::dynamic_attr(), doc.c_str());
  cls.def(py::init([&def](const py::args& args, const py::kwargs& kwargs) {
            std::shared_ptr<L> layer = std::dynamic_pointer_cast<L>(
                def.make(bind_call(nn::layer_signature(def), py::handle(), args, kwargs)));
            ENCORE_CHECK(layer, encore::Error, "[", def.name,
                         "] its row made another layer (an internal error)");
            return layer;
          }),
          doc.c_str());
  return cls;
}

// Module.to(device), .to(dtype), .to("cuda"), .to("float64"): in place, returns the module.
void module_to(nn::Module& module, py::handle target) {
  if (py::isinstance<DType>(target)) {
    module.to(target.cast<DType>());
    return;
  }
  if (py::isinstance<py::str>(target)) {
    const std::string s = target.cast<std::string>();
    if (s != "cpu" && s.rfind("cuda", 0) != 0) {
      module.to(to_dtype(target));
      return;
    }
  }
  if (py::isinstance<Device>(target) || py::isinstance<py::str>(target)) {
    module.to(to_device(target));
    return;
  }
  module.to(to_dtype(target));
}

// A module's input: a Tensor, a NumPy array (shared where it can be), or another library's
// tensor through DLPack (torch, CuPy, JAX: zero-copy, on its device).
Tensor module_input(const nn::Module& module, py::handle x) {
  if (py::isinstance<Tensor>(x)) return x.cast<Tensor>();
  if (py::isinstance<py::array>(x) || is_dlpack_producer(x))
    return tensor_from_data(x, py::none(), py::none(), false, /*share=*/true);
  throw py::type_error("[" + module.label() +
                       "] expected a Tensor, a NumPy array or a DLPack tensor (torch, CuPy, "
                       "JAX), got " +
                       std::string(py::str(py::type::handle_of(x).attr("__name__"))));
}

// Whether `root` is `target` or holds it.
bool contains(const nn::Module& root, const nn::Module* target) {
  if (&root == target) return true;
  for (const auto& [name, child] : root.children())
    if (contains(*child, target)) return true;
  return false;
}

// Module.__setattr__ (nn.py) registers modules and tensors that require grad under the
// attribute's name; the module's parameters are renamed to their full names at once.
// The module of `self`, once Module.__init__ has made it (attributes assigned before
// super().__init__() would reach a module that does not exist yet).
nn::Module& initialized(py::handle self) {
  if (!py::detail::is_holder_constructed(self.ptr()))
    throw py::type_error(std::string(py::str(py::type::handle_of(self).attr("__name__"))) +
                         ": call super().__init__() before assigning attributes");
  return self.cast<nn::Module&>();
}

void register_attribute(py::handle self, const std::string& name, py::handle value) {
  nn::Module& module = initialized(self);
  PyModule& m = custom(module, "assigning layers and parameters as attributes");
  if (py::isinstance<nn::Module>(value)) {
    ModulePtr child = value.cast<ModulePtr>();
    ENCORE_CHECK(!contains(*child, &module), encore::ValueError, "[", module.label(),
                 "] cannot hold '", name, "': it is the module itself or holds it");
    m.add_child(name, std::move(child));
  } else {
    const Tensor t = value.cast<Tensor>();
    ENCORE_CHECK(t.is_leaf(), encore::ValueError, "[", module.label(), "] attribute '", name, "' ",
                 describe(t),
                 " is computed from other tensors: a parameter is a leaf tensor (add_weight, or "
                 ".detach().requires_grad_())");
    m.add_parameter(name, t);
  }
  module.set_name(module.name());
}

}  // namespace

void init_nn(py::module_& m) {
  // Built-in layers take attributes (compile stores the training state on the module); Module
  // itself does not: Python subclasses have their own __dict__, and one declared here too would
  // be visited twice by the garbage collector (CPython 3.11), which then never frees a cycle.
  py::class_<nn::Module, PyModule, py::smart_holder>(
      m, "Module",
      "A layer with parameters, built from the first input shape (Keras-style). Subclass it with "
      "a forward(self, x) (see encore.nn).")
      .def(py::init<>())
      .def(
          "__call__",
          // With the GIL held: a module builds itself on first use and its autograd records
          // are shared state, so two Python threads must not run it at once.
          [](nn::Module& module, py::handle x) { return module(module_input(module, x)); },
          py::arg("x"))
      .def(
          "forward",
          [](nn::Module& module, py::handle x) {
            const Tensor t = module_input(module, x);
            py::gil_scoped_release release;
            return module.forward(t);
          },
          py::arg("x"))
      .def(
          "build",
          [](nn::Module& module, py::object shape) -> py::object {
            // super().build(input_shape) at the end of a build hook, as Keras layers write it.
            if (auto* p = dynamic_cast<PyModule*>(&module); p && p->building) return py::none();
            return shape_tuple(module.build(to_shape(shape, "build")));
          },
          py::arg("input_shape"),
          "Creates the parameters for inputs of `input_shape` (batch first); returns the output "
          "shape.")
      .def(
          "train",
          [](ModulePtr module, bool mode) {
            module->train(mode);
            return module;
          },
          py::arg("mode") = true,
          "Training mode (dropout active) for this module and every module in it; returns self. "
          "Modules start in training mode.")
      .def(
          "eval",
          [](ModulePtr module) {
            module->eval();
            return module;
          },
          "Inference mode for this module and every module in it; returns self.")
      .def_property_readonly(
          "training", &nn::Module::is_training,
          "Whether the module computes in training mode: its own mode (train()/eval()) and the "
          "global one (encore.training(False) turns every module's off). Read inside a traced "
          "function it is part of the graph's key.")
      .def_property_readonly("_building",
                             [](nn::Module& module) {
                               auto* p = dynamic_cast<PyModule*>(&module);
                               return p && p->building;
                             })
      .def(
          "children",
          [](const nn::Module& module) {
            py::list out;
            for (const auto& [name, child] : module.children())
              out.append(py::make_tuple(name, child));
            return out;
          },
          "The direct sub-modules as (name, module) pairs.")
      .def(
          "add_weight",
          [](nn::Module& module, py::object shape, py::object initializer, py::object dtype,
             py::object name) {
            PyModule& m = custom(module, "add_weight");
            const Shape s = to_shape(shape, "add_weight");
            std::string key;
            if (name.is_none()) {
              const nn::NamedTensors taken = module.named_parameters();
              auto free = [&](const std::string& n) {
                return std::none_of(taken.begin(), taken.end(),
                                    [&](const auto& p) { return p.first == n; });
              };
              key = "weight";
              for (int i = 1; !free(key); ++i) key = "weight_" + std::to_string(i);
            } else {
              key = name.cast<std::string>();
            }
            Tensor w = m.add_parameter(
                key, initial_weight(s, initializer, to_dtype(dtype, DType::Float32)));
            module.set_name(module.name());
            return w;
          },
          py::arg("shape"), py::arg("initializer") = "glorot_uniform",
          py::arg("dtype") = py::none(), py::arg("name") = py::none(),
          "Creates and registers a parameter of a custom layer: initializer 'glorot_uniform' "
          "(default), 'zeros', 'ones' or initial values. Assigned to an attribute, it takes the "
          "attribute's name.")
      .def("_register", &register_attribute, py::arg("name"), py::arg("value"))
      .def("_unregister",
           [](py::handle self, const std::string& name) {
             if (auto* p = dynamic_cast<PyModule*>(&initialized(self))) p->remove(name);
           })
      .def_property_readonly("built", &nn::Module::built)
      .def_property_readonly("output_shape",
                             [](const nn::Module& module) {
                               return module.built()
                                          ? py::object(shape_tuple(module.output_shape()))
                                          : py::object(py::none());
                             })
      .def_property_readonly("type_name", &nn::Module::type_name)
      .def_property_readonly("name", &nn::Module::name)
      .def("set_name", &nn::Module::set_name, py::arg("prefix"))
      .def("parameters", &nn::Module::parameters)
      .def(
          "named_parameters",
          [](const nn::Module& module) { return named(module.named_parameters()); },
          "A list of (name, Tensor) pairs.")
      .def("num_parameters", &nn::Module::num_parameters)
      .def(
          "named_buffers", [](const nn::Module& module) { return named(module.named_buffers()); },
          "Non-trainable state (BatchNormalization's moving statistics) as (name, Tensor) pairs.")
      .def(
          "named_weights", [](const nn::Module& module) { return named(module.named_weights()); },
          "Parameters, then buffers, as (name, Tensor) pairs: what save() writes.")
      // The conventions of Keras and PyTorch; encore/nn.py wraps them (NumPy arrays, mappings).
      .def("_summary", &nn::Module::summary)
      .def("_state_dict", [](const nn::Module& module) { return named(module.state_dict()); })
      .def("_load_state_dict", &nn::Module::load_state_dict, py::arg("state"), py::arg("strict"))
      .def("_get_weights", &nn::Module::get_weights)
      .def("_set_weights", &nn::Module::set_weights, py::arg("values"))
      .def("zero_grad", &nn::Module::zero_grad, py::arg("set_to_none") = true,
           "PyTorch's zero_grad: every parameter's gradient set to None (default), or to zeros in "
           "place.")
      .def(
          "to",
          [](ModulePtr module, py::object target) {
            module_to(*module, target);
            return module;
          },
          py::arg("device_or_dtype"),
          "Moves/converts every parameter in place (same tensors, new storage); returns self.")
      .def("__repr__", [](const nn::Module& module) {
        std::string s = "<encore.nn." + module.type_name();
        if (!module.name().empty()) s += " '" + module.name() + "'";
        if (module.built()) s += " output " + module.output_shape().str();
        return s + ">";
      });

  // The built-in layers: each __init__ from its row (layer_class), plus what a layer adds.
  layer_class<nn::Dense>(m, "Dense");
  layer_class<nn::Conv1D>(m, "Conv1D");
  py::class_<nn::Recurrent, nn::Module, py::smart_holder>(
      m, "Recurrent", py::dynamic_attr(),
      "A recurrent layer (LSTM, GRU): what Bidirectional wraps.");
  layer_class<nn::LSTM, nn::Recurrent>(m, "LSTM")
      .def_property_readonly("units", &nn::LSTM::units)
      .def("uses_cudnn", &nn::LSTM::uses_cudnn, py::arg("x"),
           "Whether a forward on `x` takes the cuDNN path.")
      .def("uses_onednn", &nn::LSTM::uses_onednn, py::arg("x"),
           "Whether a forward on `x` takes oneDNN's LSTM (the CPU's fused path).");
  layer_class<nn::GRU, nn::Recurrent>(m, "GRU")
      .def(
          "__call__",
          [](nn::GRU& layer, const Tensor& x) -> py::object {
            if (!layer.options().return_state) return py::cast(layer(x));
            auto [y, h] = layer.call_with_state(x);
            return py::make_tuple(y, h);
          },
          py::arg("x"), "The output; with return_state, (output, last state).")
      .def_property_readonly("units", &nn::GRU::units)
      .def("uses_cudnn", &nn::GRU::uses_cudnn, py::arg("x"),
           "Whether a forward on `x` takes the cuDNN path.")
      .def("uses_onednn", &nn::GRU::uses_onednn, py::arg("x"),
           "Whether a forward on `x` takes oneDNN's GRU (the CPU's fused path).");
  layer_class<nn::Bidirectional>(m, "Bidirectional");
  layer_class<nn::Dropout>(m, "Dropout");
  layer_class<nn::GlobalAveragePooling1D>(m, "GlobalAveragePooling1D");
  layer_class<nn::GlobalMaxPooling1D>(m, "GlobalMaxPooling1D");
  layer_class<nn::MaxPooling1D>(m, "MaxPooling1D");
  layer_class<nn::AveragePooling1D>(m, "AveragePooling1D");
  layer_class<nn::BatchNormalization>(m, "BatchNormalization")
      .def_property_readonly("moving_mean", &nn::BatchNormalization::moving_mean)
      .def_property_readonly("moving_variance", &nn::BatchNormalization::moving_variance);
  layer_class<nn::LayerNormalization>(m, "LayerNormalization");
  layer_class<nn::Embedding>(m, "Embedding");
  layer_class<nn::ActivationLayer>(m, "Activation");
  layer_class<nn::Flatten>(m, "Flatten");
  m.def("_layer_rows", [] {
    py::list names;
    for (const nn::LayerDef* def : nn::all_layers()) names.append(def->name);
    return names;
  });
  // The layer's example for tests/python/test_layer_table.py: its arguments as written, its
  // input (float32 on the CPU, the C++ table's values), and the C++ layer's output on it, made
  // with the generators seeded by `seed`.
  m.def("_layer_example", [](const std::string& name, uint64_t seed) {
    const nn::LayerDef& def = nn::layer_def(name);
    const Tensor x = nn::layer_example_input(def, DType::Float32, Device::cpu());
    manual_seed(seed);
    const Tensor y = (*nn::make_example_layer(def))(x);
    return py::make_tuple(def.example.args, def.example.make == nullptr, x, y);
  });

  py::class_<nn::Sequential, nn::Module, py::smart_holder>(m, "Sequential", py::dynamic_attr(),
                                                           "A stack of layers.")
      .def(py::init([](py::object layers) {
             auto s = std::make_shared<nn::Sequential>();
             if (!layers.is_none())
               for (py::handle l : layers) {
                 if (!py::isinstance<nn::Module>(l))
                   throw py::type_error(
                       "Sequential takes encore.nn layers, got " +
                       std::string(py::str(py::type::handle_of(l).attr("__name__"))));
                 s->add(l.cast<ModulePtr>());
               }
             return s;
           }),
           py::arg("layers") = py::none())
      .def(
          "add",
          [](nn::Sequential& s, ModulePtr layer) {
            ENCORE_CHECK(layer != nullptr, encore::ValueError, "[sequential] cannot add None");
            // A cycle would recurse without end (stack overflow) in build, forward, parameters.
            ENCORE_CHECK(!contains(*layer, &s), encore::ValueError,
                         "[sequential] cannot add a model to itself or to one of its layers");
            s.add(layer);
            return layer;
          },
          py::arg("layer"))
      .def_property_readonly("layers",
                             [](const nn::Sequential& s) {
                               py::list out;
                               for (const auto& [name, layer] : s.layers()) out.append(layer);
                               return out;
                             })
      .def("__len__", [](const nn::Sequential& s) { return s.layers().size(); })
      .def("__getitem__", [](const nn::Sequential& s, int64_t i) {
        const int64_t n = static_cast<int64_t>(s.layers().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) throw py::index_error("layer index out of range");
        return s.layers()[i].second;
      });

  m.def(
      "save_module",
      [](const nn::Module& module, const std::string& path) { nn::save(module, path); },
      py::arg("module"), py::arg("path"),
      "Writes every parameter to a safetensors file, atomically (nn/checkpoint.h).");
  m.def(
      "load_module", [](nn::Module& module, const std::string& path) { nn::load(module, path); },
      py::arg("module"), py::arg("path"),
      "Loads a safetensors file into `module`'s parameters, all or nothing.");

  // ---- losses ---------------------------------------------------------------------------
  m.def("binary_crossentropy", &nn::binary_crossentropy, py::arg("y_true"), py::arg("y_pred"),
        py::arg("from_logits") = false,
        "Mean binary cross-entropy. Probabilities that are the unmodified output of a sigmoid\n"
        "(encore.sigmoid, or a layer with activation='sigmoid') are computed from their logits,\n"
        "as in Keras 3: stable, and saturated outputs keep their gradient. Other probabilities\n"
        "are clipped to [1e-7, 1 - 1e-7].");
  m.def("mean_squared_error", &nn::mean_squared_error, py::arg("y_true"), py::arg("y_pred"));
  m.def("categorical_crossentropy", &nn::categorical_crossentropy, py::arg("y_true"),
        py::arg("y_pred"), py::arg("from_logits") = false,
        "Keras categorical_crossentropy: one-hot or probability targets (..., classes), averaged "
        "over\n"
        "the rows. Probabilities are scaled to sum to 1 and clipped to [1e-7, 1 - 1e-7] as in "
        "Keras;\n"
        "from_logits=True computes log_softmax (stable).");
  m.def("sparse_categorical_crossentropy", &nn::sparse_categorical_crossentropy, py::arg("labels"),
        py::arg("y_pred"), py::arg("from_logits") = false,
        "Keras sparse_categorical_crossentropy: integer class ids (...,) and predictions (..., "
        "classes),\n"
        "probabilities (as in categorical_crossentropy) or, with from_logits=True, logits.");
  m.def("binary_accuracy", &nn::binary_accuracy, py::arg("y_true"), py::arg("y_pred"),
        py::arg("threshold") = 0.5);
}

}  // namespace encore::python
