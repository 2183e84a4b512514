// Shape bucketing for traced functions: a call whose length along one axis varies is padded up
// to the next of a few sizes, so a handful of graphs serve every length. Padding is only
// allowed where it is exact: when a bucket's graph is built, it is run on probes whose padded
// positions hold different values (NaN, +1e4, -1e4) from the state the call started in, and
// every result (outputs, parameter updates, gradients, optimizer and generator state) must be
// bitwise the same on the real positions. A function whose results depend on the padding
// (pooling or a loss over the padded axis, a recurrence that runs backwards from the padded
// end, 'same' convolutions, Flatten) is refused with an error naming the results it spoils;
// outputs are trimmed only on the axes the probes show to derive from the padded one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/plan.h"
#include "graph/signature.h"

namespace encore {

/// How argument shapes map to cached graphs.
struct ShapePolicy {
  enum class Kind { Exact, Bucket };
  Kind kind = Kind::Exact;
  int axis = 1;
  std::vector<int64_t> sizes = {};
  std::vector<int> args = {0};

  /// One graph per exact signature (the default).
  static ShapePolicy exact() { return {}; }
  /// Pads the tensor arguments `args` with zeros along `axis` up to the next size in `sizes`
  /// (lengths above the largest size trace exactly). Exact or refused: a bucket's first
  /// trace checks that no result depends on the padded positions (see graph/bucket.h) and
  /// raises an error naming what does otherwise; outputs whose axis derives from the padded
  /// one are trimmed back. Length-equivariant functions qualify (elementwise and per-step
  /// layers, stacks of 'valid' or 'causal' Conv1D, forward LSTMs returning sequences);
  /// whatever pools, averages or recurs backwards over the padded axis does not.
  static ShapePolicy bucket(int axis, std::vector<int64_t> sizes, std::vector<int> args = {0});
  std::string str() const;
};

namespace graph {

/// A call mapped to its bucket.
struct BucketedCall {
  std::vector<Arg> args;  // the padded arguments (the call's own when nothing is padded)
  int axis = 0;           // the bucketed axis (normalized)
  int64_t length = 0;     // the call's length along it
  int64_t bucket = 0;     // the size it is padded to (== length above the largest bucket)
  int64_t shortest = 0;   // the shortest length this bucket serves
  bool bucketed = false;  // false: above the largest bucket, traced exactly
  int64_t pad() const { return bucket - length; }
};

/// Pads the policy's arguments of `call`; `name` names the traced function in errors.
BucketedCall bucket_call(const ShapePolicy& policy, const std::vector<Arg>& call,
                         const std::string& name);

/// Checks that `plan`, traced for `b.args`, gives results independent of the padding of every
/// length its bucket serves; returns, per output, the axis to trim (-1: none). Leaves every
/// buffer the plan writes as it found it. Throws ValueError naming the spoiled results.
std::vector<int> check_bucket_exact(Plan& plan, const ShapePolicy& policy, const BucketedCall& b,
                                    const std::string& name,
                                    const std::vector<std::string>& arg_names);

/// Trims `pad` positions off the end of each output along its trim axis.
void trim_outputs(std::vector<Tensor>& out, const std::vector<int>& trim_axes, int64_t pad);

}  // namespace graph
}  // namespace encore
