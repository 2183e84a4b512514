// to_device: host-to-device, device-to-host and device-to-device copies. The dispatcher runs
// every transfer that involves a GPU here. A strided source is first made dense on its own
// side (CPU copy kernel, or the GPU strided copy), then copied in one piece.
#include <memory>

#include "ops/cuda/copy.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/dispatch.h"

namespace encore::cuda {
namespace {

// Host transfers read or write host memory at the moment of the call, which a captured graph
// could not repeat on replay, and a graph replays on one GPU: refuse such copies in a capture
// instead of recording something else.
void require_not_capturing(Device a, Device b) {
  ENCORE_CHECK(!capturing(), UnsupportedError, "[to_device] copies between ", a.str(), " and ",
               b.str(),
               " cannot be captured into a CUDA Graph; move tensors before the traced function or "
               "return them from it");
}

void to_device_kernel(const KernelCtx& c) {
  const TensorRef& src = c.in[0];
  const TensorRef& dst = c.out[0];  // contiguous
  const size_t nbytes = static_cast<size_t>(dst.numel()) * itemsize(dst.dtype);
  if (nbytes == 0) return;
  if (src.device.is_cpu()) {
    const int device = dst.device.index;
    require_not_capturing(src.device, dst.device);
    if (src.contiguous()) {
      copy_to_device(dst.data, src.data, nbytes, device);
      return;
    }
    std::unique_ptr<char[]> dense(new char[nbytes]);  // operator new: aligned for any dtype
    TensorRef host = dst;
    host.data = dense.get();
    host.device = Device::cpu();
    const TensorRef ins[] = {src}, outs[] = {host};
    copy_op_def().kernels[static_cast<int>(DeviceType::CPU)].run(
        KernelCtx{ins, outs, c.attrs, nullptr, c.op});
    copy_to_device(dst.data, dense.get(), nbytes, device);
    return;
  }

  const int from = src.device.index;
  if (dst.device.is_cuda() && dst.device.index == from) {
    // Within one GPU the strided copy writes dst directly: no temporary, which inside a CUDA
    // Graph capture would be an allocation the graph records.
    const OnDevice dev(from);
    strided_copy(dst, src, dev.stream(), "to_device");
    return;
  }
  require_not_capturing(src.device, dst.device);
  DeviceBuffer dense;
  const void* src_data = src.data;
  if (!src.contiguous()) {
    const OnDevice dev(from);
    dense = DeviceBuffer(nbytes, from);
    TensorRef packed = dst;
    packed.data = dense.data();
    packed.device = src.device;
    strided_copy(packed, src, dev.stream(), "to_device");
    src_data = dense.data();
  }
  if (dst.device.is_cpu()) {
    copy_to_host(dst.data, src_data, nbytes, from);
    return;
  }
  const int to = dst.device.index;
  // Between two GPUs: the copy runs on the destination's stream after the source's queued
  // work, and the source's stream waits for the copy before it may reuse the source memory.
  // An event is recorded on a stream of the device it was created on, so each is made (and
  // recorded) with its stream's device current; waiting on another device's event is allowed.
  Event produced;
  {
    const OnDevice source(from);
    produced = make_event();
    ENCORE_CUDA_CHECK("to_device", cudaEventRecord(produced.get(), source.stream()));
  }
  Event copied;
  {
    const OnDevice dev(to);
    copied = make_event();
    ENCORE_CUDA_CHECK("to_device", cudaStreamWaitEvent(dev.stream(), produced.get(), 0));
    ENCORE_CUDA_CHECK("to_device",
                      cudaMemcpyPeerAsync(dst.data, to, src_data, from, nbytes, dev.stream()));
    ENCORE_CUDA_CHECK("to_device", cudaEventRecord(copied.get(), dev.stream()));
  }
  const OnDevice source(from);
  ENCORE_CUDA_CHECK("to_device", cudaStreamWaitEvent(source.stream(), copied.get(), 0));
}

}  // namespace

const bool kRegistered = register_cuda_kernels({{"to_device", to_device_kernel}});

}  // namespace encore::cuda
