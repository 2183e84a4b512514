#include "autograd/gradcheck.h"

#include <cmath>
#include <cstdio>

#include "core/modes.h"
#include "ops/ops.h"
#include "ops/random.h"

namespace encore {

GradcheckResult gradcheck(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions options) {
  std::vector<Tensor> x;
  for (const Tensor& t : inputs) {
    ENCORE_CHECK(t.device().is_cpu() && (!is_floating(t.dtype()) || t.dtype() == DType::Float64),
                 DTypeError, "[gradcheck] floating inputs must be float64 on the CPU, got ",
                 describe(t));
    Tensor c = t.detach().clone();
    if (is_floating(t.dtype())) c.set_requires_grad(true);
    x.push_back(c);
  }
  // Fixed random projections turn every output into one scalar.
  Generator gen(12345);
  std::vector<Tensor> proj;
  auto objective = [&](const std::vector<Tensor>& args) {
    const std::vector<Tensor> out = fn(args);
    if (proj.empty())
      for (const Tensor& o : out)
        proj.push_back(normal(o.shape(), 0.0, 1.0, DType::Float64, Device::cpu(), &gen));
    Tensor total = zeros({}, DType::Float64);
    for (size_t k = 0; k < out.size(); ++k) total = total + sum(out[k] * proj[k]);
    return total;
  };
  objective(x).backward();

  GradcheckResult result;
  NoGradGuard no_grad;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!is_floating(x[i].dtype())) continue;
    Tensor probe = x[i].detach();
    double* p = probe.data<double>();
    const std::vector<double> analytic = x[i].grad().defined()
                                             ? x[i].grad().to_vector<double>()
                                             : std::vector<double>(probe.numel(), 0.0);
    std::vector<Tensor> args = x;
    args[i] = probe;
    for (int64_t j = 0; j < probe.numel(); ++j) {
      const double saved = p[j];
      p[j] = saved + options.eps;
      const double plus = objective(args).item();
      p[j] = saved - options.eps;
      const double minus = objective(args).item();
      p[j] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double err = std::fabs(analytic[j] - numeric);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (!(err <= options.atol + options.rtol * std::fabs(numeric))) {
        result.ok = false;
        if (result.report.size() < 2000) {
          char line[160];
          std::snprintf(line, sizeof line,
                        "input %zu element %lld: analytic %.9g vs numeric %.9g\n", i,
                        static_cast<long long>(j), analytic[j], numeric);
          result.report += line;
        }
      }
    }
  }
  return result;
}

}  // namespace encore
