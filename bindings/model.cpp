// encore's training API for Python: nn::Model (compile / fit / evaluate / predict) with Python
// losses, metrics, callbacks and iterables of batches; the built-in callbacks; schedules;
// ArrayDataset. The Python layer (encore/_training.py) puts these on nn.Module as Keras methods.
//
// Lifetimes: a Model is stored on its module (module._model) and refers to it weakly, so the
// module's lifetime is the user's. The Python callables it calls (loss, metrics, the output
// writer) are references the garbage collector sees (tp_traverse: a loss that refers to the model
// makes a cycle it can free), which the C++ Model borrows; tp_clear drops the C++ Model before
// them. fit runs without the GIL (as a traced call does); everything that calls Python takes it.
#include <pybind11/functional.h>

#include <chrono>

#include "bindings.h"

namespace encore::python {

namespace {

// The Python objects a Model calls, kept here for the garbage collector.
struct PyModel {
  std::unique_ptr<nn::Model> model;
  py::weakref module;
  std::vector<py::object> refs;

  nn::Model& get() {
    ENCORE_CHECK(model && !module().is_none(), encore::ValueError,
                 "[model] its module no longer exists");
    return *model;
  }
};

// A Python callable (y_true, y_pred) -> Tensor, borrowed: PyModel::refs owns it.
nn::LossFn borrowed_fn(PyModel& holder, py::object fn) {
  holder.refs.push_back(fn);
  PyObject* f = fn.ptr();
  return [f](const Tensor& y, const Tensor& p) {
    py::gil_scoped_acquire gil;
    const py::object out = py::reinterpret_borrow<py::object>(f)(y, p);
    if (!py::isinstance<Tensor>(out))
      throw py::type_error("a loss or metric function must return a Tensor, got " +
                           std::string(py::str(py::type::handle_of(out).attr("__name__"))));
    return out.cast<Tensor>();
  };
}

// A loss or metric is a name or a callable: anything else fails here, not at fit's first call.
void check_loss_like(py::handle v, const char* what) {
  if (!py::isinstance<py::str>(v) && !PyCallable_Check(v.ptr()))
    throw py::type_error(detail::cat(
        "[compile] ", what, " must be a name or a function (y_true, y_pred) -> Tensor, got ",
        py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>()));
}

std::string callable_name(py::handle fn, const char* fallback) {
  return py::hasattr(fn, "__name__") ? py::str(fn.attr("__name__")).cast<std::string>() : fallback;
}

py::dict to_dict(const nn::Logs& logs) {
  py::dict d;
  for (const auto& [k, v] : logs) d[py::str(k)] = v;
  return d;
}

// A Python iterable of batches: `batches(epoch)` returns an iterator of (x, y) or
// (x, y, sample_weight) tensor tuples (y may be None for predict), made by the Python layer from
// the user's iterable.
class PyBatches : public nn::Dataset {
 public:
  PyBatches(py::object batches, int64_t size) : batches_(std::move(batches)), size_(size) {}
  ~PyBatches() override {
    py::gil_scoped_acquire gil;
    it_ = py::object();
    batches_ = py::object();
  }
  void start(int epoch) override {
    py::gil_scoped_acquire gil;
    it_ = batches_(epoch);
  }
  std::optional<nn::Batch> next() override {
    py::gil_scoped_acquire gil;
    PyObject* item = PyIter_Next(it_.ptr());
    if (!item) {
      if (PyErr_Occurred()) throw py::error_already_set();
      return std::nullopt;
    }
    // (x, y) or (x, y, sample_weight), made by the Python layer.
    const py::tuple t = py::reinterpret_steal<py::tuple>(item);
    return nn::Batch{t[0].cast<Tensor>(), t[1].is_none() ? Tensor() : t[1].cast<Tensor>(),
                     t.size() > 2 && !t[2].is_none() ? t[2].cast<Tensor>() : Tensor()};
  }
  int64_t size() const override { return size_; }

