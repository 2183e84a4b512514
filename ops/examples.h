// Running an op's example calls (OpDef::examples): the test cases of each op that drive the float64
// gradcheck, the CPU/CUDA parity test and the eager/replay test in C++
// (tests/cpp/test_op_table.cpp), and the call of its Python function (tests/python).
#pragma once

#include <span>

#include "ops/registry.h"

namespace encore {

/// The example's inputs: floating ones in `float_dtype`, all on `device`, drawn from `seed`
/// (the same values in C++ and Python tests).
std::vector<Tensor> example_inputs(const Example& e, DType float_dtype, Device device,
                                   uint64_t seed = 1);
/// One input as an example describes it (the layer table's too, nn/layer.h).
Tensor example_input(const ExampleInput& input, DType float_dtype, Device device,
                     uint64_t seed = 1);
/// The example's keyword arguments, with `device` added for functions that take one.
std::vector<std::pair<std::string, ArgValue>> example_keywords(const OpDef& def, const Example& e,
                                                               Device device);
/// Calls the op as example `e` of it says: its public function with the example's arguments,
/// or the example's own call for internal ops. Random ops draw from the default generators.
Outputs run_example(const OpDef& def, const Example& e, std::span<const Tensor> inputs,
                    Device device = Device::cpu());

}  // namespace encore
