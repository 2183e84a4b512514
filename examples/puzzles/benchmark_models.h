// The benchmark models of issue 12 (the C++ twin of benchmark_models.py, which lists them):
// small, medium, large Conv1D stacks, the question's Conv1D+Flatten and its BiLSTM; all
// channels-last, trained with Adam(1e-4) and binary cross-entropy.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "encore.h"

namespace examples {

inline const std::vector<std::string>& benchmark_model_names() {
  static const std::vector<std::string> names = {"small", "medium", "large", "flatten", "bilstm"};
  return names;
}

/// Features per step of the model's data: the question's (400, 16) for flatten and bilstm.
inline int64_t benchmark_features(const std::string& model) {
  return model == "flatten" || model == "bilstm" ? 16 : 30;
}

/// The model, unbuilt; throws std::invalid_argument for an unknown name.
inline std::shared_ptr<encore::nn::Sequential> benchmark_model(const std::string& name,
                                                               int64_t units = 512) {
  using namespace encore::nn;
  auto m = std::make_shared<Sequential>();
  auto conv = [&](int64_t f, int64_t k, int64_t s = 1, const char* p = "valid") {
    m->add<Conv1D>(f, k, Conv1DOptions{.strides = s, .padding = p});
  };
  auto dense = [&](int64_t units_, const char* activation) {
    m->add<Dense>(units_, DenseOptions{.activation = activation});
  };
  auto head = [&] {  // medium and large
    m->add<GlobalAveragePooling1D>();
    dense(256, "relu");
    m->add<Dropout>(0.5);
    dense(128, "relu");
    dense(64, "relu");
    dense(1, "sigmoid");
  };
  if (name == "small") {
    conv(128, 40, 4, "same");
    m->add<GlobalAveragePooling1D>();
    m->add<Dropout>(0.5);
    dense(64, "relu");
    dense(1, "sigmoid");
  } else if (name == "medium") {
    for (int64_t f : {64, 128, 256, 256, 128, 64}) conv(f, 20);
    head();
  } else if (name == "large") {
    conv(64, 400, 4);
    conv(128, 200);
    for (int i = 0; i < 40; ++i) conv(256, 12, 1, "same");
    conv(512, 20, 2);
    conv(1028, 10, 2);
    conv(256, 1);
    head();
  } else if (name == "flatten") {
    conv(128, 400, 4, "same");
    m->add<Flatten>();
    m->add<Dropout>(0.5);
    dense(64, "relu");
    dense(1, "sigmoid");
  } else if (name == "bilstm") {
    const LSTMOptions lstm{.activation = "relu", .return_sequences = true};
    m->add(std::make_shared<Bidirectional>(std::make_shared<LSTM>(units, lstm)));
    m->add(std::make_shared<LSTM>(units, lstm));
    conv(128, 400, 4, "same");
    m->add<Flatten>();
    dense(256, "relu");
    m->add<Dropout>(0.5);
    dense(128, "relu");
    dense(64, "relu");
    dense(1, "sigmoid");
  } else {
    throw std::invalid_argument("unknown model '" + name +
                                "' (small, medium, large, flatten, bilstm)");
  }
  return m;
}

}  // namespace examples
