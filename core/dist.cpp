#include "core/dist.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "core/error.h"

namespace encore::dist {

namespace {

struct State {
  std::recursive_mutex mutex;  // recursive: loading runs the plugin's register_engine
  Engine* engines[kNumDeviceTypes] = {};
  bool tried_mpi = false, tried_nccl = false;
  std::string mpi_status, nccl_status;
  bool initialized = false;
  Group group;
  std::atomic<double> timeout{0.0};
};

State& state() {
  static State* s = new State();  // never destroyed: engines may run until the process exits
  return *s;
}

std::string library_path(const char* env, const char* file) {
  if (const char* path = std::getenv(env); path && *path) return path;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&mpi_plugin_path), &self) && self.dli_fname)
    return (std::filesystem::path(self.dli_fname).parent_path() / file).string();
  return file;
}

// Loads a plugin once; returns why it did not load (empty when it did).
std::string load(const std::string& path, const char* what) {
  if (path.empty())
    return detail::cat("this build has no ", what, " plugin (", what,
                       " was not found when it was configured)");
  if (!std::filesystem::exists(path))
    return detail::cat("no ", what, " plugin: ", path, " not found");
  // Never closed: its engine serves until the process exits. RTLD_GLOBAL: MPI libraries load
  // components of their own that expect libmpi's symbols to be global.
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
    const char* error = dlerror();
    return detail::cat("the ", what, " plugin ", path,
                       " failed to load: ", error ? error : "unknown error");
  }
  return {};
}

Engine* load_mpi(State& s) {
  if (!s.tried_mpi) {
    s.tried_mpi = true;
    s.mpi_status = load(mpi_plugin_path(), "MPI");
    if (s.mpi_status.empty() && !s.engines[static_cast<int>(DeviceType::CPU)])
      s.mpi_status = "the MPI plugin " + mpi_plugin_path() + " loaded but registered no engine";
  }
  return s.engines[static_cast<int>(DeviceType::CPU)];
}

// NCCL serves CUDA tensors in a launched group whose process has the CUDA backend; without it,
// a collective on a CUDA tensor says so (engine()). Returns why it is not serving (empty when it
// is).
std::string load_nccl(State& s) {
  if (!cuda_built()) return "this build has no CUDA backend";
  if (s.tried_nccl) return s.engines[static_cast<int>(DeviceType::CUDA)] ? "" : s.nccl_status;
  s.tried_nccl = true;
#ifdef ENCORE_NCCL_PLUGIN
  s.nccl_status = load(library_path("ENCORE_NCCL_PLUGIN", ENCORE_NCCL_PLUGIN), "NCCL");
#else
  s.nccl_status =
      "this build has no NCCL plugin (NCCL or MPI was not found when it was configured)";
#endif
  if (!s.nccl_status.empty()) return s.nccl_status;
  Engine*& nccl = s.engines[static_cast<int>(DeviceType::CUDA)];
  if (!nccl) return s.nccl_status = "the NCCL plugin loaded but registered no engine";
  try {
    nccl->connect();
  } catch (const std::exception& e) {
    nccl = nullptr;  // a communicator that failed to form serves nothing
    s.nccl_status = e.what();
    throw;
  }
  return {};
}

// $ENCORE_DIST: "mpi" (a launched world), "none" (a group of one), "nccl" (a world of one on
// NCCL, no launcher), or unset (decided by the launcher's variables).
std::string_view forced_world() {
  const char* forced = std::getenv("ENCORE_DIST");
  const std::string_view v = forced ? forced : "";
  ENCORE_CHECK(v.empty() || v == "mpi" || v == "none" || v == "nccl", ValueError,
               "[dist.init] ENCORE_DIST must be 'mpi', 'none' or 'nccl', got '", v, "'");
  return v;
}

}  // namespace

const char* name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view s, const char* fn) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max})
    if (s == name(op)) return op;
  throw ValueError(detail::cat("[", fn, "] op must be 'sum', 'mean' or 'max', got '", s, "'"));
}

bool register_engine(DeviceType type, Engine& engine) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.engines[static_cast<int>(type)] = &engine;
  return true;
}

bool launched() {
  if (const std::string_view forced = forced_world(); !forced.empty()) return forced == "mpi";
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (const char* v = std::getenv(var); v && *v) return true;
  return false;
}

