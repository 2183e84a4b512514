// encore._C: the pybind11 module. The public package `encore` (bindings/python/encore/)
// re-exports it and adds the Pythonic layer (context managers, decorators, defaults).
#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  using namespace encore::python;
  m.doc() = "encore's C++ runtime (private: use the `encore` package)";
  init_errors(m);
  init_runtime(m);
  init_tensor(m);
  init_ops(m);
  init_nn(m);
  init_optim(m);
  init_trace(m);
  init_compare(m);
  init_model(m);
  init_distributed(m);
  init_argument_errors(m);
}