 private:
  py::object batches_, it_;
  int64_t size_;
};

// A Python callback (encore.callbacks.Callback or any object with its methods), Keras' hooks.
// Batch hooks are called only when the object overrides them.
class PyCallback : public nn::Callback {
 public:
  PyCallback(py::object callback, py::object module)
      : cb_(std::move(callback)), module_(std::move(module)) {
    const py::object base = py::module_::import("encore.callbacks").attr("Callback");
    auto overrides = [&](const char* name) {
      if (!py::hasattr(cb_, name)) return false;
      return !py::isinstance(cb_, base) || !py::type::handle_of(cb_).attr(name).is(base.attr(name));
    };
    begin_ = overrides("on_train_batch_begin");
    end_ = overrides("on_train_batch_end");
  }
  ~PyCallback() override {
    py::gil_scoped_acquire gil;
    cb_ = py::object();
    module_ = py::object();
  }
  void on_train_begin(nn::Model&) override {
    py::gil_scoped_acquire gil;
    if (py::hasattr(cb_, "set_model")) cb_.attr("set_model")(module_);
    call("on_train_begin", py::dict());
  }
  void on_epoch_begin(nn::Model&, int epoch) override {
    py::gil_scoped_acquire gil;
    call("on_epoch_begin", epoch, py::dict());
  }
  void on_batch_begin(nn::Model&, int64_t batch) override {
    if (!begin_) return;
    py::gil_scoped_acquire gil;
    call("on_train_batch_begin", batch, py::dict());
  }
  void on_batch_end(nn::Model& model, int64_t batch) override {
    if (!end_) return;
    const nn::Logs logs = model.running_logs();
    py::gil_scoped_acquire gil;
    call("on_train_batch_end", batch, to_dict(logs));
  }
  void on_epoch_end(nn::Model&, int epoch, nn::Logs& logs) override {
    py::gil_scoped_acquire gil;
    py::dict d = to_dict(logs);
    call("on_epoch_end", epoch, d);
    for (auto [k, v] : d)
      logs[k.cast<std::string>()] = v.cast<double>();  // callbacks may add values
  }
  void on_train_end(nn::Model&) override {
    py::gil_scoped_acquire gil;
    call("on_train_end", py::dict());
  }
  bool wants_batches() const override { return begin_ || end_; }

 private:
  template <class... A> void call(const char* name, A&&... args) {
    if (py::hasattr(cb_, name)) cb_.attr(name)(std::forward<A>(args)...);
  }
  py::object cb_, module_;
  bool begin_, end_;
};

// Lets Ctrl-C stop a fit: every 0.2 s it takes the GIL and runs Python's signal handlers (a
// KeyboardInterrupt propagates out of fit).
class Interrupts : public nn::Callback {
 public:
  bool wants_batches() const override { return true; }
  void on_batch_end(nn::Model&, int64_t) override {
    const auto now = std::chrono::steady_clock::now();
    if (now - checked_ < std::chrono::milliseconds(200)) return;
    checked_ = now;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }

