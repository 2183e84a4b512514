// Shape bucketing for traced functions: a call whose length along one axis varies is padded up
// to the next of a few sizes, so a handful of graphs serve every length. Bucketing is exact by
// masking: the call's true length enters the graph as one more input (graph/lengths.h), and
// the layers that read across the padded axis (global pooling, recurrences, 'same'
// convolutions, losses) use it to leave the padding out, exactly as the unpadded eager call
// never sees it. Outputs that carry the padded axis are trimmed back to the call's length. The
// bucket probe (graph/probe.h) is the safety net: a function whose results still depend on the
// padding (user code without a rule) is refused with an error naming the results it spoils; a
// built-in layer that cannot be made exact (Flatten over the padded axis) refuses while tracing,
// naming itself. Lengths a bucket cannot serve (eager refuses them: a window longer than the
// valid steps, length 0) are traced exactly, so they do what eager does.
#pragma once

#include <cstdint>
#include <functional>
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
  /// (lengths above the largest size trace exactly) and passes the true length into the
  /// graph, where the built-in layers and losses mask with it (see graph/bucket.h). Exact or
  /// refused: a bucket's first trace checks that no result depends on the padded positions
  /// and raises an error naming what does otherwise; outputs that carry the padded axis are
  /// trimmed back.
  static ShapePolicy bucket(int axis, std::vector<int64_t> sizes, std::vector<int> args = {0});
  std::string str() const;
};

namespace graph {

/// A call mapped to its bucket.
struct BucketedCall {
  std::vector<Arg> args;         // the padded arguments (the call's own when nothing is padded)
  int axis = 0;                  // the bucketed axis (normalized)
  int64_t length = 0;            // the call's length along it
  int64_t bucket = 0;            // the size it is padded to (== length above the largest bucket)
  int64_t shortest = 0;          // the shortest length this bucket serves
  bool bucketed = false;         // false: above the largest bucket, traced exactly
  int length_arg = -1;           // the index in `args` of the true length, int64 (1,) (-1: none)
  std::vector<int> padded_args;  // the policy's arguments, padded along `axis`
  int64_t pad() const { return bucket - length; }
};

/// How an output is trimmed back after a bucketed call.
struct Trim {
  int axis = -1;  // -1: not trimmed
  /// Its valid size from the call's length (a layer registered it); null: its size less the
  /// padding (found by the probes).
  std::function<int64_t(int64_t)> size;
  int64_t trimmed(int64_t extent, int64_t length, int64_t pad) const {
    return size ? size(length) : extent - pad;
  }
};

/// Pads the policy's arguments of `call` and appends the true length; `name` names the traced
/// function in errors.
BucketedCall bucket_call(const ShapePolicy& policy, const std::vector<Arg>& call,
                         const std::string& name);

/// Trims each output back to its valid size for a call of `length` padded by `pad`.
void trim_outputs(std::vector<Tensor>& out, const std::vector<Trim>& trims, int64_t length,
                  int64_t pad);

}  // namespace graph
}  // namespace encore
