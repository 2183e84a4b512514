#include "ops/attrs.h"

#include "core/error.h"

namespace encore {

std::string_view name(Activation a) {
  switch (a) {
    case Activation::Linear: return "linear";
    case Activation::Tanh: return "tanh";
    case Activation::Sigmoid: return "sigmoid";
    case Activation::Relu: return "relu";
    case Activation::HardSigmoid: return "hard_sigmoid";
  }
  return "?";
}

Activation parse_activation(const std::string& s) {
  for (Activation a : {Activation::Linear, Activation::Tanh, Activation::Sigmoid, Activation::Relu,
                       Activation::HardSigmoid})
    if (s == name(a)) return a;
  if (s.empty() || s == "none") return Activation::Linear;
  throw ValueError("[activation] unknown activation '" + s +
                   "' (expected linear, tanh, sigmoid, relu or hard_sigmoid)");
}

using detail::cat;

std::string ScalarAttrs::str() const { return "value=" + value.str(); }
std::string ClipAttrs::str() const { return "lo=" + lo.str() + ", hi=" + hi.str(); }
std::string ReduceAttrs::str() const {
  std::string s = "axes=[";
  bool first = true;
  for (int i = 0; i < 32; ++i)
    if (axes >> i & 1u) {
      if (!first) s += ',';
      s += std::to_string(i);
      first = false;
    }
  return s + "]" + (keepdim ? ", keepdim" : "");
}
std::string AxisAttrs::str() const { return cat("axis=", axis); }
std::string ReshapeAttrs::str() const { return "shape=" + shape.str(); }
std::string PermuteAttrs::str() const { return "order=" + order.str(); }
std::string SliceAttrs::str() const {
  std::string s = cat("axis=", axis, ", ", start, ":", stop);
  if (step != 1) s += cat(":", step);
  return s;
}
std::string ExpandAttrs::str() const { return "shape=" + shape.str(); }
std::string CastAttrs::str() const { return cat("dtype=", name(dtype)); }
std::string DeviceAttrs::str() const { return "device=" + device.str(); }
std::string ConvAttrs::str() const {
  return cat("stride=", stride, ", dilation=", dilation, ", padding=(", pad_l, ", ", pad_r, ")");
}
std::string DropoutAttrs::str() const { return cat("rate=", p); }
std::string LstmAttrs::str() const {
  return cat("activation=", name(activation), ", recurrent_activation=", name(recurrent_activation));
}
std::string SgdAttrs::str() const {
  return cat("momentum=", momentum, ", weight_decay=", weight_decay, nesterov ? ", nesterov" : "");
}
std::string AdamAttrs::str() const {
  return cat("beta1=", beta1, ", beta2=", beta2, ", eps=", eps, ", weight_decay=", weight_decay,
             decoupled_weight_decay ? ", decoupled" : "", epsilon_hat ? ", epsilon_hat" : "");
}
std::string RmspropAttrs::str() const {
  return cat("rho=", rho, ", momentum=", momentum, ", eps=", eps, centered ? ", centered" : "");
}
std::string FullAttrs::str() const {
  return cat("shape=", shape.str(), ", dtype=", name(dtype), ", a=", value.str(), ", b=", step.str());
}
std::string ScatterAttrs::str() const { return cat("n=", n); }

std::string str(const Attrs& a) {
  return std::visit([](const auto& x) { return x.str(); }, a);
}

}  // namespace encore
