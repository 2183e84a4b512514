// encore.distributed (core/dist.h, nn/distributed.h): the world, barrier, timeouts, the
// agreement check, DistributedOptimizer and broadcast_parameters. The collectives themselves are
// op rows, bound with the other ops (encore.all_reduce, encore.broadcast, encore.all_gather).
#include "nn/distributed.h"

#include "bindings.h"

namespace encore::python {

void init_distributed(py::module_& m) {
  py::class_<dist::Group>(m, "DistGroup",
                          "The world of processes: this rank, their number, the engine.")
      .def_readonly("rank", &dist::Group::rank)
      .def_readonly("size", &dist::Group::size)
      .def_readonly("backend", &dist::Group::backend)
      .def("__repr__", [](const dist::Group& g) {
        return detail::cat("DistGroup(rank=", g.rank, ", size=", g.size, ", backend='", g.backend,
                           "')");
      });
  // The MPI engine waits in C++ on its own thread: release the GIL wherever a rank may wait.
  const auto release = py::call_guard<py::gil_scoped_release>();
  m.def("dist_init", &dist::init, release);
  m.def("dist_launched", &dist::launched);
  m.def("dist_unavailable_reason", &dist::unavailable_reason);
  m.def("dist_barrier", &dist::barrier, release);
  m.def("dist_set_timeout", &dist::set_timeout, py::arg("seconds"));
  m.def("dist_timeout", &dist::timeout);
  m.def(
      "dist_check_agreement",
      [](uint64_t hash, const std::string& description) {
        dist::check_agreement(hash, description);
      },
      py::arg("hash"), py::arg("description"), release);
  m.def(
      "DistributedOptimizer",
      [](std::shared_ptr<nn::Optimizer> optimizer, int64_t bucket_bytes, bool overlap) {
        return dist::DistributedOptimizer(std::move(optimizer), {bucket_bytes, overlap});
      },
      py::arg("optimizer"), py::arg("bucket_bytes") = int64_t{1} << 20, py::arg("overlap") = true);
  m.def("dist_buckets", &dist::buckets, py::arg("optimizer"));
  m.def("broadcast_parameters",
        py::overload_cast<const std::vector<Tensor>&, int>(&dist::broadcast_parameters),
        py::arg("tensors"), py::arg("root") = 0, release);
  m.def("broadcast_module_parameters",
        py::overload_cast<const nn::Module&, int>(&dist::broadcast_parameters), py::arg("module"),
        py::arg("root") = 0, release);
}

}  // namespace encore::python
