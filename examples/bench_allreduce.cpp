// encore's all_reduce against the MPI library's own MPI_Allreduce on the same buffers, in the
// same run, between the ranks mpirun started (float32, 1 KiB to 64 MiB):
//
//   mpirun -np 2 bench_allreduce [--rounds 20] [--max-mib 64]
//
// Each round times both, in alternating order, after a barrier; rank 0 prints the medians and
// their ratio. encore's call is the whole op: dispatch, the output's allocation, the hop to the
// engine's thread and back. The program calls MPI itself between encore's collectives, which
// the engine's MPI_THREAD_SERIALIZED allows (core/mpi/engine.cpp).
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "common.h"
#include "core/dist.h"
#include "core/ledger.h"
#include "ops/collective.h"
#include "ops/ops.h"

int main(int argc, char** argv) {
  const examples::Args args(argc, argv, {"rounds", "max-mib"});
  return examples::guarded(args, [&] {
    using namespace encore;
    const dist::Group world = dist::init();
    const int64_t rounds = args.num("rounds", 20), max_bytes = args.num("max-mib", 64) << 20;
    if (world.rank == 0) {
      std::printf("all_reduce (sum, float32) between %d ranks: medians of %lld rounds; load %s",
                  world.size, static_cast<long long>(rounds), [] {
                    static char load[128] = "?\n";
                    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
                      if (!std::fgets(load, sizeof load, f)) load[0] = '\0';
                      std::fclose(f);
                    }
                    return load;
                  }());
      std::printf("%10s %12s %12s %8s\n", "bytes", "encore_ms", "MPI_ms", "ratio");
    }
    for (int64_t bytes = 1024; bytes <= max_bytes; bytes *= 16) {
      const int64_t n = bytes / 4;
      const Tensor x = full({n}, 1.0 + world.rank, DType::Float32);
      std::vector<float> out(static_cast<size_t>(n));
      std::vector<double> mine, theirs;
      auto time_encore = [&] {
        MPI_Barrier(MPI_COMM_WORLD);
        const int64_t t = now_ns();
        const Tensor y = dist::all_reduce(x);
        mine.push_back((now_ns() - t) / 1e6);
      };
      auto time_mpi = [&] {
        MPI_Barrier(MPI_COMM_WORLD);
        const int64_t t = now_ns();
        MPI_Allreduce(x.data_ptr(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
        theirs.push_back((now_ns() - t) / 1e6);
      };
      for (int64_t r = 0; r < rounds + 2; ++r) {  // the first two rounds warm up
        if (r % 2)
          time_encore(), time_mpi();
        else
          time_mpi(), time_encore();
        if (r < 2) mine.clear(), theirs.clear();
      }
      if (world.rank == 0)
        std::printf("%10lld %12.4f %12.4f %7.2fx\n", static_cast<long long>(bytes),
                    examples::median(mine), examples::median(theirs),
                    examples::median(mine) / examples::median(theirs));
    }
    return 0;
  });
}