Group init() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.initialized) return s.group;
  const bool nccl_alone = forced_world() == "nccl";
  if (launched()) {
    Engine* mpi = load_mpi(s);
    ENCORE_CHECK(mpi, UnsupportedError,
                 "[dist.init] this process was started by a launcher (mpirun, srun) but MPI is "
                 "unavailable: ",
                 s.mpi_status);
    mpi->connect();
    s.group = {mpi->rank(), mpi->size(), mpi->backend()};
  } else if (nccl_alone) {
    s.group = {0, 1, "nccl"};
  }
  s.initialized = true;  // before NCCL connects: it bootstraps over the world
  if (nccl_alone) {
    std::string why;
    try {
      why = cuda_built() && cuda_device_count() == 0
                ? detail::cat("no CUDA device (", cuda::unavailable_reason(), ")")
                : load_nccl(s);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty()) {
      s.initialized = false;  // init() may be called again, and fails the same way
      s.group = {};
      throw UnsupportedError(detail::cat(
          "[dist.init] ENCORE_DIST=nccl (a world of one on NCCL) is unavailable: ", why));
    }
  } else if (s.group.backend != "none") {
    load_nccl(s);
  }
  return s.group;
}

Group world() {
  State& s = state();
  {
    std::lock_guard lock(s.mutex);
    if (s.initialized) return s.group;
  }
  return init();
}

int rank() { return world().rank; }
int size() { return world().size; }

std::string mpi_plugin_path() {
#ifdef ENCORE_MPI_PLUGIN
  return library_path("ENCORE_MPI_PLUGIN", ENCORE_MPI_PLUGIN);
#else
  return {};
#endif
}

std::string unavailable_reason() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  load_mpi(s);
  return s.mpi_status;
}

Engine* engine(Device device, const char* op) {
  // A launched world of one still runs its engines (mpirun -np 1); a world of one on NCCL alone
  // runs NCCL on CUDA tensors and the identity on the CPU's.
  const Group g = world();
  if (g.backend == "none") return nullptr;
  if (g.backend == "nccl" && !device.is_cuda()) return nullptr;
  Engine* e = state().engines[static_cast<int>(device.type)];
  ENCORE_CHECK(
      e, UnsupportedError, "[", op, "] no engine runs collectives on ", device.str(),
      device.is_cuda()
          ? " tensors: NCCL is not available (libencore_nccl.so was not built or did not load)"
          : " tensors");
  return e;
}

void set_timeout(double seconds) {
  ENCORE_CHECK(seconds > 0 && seconds < 1e9, ValueError,
               "[dist.set_timeout] the timeout must be > 0 seconds, got ", seconds);
  state().timeout.store(seconds);
}

double timeout() {
  State& s = state();
  double t = s.timeout.load();
  if (t > 0) return t;
  t = 300.0;
  if (const char* env = std::getenv("ENCORE_DIST_TIMEOUT"); env && *env) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end != env && *end == '\0' && v > 0) t = v;
  }
  s.timeout.store(t);
  return t;
}

void barrier() {
  Engine* e = engine(Device::cpu(), "barrier");
  if (!e) return;
  static char token;  // barriers are serialized by the engine: one key serves all
  Collective c;
  c.kind = Collective::Kind::Barrier;
  c.out = &token;
  c.op_name = "barrier";
  e->run_now(c);
}

namespace {

// Runs a blocking all_gather of `bytes` bytes per rank through the CPU engine.
std::vector<char> gather_bytes(Engine& e, const void* in, int64_t bytes, const char* op) {
  std::vector<char> out(static_cast<size_t>(bytes * e.size()));
  Collective c;
  c.kind = Collective::Kind::AllGather;
  c.in = in;
  c.out = out.data();
  c.dtype = DType::Int32;  // as 4-byte words: every size gathered here is a multiple of 4
  c.count = bytes / 4;
  c.op_name = op;
  e.run_now(c);
  return out;
}

}  // namespace

void check_agreement(uint64_t hash, std::string_view description) {
  Engine* e = engine(Device::cpu(), "trace");
  if (!e) return;
  const std::vector<char> hashes = gather_bytes(*e, &hash, sizeof hash, "trace");
  bool same = true;
  for (int r = 1; r < e->size(); ++r)
    same &= std::memcmp(&hashes[0], &hashes[r * sizeof hash], sizeof hash) == 0;
  if (same) return;
  // Every rank learns every description (cut to a fixed size), so each error names all sides.
  constexpr int64_t kText = 2048;
  std::vector<char> text(kText, '\0');
  std::memcpy(text.data(), description.data(), std::min<size_t>(description.size(), kText - 1));
  const std::vector<char> all = gather_bytes(*e, text.data(), kText, "trace");
  std::string msg =
      detail::cat("[trace] rank ", e->rank(), " of ", e->size(),
                  ": the ranks traced different collectives for this step, and replaying would "
                  "deadlock (another input length, or another branch taken on some rank):");
  for (int r = 0; r < e->size(); ++r)
    msg += detail::cat("\n  rank ", r, ": ", std::string(&all[r * kText]));
  throw DistributedError(msg);
}

}  // namespace encore::dist
