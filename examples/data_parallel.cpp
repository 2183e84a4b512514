// Data-parallel training of a benchmark Conv1D model (examples/puzzles/benchmark_models.h) on 1,
// 2 and 4 ranks: time per step, samples per second, scaling efficiency, and what the step
// communicates (collectives, bytes, engine time, the part the backward pass hid).
//
//   data_parallel [--model small] [--ranks 1,2,4] [--threads 1] [--batch 32] [--steps 10] ...
//       run alone: launches itself under mpirun once per rank count and prints the table
//   mpirun -np 2 data_parallel --worker ...
//       one configuration (what the table runs); rank 0 prints one result line
//
// The global batch stays the same for every rank count (each rank trains on batch / ranks rows),
// so every configuration computes the same step (strong scaling), and the efficiency is the
// speed-up over one rank divided by the ranks: step_ms(1) / (N x step_ms(N)).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common.h"
#include "core/dist.h"
#include "core/ledger.h"
#include "encore.h"
#include "graph/trace.h"
#include "puzzles/benchmark_models.h"

namespace {

using namespace encore;

struct Result {
  int ranks = 1, threads = 1;
  double step_ms = 0, samples_s = 0, comm_calls = 0, comm_kib = 0, comm_ms = 0, hidden_pct = 0;
};

// One configuration, on the ranks mpirun started (or alone).
int worker(const examples::Args& args) {
  const dist::Group world = dist::init();
  const int64_t batch = args.num("batch", 32), steps = args.num("steps", 10),
                length = args.num("length", 1000);
  const int threads = static_cast<int>(args.num("threads", 1));
  set_num_threads(threads);
  if (batch % world.size != 0)
    examples::usage_error(args.program(), "--batch must be a multiple of the rank count");
  const std::string name = args.get("model", "small");
  auto model = examples::benchmark_model(name);
  const int64_t features = examples::benchmark_features(name);
  manual_seed(1);
  model->build({batch / world.size, length, features});
  dist::broadcast_parameters(*model);
  auto opt = dist::DistributedOptimizer(std::make_shared<nn::Adam>(model->parameters()),
                                        {.bucket_bytes = args.num("bucket-kib", 1024) * 1024,
                                         .overlap = args.num("overlap", 1) != 0});
  // Every rank draws the whole global batch from one seed and keeps its rows.
  const examples::FrequencyTask task = examples::make_frequency_task(batch, length, features, 7);
  const int64_t rows = batch / world.size;
  const Tensor x = task.x.slice(0, world.rank * rows, (world.rank + 1) * rows).contiguous();
  const Tensor y = task.y.slice(0, world.rank * rows, (world.rank + 1) * rows).contiguous();
  auto body = [&](const Tensor& xb, const Tensor& yb) {
    opt->zero_grad();
    const Tensor loss = nn::binary_crossentropy(yb, (*model)(xb));
    loss.backward();
    opt->step();
    return loss;
  };
  auto step = trace(body, {.name = "data_parallel_step"});
  const bool traced = args.get("mode", "traced") == "traced";
  auto run = [&] { return traced ? step(x, y) : body(x, y); };
  for (int i = 0; i < 3; ++i) run();  // trace, first replays, warm caches
  Ledger& ledger = Ledger::global();
  std::vector<double> times;
  int64_t calls = 0, bytes = 0, comm_ns = 0, wait_ns = 0;  // the steps' own, barriers left out
  for (int64_t i = 0; i < steps; ++i) {
    dist::barrier();  // every rank starts the step together: the time is the slowest rank's
    const int64_t calls0 = ledger.get(Counter::Collectives),
                  bytes0 = ledger.get(Counter::CollectiveBytes);
    const int64_t comm0 = ledger.get(Counter::CommNs), wait0 = ledger.get(Counter::CommWaitNs);
    const int64_t start = now_ns();
    run();
    times.push_back((now_ns() - start) / 1e6);
    calls += ledger.get(Counter::Collectives) - calls0;
    bytes += ledger.get(Counter::CollectiveBytes) - bytes0;
    comm_ns += ledger.get(Counter::CommNs) - comm0;
    wait_ns += ledger.get(Counter::CommWaitNs) - wait0;
  }
  // The slowest rank's median.
  const Tensor medians = dist::all_gather(full({1}, examples::median(times), DType::Float64));
  const double step_ms = max(medians).item();
  const double n = static_cast<double>(steps);
  const double comm_ms = comm_ns / 1e6 / n, wait_ms = wait_ns / 1e6 / n;
  if (world.rank == 0) {
    std::printf(
        "result ranks=%d threads=%d step_ms=%.3f samples_s=%.1f comm_calls=%.1f comm_kib=%.1f "
        "comm_ms=%.3f "
        "hidden_pct=%.1f\n",
        world.size, threads, step_ms, batch / (step_ms / 1e3), calls / n, bytes / 1024.0 / n,
        comm_ms, comm_ms > 0 ? 100.0 * std::max(0.0, comm_ms - wait_ms) / comm_ms : 0.0);
  }
  return 0;
}

Result parse(const std::string& line) {
  Result r;
  std::sscanf(line.c_str(),
              "result ranks=%d threads=%d step_ms=%lf samples_s=%lf comm_calls=%lf comm_kib=%lf "
              "comm_ms=%lf hidden_pct=%lf",
              &r.ranks, &r.threads, &r.step_ms, &r.samples_s, &r.comm_calls, &r.comm_kib,
              &r.comm_ms, &r.hidden_pct);
  return r;
}

std::vector<int64_t> list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// Runs this program under mpirun for each rank count and thread count; prints the table.
int driver(const examples::Args& args, const std::string& self,
           const std::vector<std::string>& forwarded) {
  std::vector<Result> results;
  for (int64_t threads : list(args.get("threads", "1"))) {
    for (int64_t ranks : list(args.get("ranks", "1,2,4"))) {
      std::string cmd = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " +
                        args.get("mpirun", "mpirun") + " --oversubscribe --bind-to none -np " +
                        std::to_string(ranks) + " " + self + " --worker" + " --threads " +
                        std::to_string(threads);
      for (const std::string& a : forwarded) cmd += " " + a;
      FILE* pipe = popen(cmd.c_str(), "r");
      if (!pipe) examples::usage_error(args.program(), "cannot run " + cmd);
      char line[1024];
      Result r;
      bool found = false;
      while (std::fgets(line, sizeof line, pipe))
        if (std::string(line).rfind("result ", 0) == 0) r = parse(line), found = true;
      if (pclose(pipe) != 0 || !found) {
        std::fprintf(stderr, "%s: error: %s failed\n", args.program().c_str(), cmd.c_str());
        return 1;
      }
      results.push_back(r);
    }
  }
  std::printf("%-6s %-8s %10s %10s %11s %8s %10s %9s %8s\n", "ranks", "threads", "step_ms",
              "samples/s", "efficiency", "allreds", "KiB/step", "comm_ms", "hidden");
  for (const Result& r : results) {
    double base = 0;
    for (const Result& b : results)
      if (b.ranks == 1 && b.threads == r.threads) base = b.step_ms;
    std::printf("%-6d %-8d %10.2f %10.1f %10.0f%% %8.1f %10.1f %9.2f %7.0f%%\n", r.ranks, r.threads,
                r.step_ms, r.samples_s, base > 0 ? 100.0 * base / (r.ranks * r.step_ms) : 0.0,
                r.comm_calls, r.comm_kib, r.comm_ms, r.hidden_pct);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> flags = {"worker",  "model", "ranks",  "threads",
                                          "batch",   "steps", "length", "bucket-kib",
                                          "overlap", "mode",  "mpirun"};
  const examples::Args args(argc, argv, flags);
  return examples::guarded(args, [&] {
    if (!args.get("worker").empty() || dist::launched()) return worker(args);
    std::vector<std::string> forwarded;
    for (const char* k : {"model", "batch", "steps", "length", "bucket-kib", "overlap", "mode"})
      if (!args.get(k).empty()) forwarded.push_back(std::string("--") + k + " " + args.get(k));
    return driver(args, argv[0], forwarded);
  });
}
