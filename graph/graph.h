// The Graph IR a trace produces. Every tensor argument is a `Value`: a strided view of a
// `Buffer`. Buffers are the function's inputs, tensors captured from outside (parameters,
// optimizer state: by reference, updated in place), or internal results that the memory
// planner places in one arena. View ops leave no node: they only change a Value's geometry.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace encore::graph {

enum class BufferKind : uint8_t { Input, External, Internal };

/// A tensor through which the trace saw a captured buffer, as it was when first seen.
struct Owner {
  std::weak_ptr<TensorImpl> tensor;
  bool requires_grad;  // the graph's backward pass depends on it
};

struct Buffer {
  BufferKind kind = BufferKind::Internal;
  size_t nbytes = 0;
  Device device;
  int input = -1;                    // Input: which tensor argument
  std::shared_ptr<Storage> storage;  // External: the captured storage, kept alive
  /// External: every tensor it was seen through. Those alive after the trace are the
  /// caller's (parameters, optimizer state) and are checked for replaced storage.
  std::vector<Owner> owners;
  std::string label;     // "x", "dense.kernel", "dense.kernel.grad", "%12"
  bool written = false;  // some node writes it (parameter updates, generator state)
};

struct Value {
  uint32_t buffer = 0;
  int64_t offset = 0;  // elements
  Shape shape;
  Strides strides;
  DType dtype = DType::Float32;
};

struct Node {
  const OpDef* op;
  Attrs attrs;
  std::vector<Value> in, out;
};

struct Graph {
  std::vector<Buffer> buffers;
  std::vector<Node> nodes;
  std::vector<Value> inputs;   // the traced function's tensor arguments
  std::vector<Value> outputs;  // the tensors it returned

  /// One line per node: "%5 = matmul(%3, dense.kernel)  (32, 64) float32", followed by
  /// "  # <note>" where `note(node index)` is not empty.
  std::string str(const std::function<std::string(size_t)>& note = {}) const;
  /// Graphviz DOT: ops as boxes, buffers as ellipses (captured ones shaded).
  std::string dot() const;
  /// How many nodes of the op named `op` the graph contains (e.g. copies: see problem 4).
  int count(std::string_view op) const;
};

}  // namespace encore::graph
