// encore.nn: Keras-style layers, Sequential, checkpoint save/load and the losses. Modules are held by
// shared_ptr so a layer can live in Python and in a Sequential at once.
#include "bindings.h"

namespace encore::python {

namespace {

using ModulePtr = std::shared_ptr<nn::Module>;

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (int i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

py::list named(const nn::NamedTensors& v) {
  py::list out;
  for (const auto& [name, t] : v) out.append(py::make_tuple(name, t));
  return out;
}

nn::RecurrentImplementation to_implementation(const std::string& s, const char* layer) {
  if (s == "auto") return nn::RecurrentImplementation::Auto;
  if (s == "composed") return nn::RecurrentImplementation::Composed;
  if (s == "cudnn") return nn::RecurrentImplementation::Cudnn;
  throw encore::ValueError(std::string("[") + layer +
                           "] implementation must be 'auto', 'composed' or 'cudnn', got '" + s + "'");
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

// Whether `root` is `target` or holds it (only Sequentials hold other layers from Python).
bool contains(const nn::Module& root, const nn::Module* target) {
  if (&root == target) return true;
  if (const auto* seq = dynamic_cast<const nn::Sequential*>(&root))
    for (const auto& [name, layer] : seq->layers())
      if (contains(*layer, target)) return true;
  return false;
}

}  // namespace

void init_nn(py::module_& m) {
  py::class_<nn::Module, ModulePtr>(
      m, "Module", "A layer with parameters, built from the first input shape (Keras-style).")
      .def(
          "__call__",
          // With the GIL held: a module builds itself on first use and its autograd records
          // are shared state, so two Python threads must not run it at once.
          [](nn::Module& module, const Tensor& x) { return module(x); },
          py::arg("x"))
      .def(
          "forward",
          [](nn::Module& module, const Tensor& x) {
            py::gil_scoped_release release;
            return module.forward(x);
          },
          py::arg("x"))
      .def(
          "build",
          [](nn::Module& module, py::object shape) {
            return shape_tuple(module.build(to_shape(shape, "build")));
          },
          py::arg("input_shape"),
          "Creates the parameters for inputs of `input_shape` (batch first); returns the output "
          "shape.")
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
          "named_buffers",
          [](const nn::Module& module) { return named(module.named_buffers()); },
          "Non-trainable state (BatchNormalization's moving statistics) as (name, Tensor) pairs.")
      .def(
          "named_weights",
          [](const nn::Module& module) { return named(module.named_weights()); },
          "Parameters, then buffers, as (name, Tensor) pairs: what save() writes.")
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

  py::class_<nn::Dense, nn::Module, std::shared_ptr<nn::Dense>>(
      m, "Dense", "y = activation(x @ kernel + bias) over the last axis.")
      .def(py::init([](int64_t units, const std::string& activation, bool use_bias) {
             return std::make_shared<nn::Dense>(units, nn::DenseOptions{activation, use_bias});
           }),
           py::arg("units"), py::arg("activation") = "linear", py::arg("use_bias") = true);

  py::class_<nn::Conv1D, nn::Module, std::shared_ptr<nn::Conv1D>>(
      m, "Conv1D",
      "1-D convolution over steps on (batch, steps, channels); kernel (kernel_size, in, filters).")
      .def(py::init([](int64_t filters, int64_t kernel_size, int64_t strides,
                       const std::string& padding, int64_t dilation_rate,
                       const std::string& activation, bool use_bias) {
             return std::make_shared<nn::Conv1D>(
                 filters, kernel_size,
                 nn::Conv1DOptions{strides, padding, dilation_rate, activation, use_bias});
           }),
           py::arg("filters"), py::arg("kernel_size"), py::arg("strides") = 1,
           py::arg("padding") = "valid", py::arg("dilation_rate") = 1,
           py::arg("activation") = "linear", py::arg("use_bias") = true);

  py::class_<nn::Recurrent, nn::Module, std::shared_ptr<nn::Recurrent>>(
      m, "Recurrent", "A recurrent layer (LSTM, GRU): what Bidirectional wraps.");

  py::class_<nn::LSTM, nn::Recurrent, std::shared_ptr<nn::LSTM>>(
      m, "LSTM", "LSTM with Keras semantics (gates i, f, c, o).")
      .def(py::init([](int64_t units, const std::string& activation,
                       const std::string& recurrent_activation, bool return_sequences, bool reverse,
                       bool unit_forget_bias, const std::string& implementation) {
             nn::LSTMOptions o;
             o.activation = activation;
             o.recurrent_activation = recurrent_activation;
             o.return_sequences = return_sequences;
             o.reverse = reverse;
             o.unit_forget_bias = unit_forget_bias;
             o.implementation = to_implementation(implementation, "lstm");
             return std::make_shared<nn::LSTM>(units, o);
           }),
           py::arg("units"), py::arg("activation") = "tanh",
           py::arg("recurrent_activation") = "sigmoid", py::arg("return_sequences") = false,
           py::arg("reverse") = false, py::arg("unit_forget_bias") = true,
           py::arg("implementation") = "auto")
      .def_property_readonly("units", &nn::LSTM::units)
      .def("uses_cudnn", &nn::LSTM::uses_cudnn, py::arg("x"),
           "Whether a forward on `x` takes the cuDNN path.");

  py::class_<nn::GRU, nn::Recurrent, std::shared_ptr<nn::GRU>>(
      m, "GRU", "GRU with Keras semantics (gates z, r, h; reset_after=True by default).")
      .def(py::init([](int64_t units, const std::string& activation,
                       const std::string& recurrent_activation, bool return_sequences,
                       bool return_state, bool go_backwards, bool reset_after,
                       const std::string& implementation) {
             return std::make_shared<nn::GRU>(
                 units, nn::GRUOptions{activation, recurrent_activation, return_sequences,
                                       return_state, go_backwards, reset_after,
                                       to_implementation(implementation, "gru")});
           }),
           py::arg("units"), py::arg("activation") = "tanh",
           py::arg("recurrent_activation") = "sigmoid", py::arg("return_sequences") = false,
           py::arg("return_state") = false, py::arg("go_backwards") = false,
           py::arg("reset_after") = true, py::arg("implementation") = "auto")
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
           "Whether a forward on `x` takes the cuDNN path.");

