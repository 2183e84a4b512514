// The MPI engine (libencore_mpi.so): the CPU's collectives and the launcher's interface. Only
// the MPI standard API, so Open MPI and MPICH both serve.
//
// One communication thread makes every MPI call of encore, MPI_Init and MPI_Finalize included
// (MPI_THREAD_FUNNELED would do; it asks for SERIALIZED so that a program may call MPI itself
// between encore's collectives). Collectives run on it in the
// order callers start them, which is the same on every rank, so an all-reduce started in the
// middle of the backward pass runs there while the caller goes on computing, and a later
// blocking collective can never overtake it. Callers wait with a deadline (dist::timeout()):
// a peer that raised, died or runs other collectives makes the wait fail with a
// DistributedError instead of hanging; the engine then refuses everything after.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/dist.h"
#include "core/error.h"
#include "core/ledger.h"

namespace encore::dist {

namespace {

const char* kind_name(const Collective& c) {
  if (c.op_name && *c.op_name) return c.op_name;
  switch (c.kind) {
    case Collective::Kind::AllReduce:
      return "all_reduce";
    case Collective::Kind::Broadcast:
      return "broadcast";
    case Collective::Kind::AllGather:
      return "all_gather";
    case Collective::Kind::Barrier:
      return "barrier";
  }
  return "collective";
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int32:
      return MPI_INT32_T;
    case DType::Int64:
      return MPI_INT64_T;
  }
  return MPI_BYTE;
}

void check(int status, const Collective& c, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(status, text, &len);
  throw DistributedError(
      detail::cat("[", kind_name(c), "] ", call, " failed: ", std::string(text, len)));
}

// The mean divides the sum by the group size (correctly rounded, as a one-process mean over the
// whole batch divides by its size).
template <class T> void divide(void* data, int64_t n, int size) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<T>(size);
}