 private:
  std::chrono::steady_clock::time_point checked_ = std::chrono::steady_clock::now();
};

// One pass over an ArrayDataset, as a Python iterator.
struct ArrayPass {
  std::shared_ptr<nn::ArrayDataset> data;
};

std::shared_ptr<nn::Dataset> to_dataset(py::handle data) {
  if (data.is_none()) return nullptr;
  return data.cast<std::shared_ptr<nn::Dataset>>();
}

nn::ExecutionMode to_mode(const std::string& mode) {
  if (mode == "traced") return nn::ExecutionMode::Traced;
  if (mode == "eager") return nn::ExecutionMode::Eager;
  throw encore::ValueError("[compile] mode must be 'traced' or 'eager', got '" + mode + "'");
}

int traverse(PyObject* self_base, visitproc visit, void* arg) {
#if PY_VERSION_HEX >= 0x03090000
  Py_VISIT(Py_TYPE(self_base));
#endif
  if (!py::detail::is_holder_constructed(self_base)) return 0;
  auto& self = py::cast<PyModel&>(py::handle(self_base));
  for (const py::object& r : self.refs) Py_VISIT(r.ptr());
  return 0;
}

int clear(PyObject* self_base) {
  if (!py::detail::is_holder_constructed(self_base)) return 0;
  auto& self = py::cast<PyModel&>(py::handle(self_base));
  self.model.reset();  // first: it borrows what follows
  self.refs.clear();
  return 0;
}

}  // namespace

void init_model(py::module_& m) {
  py::class_<nn::Dataset, std::shared_ptr<nn::Dataset>>(m, "Dataset",
                                                        "Batches of one pass over a data set.")
      .def("__len__", [](const nn::Dataset& d) {
        if (d.size() < 0) throw py::type_error("this dataset does not know its number of batches");
        return d.size();
      });
  py::class_<ArrayPass>(m, "_ArrayPass")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", [](ArrayPass& p) -> py::tuple {
        std::optional<nn::Batch> b = p.data->next();
        if (!b) throw py::stop_iteration();
        if (b->sample_weight.defined()) return py::make_tuple(b->x, wrap(b->y), b->sample_weight);
        return py::make_tuple(b->x, wrap(b->y));
      });
  py::class_<nn::ArrayDataset, nn::Dataset, std::shared_ptr<nn::ArrayDataset>>(
      m, "ArrayDataset", py::dynamic_attr(),
      "Rows of x (and y) in batches of batch_size, the last one smaller when they do not divide; "
      "shuffled per epoch from seed with shuffle (the order of epoch e depends only on seed and "
      "e).")
      .def(py::init([](const Tensor& x, py::object y, int64_t batch_size, bool shuffle,
                       uint64_t seed, py::object sample_weight) {
             return std::make_shared<nn::ArrayDataset>(
                 x, y.is_none() ? Tensor() : y.cast<Tensor>(), batch_size, shuffle, seed,
                 sample_weight.is_none() ? Tensor() : sample_weight.cast<Tensor>());
           }),
           py::arg("x"), py::arg("y") = py::none(), py::arg("batch_size") = 32,
           py::arg("shuffle") = false, py::arg("seed") = 0, py::arg("sample_weight") = py::none())
      .def("order", &nn::ArrayDataset::order, py::arg("epoch"), "The row order of pass `epoch`.")
      .def(
          "__iter__",
          [](py::object self) {
            // Each iteration is the next pass (a new order when shuffled), read from a copy, so
            // that two iterations at once do not share a position.
            const int epoch = self.attr("__dict__").attr("get")("_passes", 0).cast<int>();
            self.attr("_passes") = epoch + 1;
            auto pass = std::make_shared<nn::ArrayDataset>(self.cast<const nn::ArrayDataset&>());
            pass->start(epoch);
            return ArrayPass{std::move(pass)};
          },
          "Iterates the batches of the next pass: (x, y) tuples (y None without targets), with the "
          "sample\n"
          "weights as a third item when given.")
      .def(
          "batches",
          [](nn::ArrayDataset& d, int epoch) {
            d.start(epoch);
            py::list out;
            while (std::optional<nn::Batch> b = d.next())
              out.append(py::make_tuple(b->x, b->y.defined() ? py::cast(b->y) : py::none()));
            return out;
          },
          py::arg("epoch") = 0, "The (x, y) batches of pass `epoch`, as a list.");
  py::class_<PyBatches, nn::Dataset, std::shared_ptr<PyBatches>>(m, "_PythonBatches")
      .def(py::init<py::object, int64_t>(), py::arg("batches"), py::arg("size"));

  py::class_<nn::Schedule>(m, "Schedule",
                           "A learning rate as a function of the step (updates done before it).")
      .def(py::init([](std::function<double(int64_t)> fn, const std::string& description) {
             return nn::Schedule(std::move(fn), description);
           }),
           py::arg("fn"), py::arg("description") = "schedule")
      .def("__call__", &nn::Schedule::operator(), py::arg("step"))
      .def("__repr__", [](const nn::Schedule& s) { return "encore.optim." + s.str(); })
      .def_static("step_decay", &nn::Schedule::step_decay, py::arg("initial"), py::arg("step_size"),
                  py::arg("gamma"))
      .def_static("exponential_decay", &nn::Schedule::exponential_decay, py::arg("initial"),
                  py::arg("decay_steps"), py::arg("rate"), py::arg("staircase") = false)
      .def_static("cosine_decay", &nn::Schedule::cosine_decay, py::arg("initial"),
                  py::arg("decay_steps"), py::arg("alpha") = 0.0)
      .def_static("warmup", &nn::Schedule::warmup, py::arg("after"), py::arg("steps"),
                  py::arg("start") = 0.0);

  py::class_<nn::Callback, std::shared_ptr<nn::Callback>>(m, "_CallbackBase",
                                                          "A callback implemented in C++.");
  py::class_<nn::EarlyStopping, nn::Callback, std::shared_ptr<nn::EarlyStopping>>(
      m, "EarlyStopping", "Stops fit when `monitor` has not improved for `patience` epochs.")
      .def(py::init([](const std::string& monitor, double min_delta, int patience,
                       const std::string& mode, bool restore_best_weights) {
             return std::make_shared<nn::EarlyStopping>(nn::EarlyStoppingOptions{
                 monitor, min_delta, patience, mode, restore_best_weights});
           }),
           py::arg("monitor") = "val_loss", py::arg("min_delta") = 0.0, py::arg("patience") = 0,
           py::arg("mode") = "auto", py::arg("restore_best_weights") = false)
      .def_property_readonly("stopped_epoch", &nn::EarlyStopping::stopped_epoch)
      .def_property_readonly("best", &nn::EarlyStopping::best);
  py::class_<nn::ModelCheckpoint, nn::Callback, std::shared_ptr<nn::ModelCheckpoint>>(
      m, "ModelCheckpoint",
      "Saves a checkpoint (everything to resume, or weights only) at the end of every epoch, or of "
      "improving ones; '{epoch}' in the path becomes the epoch number.")
      .def(py::init([](py::object path, const std::string& monitor, bool save_best_only,
                       const std::string& mode, bool save_weights_only) {
             return std::make_shared<nn::ModelCheckpoint>(
                 nn::ModelCheckpointOptions{py::str(py::module_::import("os").attr("fspath")(path)),
                                            monitor, save_best_only, mode, save_weights_only});
           }),
           py::arg("filepath"), py::arg("monitor") = "val_loss", py::arg("save_best_only") = false,
           py::arg("mode") = "auto", py::arg("save_weights_only") = false)
      .def_property_readonly("last_saved", &nn::ModelCheckpoint::last_saved);
  py::class_<nn::LearningRateScheduler, nn::Callback, std::shared_ptr<nn::LearningRateScheduler>>(
      m, "LearningRateScheduler",
      "Sets the learning rate before every step from schedule(step), or per epoch from "
      "schedule(epoch) with per_epoch=True; logs it as 'lr'. No retrace.")
      .def(py::init([](py::object schedule, bool per_epoch) {
             if (py::isinstance<nn::Schedule>(schedule))
               return std::make_shared<nn::LearningRateScheduler>(schedule.cast<nn::Schedule>(),
                                                                  per_epoch);
             return std::make_shared<nn::LearningRateScheduler>(
                 nn::Schedule(schedule.cast<std::function<double(int64_t)>>(),
                              callable_name(schedule, "schedule")),
                 per_epoch);
           }),
           py::arg("schedule"), py::arg("per_epoch") = false);

  py::class_<nn::Metric>(
      m, "Metric",
      "A metric computed from counts over a pass (encore.metrics.AUC, Precision, Recall).")
      .def_static("auc", &nn::Metric::auc, py::arg("num_thresholds") = 200, py::arg("name") = "auc")
      .def_static("precision", &nn::Metric::precision, py::arg("threshold") = 0.5,
                  py::arg("name") = "precision")
      .def_static("recall", &nn::Metric::recall, py::arg("threshold") = 0.5,
                  py::arg("name") = "recall")
      .def_readonly("name", &nn::Metric::name);

  py::class_<PyModel>(m, "Model", py::custom_type_setup([](PyHeapTypeObject* heap_type) {
                        auto* type = &heap_type->ht_type;
                        type->tp_flags |= Py_TPFLAGS_HAVE_GC;
                        type->tp_traverse = traverse;
                        type->tp_clear = clear;
                      }),
                      "The training state of a module (encore.nn.Module.compile makes one).")
      .def(py::init([](py::object module) {
             auto holder = std::make_unique<PyModel>();
             nn::Module* raw = module.cast<nn::Module*>();
             holder->module = py::weakref(module);
             // Borrowed: the Python module owns the C++ one, and every use checks that it exists.
             holder->model = std::make_unique<nn::Model>(
                 std::shared_ptr<nn::Module>(std::shared_ptr<void>(), raw));
             return holder;
           }),
           py::arg("module"))
      .def(
          "compile",
          [](PyModel& self, py::object optimizer, py::object loss, py::list metrics,
             const std::string& mode, const ShapePolicy& shapes) {
            nn::OptimizerSpec opt =
                py::isinstance<py::str>(optimizer)
                    ? nn::OptimizerSpec(optimizer.cast<std::string>())
                    : nn::OptimizerSpec(optimizer.cast<std::shared_ptr<nn::Optimizer>>());
            check_loss_like(loss, "loss");
            for (py::handle mt : metrics)
              if (!py::isinstance<nn::Metric>(mt)) check_loss_like(mt, "a metric");
            std::optional<nn::Loss> l;
            if (py::isinstance<py::str>(loss))
              l.emplace(loss.cast<std::string>());
            else
              l.emplace(callable_name(loss, "loss"), borrowed_fn(self, loss));
            nn::CompileOptions o;
            for (py::handle mt : metrics) {
              if (py::isinstance<py::str>(mt))
                o.metrics.emplace_back(mt.cast<std::string>());
              else if (py::isinstance<nn::Metric>(mt))
                o.metrics.push_back(mt.cast<nn::Metric>());
              else
                o.metrics.emplace_back(callable_name(mt, "metric"),
                                       borrowed_fn(self, py::reinterpret_borrow<py::object>(mt)));
            }
            o.mode = to_mode(mode);
            o.shapes = shapes;
            self.get().compile(std::move(opt), std::move(*l), std::move(o));
          },
          py::arg("optimizer"), py::arg("loss"), py::arg("metrics"), py::arg("mode"),
          py::arg("shapes"))
      .def(
          "set_output",
          [](PyModel& self, py::object write, bool interactive) {
            self.refs.push_back(write);
            PyObject* w = write.ptr();
            self.get().set_output(
                [w](const std::string& text) {
                  py::gil_scoped_acquire gil;
                  py::reinterpret_borrow<py::object>(w)(text);
                },
                interactive);
          },
          py::arg("write"), py::arg("interactive"))
      .def(
          "fit",
          [](PyModel& self, py::object x, py::object y, int64_t batch_size, int epochs,
             int initial_epoch, bool shuffle, uint64_t seed, double validation_split,
             py::object validation, py::list callbacks, int verbose,
             std::map<int64_t, double> class_weight, py::object sample_weight,
             int64_t steps_per_epoch) {
            nn::FitOptions o;
            o.class_weight = std::move(class_weight);
            if (!sample_weight.is_none()) o.sample_weight = sample_weight.cast<Tensor>();
            o.steps_per_epoch = steps_per_epoch;
            o.batch_size = batch_size;
            o.epochs = epochs;
            o.initial_epoch = initial_epoch;
            o.shuffle = shuffle;
            o.seed = seed;
            o.validation_split = validation_split;
            o.verbose = verbose;
            o.validation_data = to_dataset(validation);
            for (py::handle cb : callbacks) {
              if (py::isinstance<nn::Callback>(cb))
                o.callbacks.push_back(cb.cast<std::shared_ptr<nn::Callback>>());
              else
                o.callbacks.push_back(std::make_shared<PyCallback>(
                    py::reinterpret_borrow<py::object>(cb), self.module()));
            }
            o.callbacks.push_back(std::make_shared<Interrupts>());
            nn::Model& model = self.get();
            nn::History h;
            if (py::isinstance<nn::Dataset>(x)) {
              const std::shared_ptr<nn::Dataset> data = to_dataset(x);
              py::gil_scoped_release release;
              h = model.fit(*data, o);
            } else {
              const Tensor tx = x.cast<Tensor>(), ty = y.cast<Tensor>();
              py::gil_scoped_release release;
              h = model.fit(tx, ty, o);
            }
            py::dict history;
            for (const auto& [k, v] : h.history) history[py::str(k)] = py::cast(v);
            return py::make_tuple(history, py::cast(h.epoch), h.cost, h.warning);
          },
          py::arg("x"), py::arg("y"), py::arg("batch_size"), py::arg("epochs"),
          py::arg("initial_epoch"), py::arg("shuffle"), py::arg("seed"),
          py::arg("validation_split"), py::arg("validation"), py::arg("callbacks"),
          py::arg("verbose"), py::arg("class_weight"), py::arg("sample_weight"),
          py::arg("steps_per_epoch"),
          "Trains on tensors x, y (batched here) or on a Dataset x; returns (history, epochs, "
          "cost, warning).")
      .def(
          "evaluate",
          [](PyModel& self, std::shared_ptr<nn::Dataset> data, int verbose) {
            nn::Model& model = self.get();
            nn::Logs logs;
            {
              py::gil_scoped_release release;
              logs = model.evaluate(*data, verbose);
            }
            return to_dict(logs);
          },
          py::arg("data"), py::arg("verbose"))
      .def(
          "predict",
          [](PyModel& self, std::shared_ptr<nn::Dataset> data, int verbose) {
            nn::Model& model = self.get();
            py::gil_scoped_release release;
            return model.predict(*data, verbose);
          },
          py::arg("data"), py::arg("verbose"))
      .def(
          "train_on_batch",
          [](PyModel& self, const Tensor& x, const Tensor& y, py::object sample_weight) {
            nn::Model& model = self.get();
            const Tensor w = sample_weight.is_none() ? Tensor() : sample_weight.cast<Tensor>();
            nn::Logs logs;
            {
              py::gil_scoped_release release;
              logs = model.train_on_batch(x, y, w);
            }
            return to_dict(logs);
          },
          py::arg("x"), py::arg("y"), py::arg("sample_weight") = py::none())
      .def(
          "test_on_batch",
          [](PyModel& self, const Tensor& x, const Tensor& y) {
            nn::Model& model = self.get();
            nn::Logs logs;
            {
              py::gil_scoped_release release;
              logs = model.test_on_batch(x, y);
            }
            return to_dict(logs);
          },
          py::arg("x"), py::arg("y"))
      .def(
          "predict_on_batch",
          [](PyModel& self, const Tensor& x) {
            nn::Model& model = self.get();
            py::gil_scoped_release release;
            return model.predict_on_batch(x);
          },
          py::arg("x"))
      .def("save_checkpoint",
           [](PyModel& self, const std::string& path) {
             nn::Model& model = self.get();
             py::gil_scoped_release release;
             model.save_checkpoint(path);
           })
      .def("load_checkpoint",
           [](PyModel& self, const std::string& path) {
             nn::Model& model = self.get();
             py::gil_scoped_release release;
             model.load_checkpoint(path);
           })
      .def_property_readonly("compiled", [](PyModel& self) { return self.get().compiled(); })
      .def_property_readonly("optimizer", [](PyModel& self) { return self.get().optimizer(); })
      .def_property_readonly("metrics_names", [](PyModel& self) { return self.get().log_names(); })
      .def_property_readonly("iterations", [](PyModel& self) { return self.get().iterations(); })
      .def_property_readonly("epoch", [](PyModel& self) { return self.get().epoch(); })
      .def_property(
          "stop_training", [](PyModel& self) { return self.get().stop_training; },
          [](PyModel& self, bool on) { self.get().stop_training = on; })
      .def(
          "traced_function",
          [](PyModel& self, const std::string& which) -> py::object {
            nn::Model& model = self.get();
            const TracedFunction* f = which == "train"  ? model.train_function()
                                      : which == "test" ? model.test_function()
                                                        : model.predict_function();
            if (!f) return py::none();
            py::dict d;
            d["calls"] = f->stats().calls;
            d["hits"] = f->stats().hits;
            d["traces"] = f->stats().traces;
            d["explain"] = f->explain();
            return d;
          },
          py::arg("which"),
          "Statistics of the traced 'train', 'test' or 'predict' step (None before its first "
          "use).");

  m.def(
      "save_checkpoint",
      [](const nn::Module& module, const std::string& path,
         std::shared_ptr<nn::Optimizer> optimizer, const nn::Metadata& metadata) {
        nn::save_checkpoint(path, module, optimizer.get(), metadata);
      },
      py::arg("module"), py::arg("path"), py::arg("optimizer") = nullptr,
      py::arg("metadata") = nn::Metadata{});
  m.def(
      "load_checkpoint",
      [](nn::Module& module, const std::string& path, std::shared_ptr<nn::Optimizer> optimizer) {
        return nn::load_checkpoint(path, module, optimizer.get());
      },
      py::arg("module"), py::arg("path"), py::arg("optimizer") = nullptr);
}

}  // namespace encore::python