  py::class_<nn::Bidirectional, nn::Module, std::shared_ptr<nn::Bidirectional>>(
      m, "Bidirectional",
      "A forward and a reversed copy of an LSTM or GRU, merged ('concat', 'sum', 'mul' or "
      "'ave').")
      .def(py::init([](std::shared_ptr<nn::Recurrent> layer, const std::string& merge_mode) {
             ENCORE_CHECK(layer != nullptr, encore::ValueError,
                          "[bidirectional] needs an LSTM or GRU layer");
             return std::make_shared<nn::Bidirectional>(std::move(layer), merge_mode);
           }),
           py::arg("layer"), py::arg("merge_mode") = "concat");

  py::class_<nn::Dropout, nn::Module, std::shared_ptr<nn::Dropout>>(
      m, "Dropout", "Inverted dropout, active in training mode.")
      .def(py::init<double>(), py::arg("rate"));
  py::class_<nn::GlobalAveragePooling1D, nn::Module, std::shared_ptr<nn::GlobalAveragePooling1D>>(
      m, "GlobalAveragePooling1D",
      "Mean over the steps axis: (batch, steps, channels) -> (batch, channels).")
      .def(py::init<>());
  py::class_<nn::GlobalMaxPooling1D, nn::Module, std::shared_ptr<nn::GlobalMaxPooling1D>>(
      m, "GlobalMaxPooling1D",
      "Max over the steps axis: (batch, steps, channels) -> (batch, channels).")
      .def(py::init<>());
  py::class_<nn::MaxPooling1D, nn::Module, std::shared_ptr<nn::MaxPooling1D>>(
      m, "MaxPooling1D",
      "Keras MaxPooling1D: the max of each window of `pool_size` steps, `strides` apart (default "
      "pool_size); padding 'valid' or 'same'.")
      .def(py::init([](int64_t pool_size, std::optional<int64_t> strides, const std::string& padding) {
             return std::make_shared<nn::MaxPooling1D>(pool_size, nn::Pooling1DOptions{strides, padding});
           }),
           py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = "valid");
  py::class_<nn::AveragePooling1D, nn::Module, std::shared_ptr<nn::AveragePooling1D>>(
      m, "AveragePooling1D",
      "Keras AveragePooling1D: the mean of each window of `pool_size` steps, `strides` apart (default "
      "pool_size); padding 'valid' or 'same' (a window averages its real steps only).")
      .def(py::init([](int64_t pool_size, std::optional<int64_t> strides, const std::string& padding) {
             return std::make_shared<nn::AveragePooling1D>(pool_size, nn::Pooling1DOptions{strides, padding});
           }),
           py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = "valid");
  py::class_<nn::BatchNormalization, nn::Module, std::shared_ptr<nn::BatchNormalization>>(
      m, "BatchNormalization",
      "Keras BatchNormalization: batch statistics (biased variance) in training mode, which also\n"
      "update the buffers moving_mean and moving_variance; the moving statistics in inference mode.")
      .def(py::init([](int64_t axis, double momentum, double epsilon, bool center, bool scale) {
             return std::make_shared<nn::BatchNormalization>(
                 nn::BatchNormalizationOptions{axis, momentum, epsilon, center, scale});
           }),
           py::arg("axis") = -1, py::arg("momentum") = 0.99, py::arg("epsilon") = 1e-3,
           py::arg("center") = true, py::arg("scale") = true)
      .def_property_readonly("moving_mean", &nn::BatchNormalization::moving_mean)
      .def_property_readonly("moving_variance", &nn::BatchNormalization::moving_variance);
  py::class_<nn::LayerNormalization, nn::Module, std::shared_ptr<nn::LayerNormalization>>(
      m, "LayerNormalization", "Keras LayerNormalization: each sample normalized along `axis`.")
      .def(py::init([](int64_t axis, double epsilon, bool center, bool scale) {
             return std::make_shared<nn::LayerNormalization>(
                 nn::LayerNormalizationOptions{axis, epsilon, center, scale});
           }),
           py::arg("axis") = -1, py::arg("epsilon") = 1e-3, py::arg("center") = true,
           py::arg("scale") = true);
  py::class_<nn::Embedding, nn::Module, std::shared_ptr<nn::Embedding>>(
      m, "Embedding",
      "Keras Embedding: int32/int64 indices of any shape -> (..., output_dim) rows of the table.")
      .def(py::init<int64_t, int64_t>(), py::arg("input_dim"), py::arg("output_dim"));
  py::class_<nn::ActivationLayer, nn::Module, std::shared_ptr<nn::ActivationLayer>>(
      m, "Activation", "Keras Activation: applies an activation by name ('relu', 'gelu', 'softmax', ...).")
      .def(py::init<const std::string&>(), py::arg("activation"));
  py::class_<nn::Flatten, nn::Module, std::shared_ptr<nn::Flatten>>(
      m, "Flatten", "(batch, ...) -> (batch, product of the rest).")
      .def(py::init<>());