class MpiEngine final : public Engine {
 public:
  void connect() override {
    thread_ = std::thread([this] { loop(); });
    thread_.detach();  // the engine is never destroyed; a thread stuck in MPI must not block exit
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return connected_ || !connect_error_.empty(); });
    if (!connect_error_.empty()) throw DistributedError(connect_error_);
    std::atexit([] { instance().finalize(); });
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }
  std::string describe() const override { return library_; }

  void start(const Collective& c) override {
    std::lock_guard lock(mutex_);
    ENCORE_CHECK(broken_.empty(), DistributedError, "[", kind_name(c), "] rank ", rank_,
                 ": communication failed earlier (", broken_, "); no collective runs after that");
    auto job = std::make_shared<Job>();
    job->c = c;
    ENCORE_CHECK(jobs_.emplace(c.out, job).second, ValueError, "[", kind_name(c),
                 "] a collective into this buffer is still running");
    queue_.push_back(job);
    queued_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
  }

  void wait(const void* out) override {
    const int64_t begin = now_ns();
    std::unique_lock lock(mutex_);
    const auto it = jobs_.find(out);
    ENCORE_CHECK(it != jobs_.end(), ValueError,
                 "[collective] no collective was started into this buffer");
    const std::shared_ptr<Job> job = it->second;
    // A short collective finishes within microseconds: waiting for it by spinning (and yielding
    // the core) first costs far less than a sleep and a wake-up through the condition variable.
    lock.unlock();
    while (!job->done.load(std::memory_order_acquire) && now_ns() - begin < kSpinNs)
      std::this_thread::yield();
    lock.lock();
    const double seconds = timeout();
    const bool finished = cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                                       [&] { return job->done.load(); });
    Ledger::global().add(Counter::CommWaitNs, now_ns() - begin);
    if (!finished) {
      lock.unlock();
      throw timed_out(job->c);
    }
    jobs_.erase(it);
    if (!job->error.empty()) throw DistributedError(job->error);
  }

  // A blocking collective while nothing is queued runs on the caller's thread: no hand-off to
  // the communication thread (whose wake-up, on a busy machine, cost more than a small
  // collective), and MPI_THREAD_SERIALIZED holds, since the thread takes no job meanwhile.
  void run_now(const Collective& c) override {
    std::unique_lock lock(mutex_);
    ENCORE_CHECK(broken_.empty(), DistributedError, "[", kind_name(c), "] rank ", rank_,
                 ": communication failed earlier (", broken_, "); no collective runs after that");
    if (!queue_.empty() || running_) {
      lock.unlock();
      start(c);
      wait(c.out);
      return;
    }
    direct_ = true;
    lock.unlock();
    const int64_t begin = now_ns();
    struct Done {
      MpiEngine& e;
      ~Done() {
        std::lock_guard lock(e.mutex_);
        e.direct_ = false;
        e.cv_.notify_all();
      }
    } done{*this};
    run(c, begin + static_cast<int64_t>(timeout() * 1e9));
    Ledger& ledger = Ledger::global();
    ledger.add(Counter::CommNs, now_ns() - begin);
    ledger.add(Counter::CommWaitNs, now_ns() - begin);
  }

  static MpiEngine& instance() {
    static MpiEngine* e = new MpiEngine();  // never destroyed (see connect)
    return *e;
  }

 private:
  struct Job {
    Collective c;
    std::atomic<bool> done{false};
    std::string error;
  };
  static constexpr int64_t kSpinNs = 50'000;

  void loop() {
    int provided = 0;
    // SERIALIZED, though this thread makes every call of encore: a program may then call MPI
    // itself between encore's collectives (examples/bench_allreduce.cpp compares with
    // MPI_Allreduce).
    int status = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    {
      std::lock_guard lock(mutex_);
      if (status != MPI_SUCCESS) {
        connect_error_ = "[dist.init] MPI_Init_thread failed";
      } else {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(version, &len);
        library_ = std::string(version, strnlen(version, len));
        if (const size_t nl = library_.find_first_of(",\n"); nl != std::string::npos)
          library_.resize(nl);
        connected_ = true;
      }
    }
    cv_.notify_all();
    if (status != MPI_SUCCESS) return;
    for (;;) {
      std::shared_ptr<Job> job;
      // The next collective often follows at once (a step's buckets, a blocking call after its
      // start): look for it a little before sleeping.
      for (const int64_t idle = now_ns();
           queued_.load(std::memory_order_acquire) == 0 && now_ns() - idle < kSpinNs;)
        std::this_thread::yield();
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return (!queue_.empty() && !direct_) || (finalizing_ && !direct_); });
        if (queue_.empty()) break;
        running_ = true;
        job = queue_.front();
        queue_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
      }
      const int64_t begin = now_ns();
      std::string error;
      try {
        run(job->c, 0);
      } catch (const std::exception& e) {
        error = e.what();
      }
      Ledger& ledger = Ledger::global();
      ledger.add(Counter::CommNs, now_ns() - begin);
      {
        std::lock_guard lock(mutex_);
        job->error = std::move(error);
        job->done.store(true, std::memory_order_release);
        running_ = false;
      }
      cv_.notify_all();
    }
    MPI_Finalize();
    std::lock_guard lock(mutex_);
    finalized_ = true;
    cv_.notify_all();
  }

  // Runs `c` with MPI's nonblocking calls, polling until they complete; past `deadline_ns`
  // (0: none) a DistributedError. Polling yields the core after a while: on a machine with more
  // threads than cores, a spinning wait would keep the peer it waits for from running.
  void run(const Collective& c, int64_t deadline_ns) {
    const size_t item = itemsize(c.dtype);
    const MPI_Datatype type = mpi_type(c.dtype);
    // MPI counts are ints: larger buffers go in pieces (all_gather's cannot be split that way).
    constexpr int64_t kPiece = int64_t{1} << 30;
    auto complete = [&](MPI_Request request, const char* call) {
      int done = 0;
      for (int64_t polls = 0;; ++polls) {
        check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), c, call);
        if (done) return;
        if (polls > 1000) std::this_thread::yield();
        if (deadline_ns && (polls & 255) == 0 && now_ns() > deadline_ns) throw timed_out(c);
      }
    };
    MPI_Request r = MPI_REQUEST_NULL;
    switch (c.kind) {
      case Collective::Kind::AllReduce:
        for (int64_t at = 0; at < c.count || at == 0; at += kPiece) {
          const int n = static_cast<int>(std::min(kPiece, c.count - at));
          // In place (a gradient bucket): MPI_IN_PLACE, the standard's way to say so.
          const void* in =
              c.in == c.out ? MPI_IN_PLACE : static_cast<const char*>(c.in) + at * item;
          check(MPI_Iallreduce(in, static_cast<char*>(c.out) + at * item, n, type,
                               c.op == ReduceOp::Max ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD, &r),
                c, "MPI_Iallreduce");
          complete(r, "MPI_Iallreduce");
        }
        if (c.op == ReduceOp::Mean) {
          if (c.dtype == DType::Float32)
            divide<float>(c.out, c.count, size_);
          else if (c.dtype == DType::Float64)
            divide<double>(c.out, c.count, size_);
          else if (c.dtype == DType::Int32)
            divide<int32_t>(c.out, c.count, size_);
          else
            divide<int64_t>(c.out, c.count, size_);
        }
        break;
      case Collective::Kind::Broadcast:
        if (rank_ == c.root && c.in != c.out) std::memcpy(c.out, c.in, c.count * item);
        for (int64_t at = 0; at < c.count || at == 0; at += kPiece) {
          const int n = static_cast<int>(std::min(kPiece, c.count - at));
          check(MPI_Ibcast(static_cast<char*>(c.out) + at * item, n, type, c.root, MPI_COMM_WORLD,
                           &r),
                c, "MPI_Ibcast");
          complete(r, "MPI_Ibcast");
        }
        break;
      case Collective::Kind::AllGather:
        ENCORE_CHECK(c.count <= kPiece, ValueError, "[", kind_name(c),
                     "] at most 2^30 elements per rank, got ", c.count);
        check(MPI_Iallgather(c.in, static_cast<int>(c.count), type, c.out,
                             static_cast<int>(c.count), type, MPI_COMM_WORLD, &r),
              c, "MPI_Iallgather");
        complete(r, "MPI_Iallgather");
        break;
      case Collective::Kind::Barrier:
        check(MPI_Ibarrier(MPI_COMM_WORLD, &r), c, "MPI_Ibarrier");
        complete(r, "MPI_Ibarrier");
        break;
    }
  }

  DistributedError timed_out(const Collective& c) {
    {
      std::lock_guard lock(mutex_);
      broken_ = detail::cat(kind_name(c), " timed out");
    }
    return DistributedError(
        detail::cat("[", kind_name(c), "] rank ", rank_, " of ", size_,
                    ": the collective did not finish within ", timeout(),
                    " s: another rank raised an error, exited, or is running different collectives "
                    "(dist.set_timeout / ENCORE_DIST_TIMEOUT sets the limit)"));
  }

  // At normal exit: MPI_Finalize on the communication thread (a launcher reports a process
  // that exits without it as failed). Not after a timeout: the thread may be stuck in a
  // collective that will never finish, and the launcher should see this process fail anyway.
  void finalize() {
    std::unique_lock lock(mutex_);
    if (!connected_ || !broken_.empty()) return;
    finalizing_ = true;
    cv_.notify_all();
    // MPI_Finalize waits for the peers. Longer than a collective's timeout, so that a peer stuck
    // in a collective this rank skipped reports its own timeout before the launcher ends it.
    cv_.wait_for(lock, std::chrono::duration<double>(2 * timeout() + 5),
                 [&] { return finalized_; });
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::unordered_map<const void*, std::shared_ptr<Job>> jobs_;
  std::atomic<int> queued_{0};
  bool connected_ = false, finalizing_ = false, finalized_ = false;
  bool running_ = false;  // the thread runs a job
  bool direct_ = false;   // a caller runs a collective itself (run_now)
  std::string connect_error_, broken_, library_;
  int rank_ = 0, size_ = 1;
};

const bool kRegistered = register_engine(DeviceType::CPU, MpiEngine::instance());

}  // namespace

}  // namespace encore::dist
