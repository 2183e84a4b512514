// CUDA kernels of the collective ops (ops/defs/collective.cpp): they hand the call to the world's
// CUDA engine (NCCL, core/nccl/) on the calling thread's stream, which is the capture stream
// inside a CUDA Graph capture, so a traced step's graph holds the NCCL calls. In a group of one
// they copy on the stream.
#include "ops/collective.h"

#include "core/cuda/check.h"
#include "core/dist.h"
#include "core/ledger.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace encore::cuda {
namespace {

using dist::Collective;

Collective describe_call(Collective::Kind kind, const KernelCtx& k, cudaStream_t stream) {
  Collective c;
  c.kind = kind;
  c.in = k.in[0].data;
  c.out = k.out.empty() ? k.in[0].data : k.out[0].data;
  c.count = k.in[0].numel();
  c.dtype = k.in[0].dtype;
  c.op = k.attrs.as<CollectiveAttrs>().op;
  c.root = k.attrs.as<CollectiveAttrs>().root;
  c.device = k.in[0].device;
  c.stream = stream;
  c.op_name = k.op;
  Ledger& ledger = Ledger::global();
  ledger.add(Counter::Collectives, 1);
  ledger.add(Counter::CollectiveBytes, c.count * static_cast<int64_t>(itemsize(c.dtype)));
  return c;
}

void copy_on_stream(const Collective& c, cudaStream_t stream) {
  const size_t bytes = static_cast<size_t>(c.count) * itemsize(c.dtype);
  if (bytes && c.out != c.in)
    ENCORE_CUDA_CHECK(c.op_name,
                      cudaMemcpyAsync(c.out, c.in, bytes, cudaMemcpyDeviceToDevice, stream));
}

// start: the engine orders the collective after the stream's work on its own stream; wait:
// the stream waits for it. A synchronous collective is both.
template <Collective::Kind Kind, bool Start, bool Wait> void collective_cuda(const KernelCtx& k) {
  const OnDevice dev(k);
  const Collective c = describe_call(Kind, k, dev.stream());
  dist::Engine* e = dist::engine(c.device, k.op);
  if (!e) return copy_on_stream(c, dev.stream());
  if (Start) e->start(c);
  if (Wait) e->wait(c.out);
}

void all_reduce_wait_cuda(const KernelCtx& k) {
  const OnDevice dev(k);
  if (dist::Engine* e = dist::engine(k.in[0].device, k.op)) e->wait(k.in[0].data);
}

// Stand-ins (ops/defs/collective.cpp): a group of one's value, copied on the stream.
void stand_in_cuda(const KernelCtx& k) {
  const OnDevice dev(k);
  const size_t bytes = static_cast<size_t>(k.in[0].numel()) * itemsize(k.in[0].dtype);
  const int64_t copies = k.in[0].numel() ? k.out[0].numel() / k.in[0].numel() : 0;
  for (int64_t i = 0; i < copies; ++i)
    ENCORE_CUDA_CHECK(
        k.op, cudaMemcpyAsync(static_cast<char*>(k.out[0].data) + i * bytes, k.in[0].data, bytes,
                              cudaMemcpyDeviceToDevice, dev.stream()));
}
void stand_in_in_place(const KernelCtx&) {}

const bool kRegistered = register_cuda_kernels({
    {"all_reduce", collective_cuda<Collective::Kind::AllReduce, true, true>},
    {"broadcast", collective_cuda<Collective::Kind::Broadcast, true, true>},
    {"all_gather", collective_cuda<Collective::Kind::AllGather, true, true>},
    {"all_reduce_start_", collective_cuda<Collective::Kind::AllReduce, true, false>},
    {"all_reduce_wait_", all_reduce_wait_cuda},
    {"all_reduce_stand_in", stand_in_cuda},
    {"all_gather_stand_in", stand_in_cuda},
    {"all_reduce_start_stand_in_", stand_in_in_place},
    {"all_reduce_wait_stand_in_", stand_in_in_place},
});

}  // namespace
}  // namespace encore::cuda