  py::class_<nn::Sequential, nn::Module, std::shared_ptr<nn::Sequential>>(m, "Sequential",
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
      .def("__getitem__",
           [](const nn::Sequential& s, int64_t i) {
             const int64_t n = static_cast<int64_t>(s.layers().size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("layer index out of range");
             return s.layers()[i].second;
           })
      .def(
          "summary",
          [](nn::Sequential& s, py::object shape) { return s.summary(to_shape(shape, "summary")); },
          py::arg("input_shape"),
          "A Keras-like summary (layer, output shape, parameters) as text.");

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
  m.def("categorical_crossentropy", &nn::categorical_crossentropy, py::arg("y_true"), py::arg("y_pred"),
        py::arg("from_logits") = false,
        "Keras categorical_crossentropy: one-hot or probability targets (..., classes), averaged over\n"
        "the rows. Probabilities are scaled to sum to 1 and clipped to [1e-7, 1 - 1e-7] as in Keras;\n"
        "from_logits=True computes log_softmax (stable).");
  m.def("sparse_categorical_crossentropy", &nn::sparse_categorical_crossentropy, py::arg("labels"),
        py::arg("y_pred"), py::arg("from_logits") = false,
        "Keras sparse_categorical_crossentropy: integer class ids (...,) and predictions (..., classes),\n"
        "probabilities (as in categorical_crossentropy) or, with from_logits=True, logits.");
  m.def("binary_accuracy", &nn::binary_accuracy, py::arg("y_true"), py::arg("y_pred"),
        py::arg("threshold") = 0.5);
}

}  // namespace encore::python
