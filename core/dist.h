// Data parallelism across processes: the group a launcher started (mpirun, srun) and the engines
// that run its collectives. Like the CUDA backend, the engines are plugins: libencore links no
// MPI. libencore_mpi.so (core/mpi/) is the CPU engine and the launcher's interface; it links
// the MPI library and registers itself here from its static initializer. libencore_nccl.so
// (core/nccl/) is the GPU engine: NCCL, bootstrapped over the MPI engine. A process that no
// launcher started is a group of one, where every collective is the identity and no plugin is
// needed, so one program runs alone or launched.
//
// The collectives themselves are ops (ops/collective.h) with an external effect: each runs
// exactly once per call, eager or traced, on every rank, in the same order. An engine runs them
// in the order they are started, on a thread of its own (the CPU) or a stream of its own
// (CUDA), so a traced step overlaps a bucket's all-reduce with the rest of its backward.
#pragma once

#include "core/cxx20.h"

#include <cstdint>
#include <string>
#include <string_view>

#include "core/device.h"
#include "core/dtype.h"

namespace encore::dist {

enum class ReduceOp : uint8_t { Sum, Mean, Max };
const char* name(ReduceOp op);
/// "sum", "mean", "max"; a ValueError naming `fn` otherwise.
ReduceOp parse_reduce_op(std::string_view s, const char* fn);

/// One collective as an engine runs it: `in` holds `count` elements of `dtype` on this rank;
/// all_reduce and broadcast write `count` elements into `out`, all_gather size() * count.
struct Collective {
  enum class Kind : uint8_t { AllReduce, Broadcast, AllGather, Barrier };
  Kind kind = Kind::AllReduce;
  const void* in = nullptr;
  void* out = nullptr;
  int64_t count = 0;
  DType dtype = DType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int root = 0;
  Device device;
  /// CUDA: the stream (cudaStream_t) the caller's work is ordered on; the engine orders the
  /// collective after it, and wait() orders the stream after the collective.
  void* stream = nullptr;
  /// The op, for error messages.
  const char* op_name = "";
};

/// What the core asks of a communication engine (one per device type).
class Engine {
 public:
  virtual ~Engine() = default;
  /// Joins the group the launcher made (MPI_Init; NCCL's communicator). Called once, by init().
  virtual void connect() = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "nccl".
  virtual const char* backend() const = 0;
  /// The library as loaded, e.g. "Open MPI v4.1.4".
  virtual std::string describe() const = 0;
  /// Queues `c` behind every collective started before it on this rank and returns at once.
  /// `c.in` and `c.out` must stay valid until wait(c.out) returns.
  virtual void start(const Collective& c) = 0;
  /// Blocks until the collective that writes `out` has finished; throws its failure, or a
  /// DistributedError when it did not finish within timeout() (a peer raised, died or runs
  /// other collectives). After a timeout the engine refuses every later collective.
  virtual void wait(const void* out) = 0;
  /// A blocking collective: start and wait, or the same on the calling thread when nothing is
  /// queued before it (the MPI engine).
  virtual void run_now(const Collective& c) {
    start(c);
    wait(c.out);
  }
};

/// Called once by an engine plugin's static initializer; returns true.
bool register_engine(DeviceType type, Engine& engine);

/// The world: this process's rank, the number of processes, the engine's name ("mpi"; "none"
/// for a group of one; "nccl" for a world of one on NCCL, ENCORE_DIST=nccl).
struct Group {
  int rank = 0;
  int size = 1;
  std::string backend = "none";
};

/// Joins the world (idempotent). Under a launcher it loads the MPI plugin and connects; a
/// launched process where the plugin cannot load gets an UnsupportedError with
/// unavailable_reason(). Without a launcher (or with ENCORE_DIST=none) it is a group of one.
/// ENCORE_DIST=nccl: a world of one whose CUDA collectives run through NCCL (the CPU's are the
/// identity), with no launcher and no MPI; an UnsupportedError says why when it cannot form (no
/// GPU, no NCCL plugin). Any other value of ENCORE_DIST is a ValueError.
Group init();
/// The world; init() on first use.
Group world();
int rank();
int size();
/// Whether a launcher started this process (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK, or
/// ENCORE_DIST=mpi; never with ENCORE_DIST=none or nccl).
bool launched();
/// Why the MPI plugin is not loaded: "no MPI plugin: <path> not found", "the MPI plugin <path>
/// failed to load: <dlerror>"; empty when it is (loads it to find out, without connecting).
std::string unavailable_reason();
/// Where libencore looks for the MPI plugin: $ENCORE_MPI_PLUGIN, else libencore_mpi.so in
/// libencore's folder (empty in a build without MPI).
std::string mpi_plugin_path();

/// The engine that runs collectives on `device`'s tensors; null in a group of one that no
/// launcher started (a launched world of one runs its engines), and for the CPU in a world of
/// one on NCCL. Throws
/// UnsupportedError for a device type no loaded engine serves (CUDA without NCCL).
Engine* engine(Device device, const char* op);

/// How long a rank waits for a collective before it fails (seconds, > 0): default 300, or
/// $ENCORE_DIST_TIMEOUT.
void set_timeout(double seconds);
double timeout();

/// Waits until every rank reaches it (the identity in a group of one). Not an op: inside a
/// traced function it runs when the function runs eagerly or traces, never in replays.
void barrier();

/// Every rank passes the hash and a description of what it is about to run (a traced graph's
/// signature and its sequence of collectives); when the hashes differ, every rank throws a
/// DistributedError naming each rank's description instead of deadlocking in the first
/// collective that differs. The identity in a group of one.
void check_agreement(uint64_t hash, std::string_view description);

}  // namespace encore::dist
