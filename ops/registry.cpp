#include "ops/registry.h"

#include "ops/cpu/kernels.h"

namespace encore {

void define_elementwise_ops();
void define_reduce_ops();
void define_data_ops();
void define_linalg_ops();
void define_nn_ops();
void define_creation_ops();
void define_optim_ops();
#if ENCORE_CUDA
namespace cuda { void register_kernels(); }
#endif

namespace {

constexpr const char* kNames[] = {
#define ENCORE_OP_NAME(name) #name,
    ENCORE_OPS(ENCORE_OP_NAME)
#undef ENCORE_OP_NAME
};

std::array<OpDef, kNumOps>& table() {
  static std::array<OpDef, kNumOps> defs;
  return defs;
}

struct Registry {
  Registry() {
    for (int i = 0; i < kNumOps; ++i) table()[i].name = kNames[i];
    define_elementwise_ops();
    define_reduce_ops();
    define_data_ops();
    define_linalg_ops();
    define_nn_ops();
    define_creation_ops();
    define_optim_ops();
    cpu::register_kernels();
#if ENCORE_CUDA
    cuda::register_kernels();
#endif
  }
};

const std::array<OpDef, kNumOps>& registry() {
  static const Registry init;
  return table();
}

}  // namespace

const OpDef& op_def(OpId op) { return registry()[static_cast<int>(op)]; }
OpDef& mutable_op_def(OpId op) { return table()[static_cast<int>(op)]; }
const char* op_name(OpId op) { return kNames[static_cast<int>(op)]; }
std::span<const OpDef> all_op_defs() { return registry(); }
OpId op_id(const OpDef& def) { return static_cast<OpId>(&def - registry().data()); }

bool TensorRef::contiguous() const { return is_contiguous(shape, strides); }

}  // namespace encore
