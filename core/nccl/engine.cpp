// The NCCL engine (libencore_nccl.so): collectives on CUDA tensors, loaded by dist::init() in a
// launched group when the CUDA backend is present. Its communicator is bootstrapped over the MPI
// engine (rank 0's ncclUniqueId broadcast to every rank), as Horovod does; this library links
// NCCL and the CUDA runtime, never MPI. ENCORE_DIST=nccl makes a world of one on NCCL without a
// launcher (the GPU check's: NCCL captured in a CUDA Graph on a machine that has no MPI).
//
// Each collective runs on a communication stream of the engine's own: start() orders it after
// the caller's stream with an event, wait() orders the caller's stream after it with another.
// Inside a CUDA Graph capture the same calls fork the capture onto the communication stream and
// join it back, so the captured step overlaps a bucket's all-reduce with the rest of the
// backward (NCCL supports stream capture since 2.9). The host never blocks: a peer that never
// arrives shows as a stall at the next synchronization, which NCCL's own watchdog settings
// (NCCL_* environment) govern, not dist::timeout().
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "core/dist.h"
#include "core/error.h"

namespace encore::dist {

namespace {

void nccl_check(ncclResult_t status, const char* op, const char* call) {
  if (status == ncclSuccess) return;
  throw DistributedError(detail::cat("[", op, "] ", call, " failed: ", ncclGetErrorString(status)));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    case DType::Int32:
      return ncclInt32;
    case DType::Int64:
      return ncclInt64;
  }
  return ncclChar;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Mean:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
  }
  return ncclSum;
}

// The GPU of this rank among those of its machine: the launcher's local rank.
int local_rank(int rank) {
  for (const char* var :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK"})
    if (const char* v = std::getenv(var); v && *v) return std::atoi(v);
  return rank;
}

class NcclEngine final : public Engine {
 public:
  void connect() override {
    // The MPI engine in a launched world; none in a world of one on NCCL alone (ENCORE_DIST=nccl).
    Engine* mpi = engine(Device::cpu(), "dist.init");
    rank_ = mpi ? mpi->rank() : 0;
    size_ = mpi ? mpi->size() : 1;
    const int devices = cuda::device_count();
    if (devices == 0) return;  // CUDA tensors cannot exist here: nothing to serve
    device_ = local_rank(rank_) % devices;
    ncclUniqueId id{};
    if (rank_ == 0) nccl_check(ncclGetUniqueId(&id), "dist.init", "ncclGetUniqueId");
    if (mpi) {
      static_assert(sizeof id % 4 == 0);
      Collective c;
      c.kind = Collective::Kind::Broadcast;
      c.in = c.out = &id;
      c.dtype = DType::Int32;
      c.count = sizeof id / 4;
      c.op_name = "dist.init";
      mpi->start(c);
      mpi->wait(&id);
    }
    ENCORE_CUDA_CHECK("dist.init", cudaSetDevice(device_));
    nccl_check(ncclCommInitRank(&comm_, size_, id, rank_), "dist.init", "ncclCommInitRank");
    ENCORE_CUDA_CHECK("dist.init", cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  std::string describe() const override {
    int v = 0;
    ncclGetVersion(&v);
    return detail::cat("NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100);
  }

  void start(const Collective& c) override {
    ENCORE_CHECK(comm_, UnsupportedError, "[", c.op_name, "] NCCL found no GPU on this rank");
    ENCORE_CHECK(c.device.index == device_, DeviceError, "[", c.op_name, "] rank ", rank_,
                 " runs collectives on cuda:", device_, " (its local rank), got a tensor on ",
                 c.device.str());
    ENCORE_CHECK(c.kind != Collective::Kind::Barrier, UnsupportedError,
                 "[barrier] runs on the CPU engine");
    std::lock_guard lock(mutex_);
    ENCORE_CHECK(!pending_.contains(c.out), ValueError, "[", c.op_name,
                 "] a collective into this buffer is still running");
    Pending p;
    if (!free_.empty()) {
      p = free_.back();
      free_.pop_back();
    } else {
      ENCORE_CUDA_CHECK(c.op_name, cudaEventCreateWithFlags(&p.ready, cudaEventDisableTiming));
      ENCORE_CUDA_CHECK(c.op_name, cudaEventCreateWithFlags(&p.done, cudaEventDisableTiming));
    }
    pending_[c.out] = p;
    const auto stream = static_cast<cudaStream_t>(c.stream);
    ENCORE_CUDA_CHECK(c.op_name, cudaEventRecord(p.ready, stream));
    ENCORE_CUDA_CHECK(c.op_name, cudaStreamWaitEvent(comm_stream_, p.ready, 0));
    const ncclDataType_t t = nccl_type(c.dtype);
    const size_t n = static_cast<size_t>(c.count);
    switch (c.kind) {
      case Collective::Kind::AllReduce:
        nccl_check(ncclAllReduce(c.in, c.out, n, t, nccl_op(c.op), comm_, comm_stream_), c.op_name,
                   "ncclAllReduce");
        break;
      case Collective::Kind::Broadcast:
        nccl_check(ncclBroadcast(c.in, c.out, n, t, c.root, comm_, comm_stream_), c.op_name,
                   "ncclBroadcast");
        break;
      case Collective::Kind::AllGather:
        nccl_check(ncclAllGather(c.in, c.out, n, t, comm_, comm_stream_), c.op_name,
                   "ncclAllGather");
        break;
      case Collective::Kind::Barrier:
        break;
    }
    ENCORE_CUDA_CHECK(c.op_name, cudaEventRecord(p.done, comm_stream_));
  }

  // The caller's stream waits for the collective; the host does not (see the file comment).
  void wait(const void* out) override {
    std::lock_guard lock(mutex_);
    const auto it = pending_.find(out);
    ENCORE_CHECK(it != pending_.end(), ValueError,
                 "[collective] no collective was started into this buffer");
    const Pending p = it->second;
    pending_.erase(it);
    free_.push_back(p);  // recorded again only by a later start, after this wait was queued
    ENCORE_CUDA_CHECK("collective", cudaStreamWaitEvent(cuda::stream(device_), p.done, 0));
  }

  static NcclEngine& instance() {
    static NcclEngine* e = new NcclEngine();  // never destroyed, as the MPI engine
    return *e;
  }

 private:
  // The two events of a running collective, by result buffer; reused once waited for.
  struct Pending {
    cudaEvent_t ready = nullptr, done = nullptr;
  };
  std::mutex mutex_;
  std::unordered_map<const void*, Pending> pending_;
  std::vector<Pending> free_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
};

const bool kRegistered = register_engine(DeviceType::CUDA, NcclEngine::instance());

}  // namespace

}  // namespace encore::dist
