// Puzzle 5: tiny-model prediction overhead ("predict is slower after compile"). The C++ twin of
// p5_predict.py: a tiny Dense model predicts one small batch at a time, each way a program may
// call it, measured by encore::compare_modes (the ways take their calls in turn), with the
// traces each way made, from the ledger:
//
//   eager              model(x) op by op (inference mode, no autograd)
//   traced             a TracedFunction of the forward pass: traced once, then replayed
//   eager_new_batch    eager, a new batch size every call (eager does not care)
//   retrace_per_call   traced, a new batch size every call: a retrace every call
//   new_function       the wrong pattern: a new TracedFunction every call, which traces every
//                      call although the shape never changes
//   Model.predict      nn::Model::predict(x): batching and a traced predict step
//   predict_on_batch   nn::Model::predict_on_batch(x): one batch, traced
//
// then the same on a medium Dense model, where the kernels dominate.
//
//   puzzle_predict [--calls 100] [--warmup 5] [--profile-steps 5] [--tiny-batch 8]
//                  [--medium-batch 64] [--threads N] [--device cpu|cuda] [--json out.json]
#include <cstdio>

#include "puzzle_cli.h"
#include "train/compare.h"
#include "train/model.h"

using namespace encore;
using examples::Row;

namespace {

struct Spec {
  std::string name;
  std::vector<int64_t> hidden;  // Dense(relu) widths before Dense(1, sigmoid)
  int64_t features;
};

struct Way {
  std::string model, way;
  double per_call_us, vs_eager, kernel_us;
  int64_t calls, traces;
};

std::string fmt(const char* spec, double v) {
  char b[64];
  std::snprintf(b, sizeof b, spec, v);
  return b;
}

std::vector<Way> run_model(const Spec& spec, int64_t batch, const CompareOptions& common,
                           Device device, std::vector<Row>& rows, nlohmann::json& reports) {
  manual_seed(0);
  auto net = std::make_shared<nn::Sequential>();
  for (int64_t h : spec.hidden) net->add<nn::Dense>(h, nn::DenseOptions{.activation = "relu"});
  net->add<nn::Dense>(1, nn::DenseOptions{.activation = "sigmoid"});
  net->build({batch, spec.features});
  net->to(device);
  nn::Model model(net);
  const Step forward = [&](const Batch& b) -> std::vector<Tensor> {
    NoGradGuard no_grad;
    TrainingGuard inference(false);
    return {(*net)(b[0])};
  };
  const auto make = [&](int64_t rows_) -> Batch {
    Generator g(static_cast<uint64_t>(rows_));
    return {normal({rows_, spec.features}, 0.0, 1.0, DType::Float32, Device::cpu(), &g).to(device)};
  };
  const Step new_function = [&](const Batch& b) {  // the wrong pattern
    TracedFunction f([&](const std::vector<Arg>& a) { return forward({std::get<Tensor>(a[0])}); });
    return f({b[0]});
  };
  const Step predict = [&](const Batch& b) {
    return std::vector<Tensor>{model.predict(b[0], batch)};
  };
  const Step on_batch = [&](const Batch& b) {
    return std::vector<Tensor>{model.predict_on_batch(b[0])};
  };

  CompareOptions o = common;
  o.state = net->parameters();
  o.length_axis = 0;
  o.modes = {"eager", "traced", "eager_new_length", "traced_new_length"};
  o.name = spec.name + "_forward";
  const CompareReport main = compare_modes(forward, BatchSource::of(make, batch), o);
  reports[spec.name]["forward"] = nlohmann::json::parse(main.json());
  std::vector<std::pair<std::string, ModeReport>> ways = {
      {"eager", main["eager"]},
      {"traced", main["traced"]},
      {"eager_new_batch", main["eager_new_length"]},
      {"retrace_per_call", main["traced_new_length"]}};
  o.modes = {"eager"};
  for (const auto& [way, step] : {std::pair<std::string, Step>{"new_function", new_function},
                                  {"Model.predict", predict},
                                  {"predict_on_batch", on_batch}}) {
    o.name = spec.name + "_" + way;
    const CompareReport r = compare_modes(step, BatchSource::of(make(batch)), o);
    reports[spec.name][way] = nlohmann::json::parse(r.json());
    ways.emplace_back(way, r["eager"]);
  }
  std::vector<Way> out;
  for (const auto& [way, m] : ways) {
    // New-batch ways against eager on the same batch sizes, the others against eager.
    const bool new_batch = way == "eager_new_batch" || way == "retrace_per_call";
    const double vs =
        m.step_ms_median / main[new_batch ? "eager_new_length" : "eager"].step_ms_median;
    out.push_back(
        {spec.name, way, 1e3 * m.step_ms_median, vs, 1e3 * m.kernel_ms, m.calls, m.traces});
    rows.push_back(Row()
                       .add("model", spec.name)
                       .add("way", way)
                       .add("input", std::to_string(batch) + "x" + std::to_string(spec.features))
                       .add("per_call_us", 1e3 * m.step_ms_median)
                       .add("vs_eager", vs)
                       .add("calls", m.calls)
                       .add("traces", m.traces)
                       .add("kernel_us", 1e3 * m.kernel_ms)
                       .add("overhead_us", 1e3 * std::max(m.overhead_ms, 0.0))
                       .add("trace_ms", m.trace_ms_total)
                       .add("first_call_us", 1e3 * m.first_call_ms));
  }
  return out;
}

std::vector<std::string> conclusion(const std::vector<Way>& ways) {
  auto at = [&](const std::string& model, const std::string& way) -> const Way& {
    for (const Way& w : ways)
      if (w.model == model && w.way == way) return w;
    throw std::logic_error("no row " + model + " " + way);
  };
  const Way &e = at("tiny", "eager"), &t = at("tiny", "traced"),
            &rt = at("tiny", "retrace_per_call"), &nf = at("tiny", "new_function"),
            &p = at("tiny", "Model.predict"), &pb = at("tiny", "predict_on_batch");
  const Way &me = at("medium", "eager"), &mt = at("medium", "traced"),
            &mp = at("medium", "Model.predict"), &mr = at("medium", "retrace_per_call");
  return {
      "tiny model: eager " + fmt("%.3g", e.per_call_us) + " us per call, of which kernels " +
          fmt("%.3g", e.kernel_us) + " us; replaying one trace takes " +
          fmt("%.3g", t.per_call_us) + " us (" + fmt("%.2fx", 1 / t.vs_eager) +
          " faster): the time is framework overhead and the graph removes it",
      "a retrace every call (a new batch size each time) costs " + fmt("%.3g", rt.per_call_us) +
          " us per call (" + fmt("%.1fx", rt.vs_eager) + " eager on the same batch sizes): " +
          std::to_string(rt.traces) + " traces in " + std::to_string(rt.calls) + " calls",
      "a new traced function per call costs " + fmt("%.3g", nf.per_call_us) + " us (" +
          fmt("%.1fx", nf.vs_eager) + " eager): " + std::to_string(nf.traces) + " traces in " +
          std::to_string(nf.calls) +
          " calls although the shape never changes; make the traced function once",
      "Model.predict on one small batch: " + fmt("%.3g", p.per_call_us) + " us (" +
          std::to_string(p.traces) +
          " traces in the timed calls: its predict step traced before them), predict_on_batch " +
          fmt("%.3g", pb.per_call_us) + " us: the batching loop is the difference to a bare replay",
      "medium model: eager " + fmt("%.0f", me.per_call_us) + " us per call, of which kernels " +
          fmt("%.0f", me.kernel_us) + " us; traced " + fmt("%.0f", mt.per_call_us) +
          " us, Model.predict " + fmt("%.0f", mp.per_call_us) + " us: " +
          examples::agreement({me.per_call_us, mt.per_call_us, mp.per_call_us},
                              me.kernel_us / me.per_call_us) +
          " (a retrace per call costs " + fmt("%.2fx", mr.vs_eager) + " eager on the same sizes)",
  };
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> known = examples::kPuzzleOptions;
  for (const char* k : {"calls", "warmup", "profile-steps", "tiny-batch", "medium-batch"})
    known.push_back(k);
  const examples::Args args(argc, argv, known);
  return examples::guarded(args, [&] {
    const Device device = examples::puzzle_device(args);
    CompareOptions common;
    common.steps = static_cast<int>(args.num("calls", 100));
    common.warmup = static_cast<int>(args.num("warmup", 5));
    common.profile_steps = static_cast<int>(args.num("profile-steps", 5));
    const int64_t tiny = args.num("tiny-batch", 8), medium = args.num("medium-batch", 64);
    if (common.steps < 1 || common.warmup < 0 || common.profile_steps < 1 || tiny < 1 || medium < 1)
      examples::usage_error(
          args.program(),
          "needs --calls, --tiny-batch, --medium-batch, --profile-steps >= 1 and --warmup >= 0");
    const std::string title =
        examples::puzzle_header("puzzle 5, predict one batch at a time: medians of " +
                                    std::to_string(common.steps) + " calls",
                                device);
    std::printf("%s\n", title.c_str());
    std::vector<Row> rows;
    nlohmann::json reports = nlohmann::json::object();
    std::vector<Way> ways = run_model({"tiny", {16}, 16}, tiny, common, device, rows, reports);
    for (Way& w : run_model({"medium", {1024, 1024}, 512}, medium, common, device, rows, reports))
      ways.push_back(w);
    examples::print_table(rows);
    std::printf(
        "(per call, medians; vs_eager: against eager on the same batches (eager_new_batch for the "
        "new-batch ways); traces: made during the timed calls, from the ledger; kernel_us / "
        "overhead_us: the ledger's profiled pass, fixed-shape ways only)\n");
    const std::vector<std::string> lines = conclusion(ways);
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    if (args.flag("json"))
      examples::write_puzzle_json(args.get("json"), {{"puzzle", "predict"},
                                                     {"device", device.str()},
                                                     {"threads", num_threads()},
                                                     {"calls", common.steps},
                                                     {"rows", examples::rows_json(rows)},
                                                     {"conclusion", lines},
                                                     {"reports", reports}});
    return 0;
  });
}
