// The bucket probe: is a bucket's graph exact, for every length it serves? Built-in layers mask
// with the call's true length (graph/lengths.h), but user code between them, plain reductions
// over the steps, or reads of the last step are not something per-layer rules can settle, so
// the first trace of each bucket tests its graph (docs/ARCHITECTURE.md, "Shape policy"). A
// result is exact when it does not depend on any padded entry, wherever that entry comes from:
//  - the padded arguments: the probe fills their padding with three values (64, -64, 0.5);
//  - a registered tensor (a layer's output, e.g. an LSTM's sequences, whose padded steps the
//    layer zeroed): the probe overwrites its padded entries in place, right after the layer,
//    with the same values, so a reader downstream (a Python layer, a mean over the steps, x[:, -1])
//    sees them change;
//  - the padded size itself (a count of the steps, a constant made with the padded shape): the
//    probe compares with the function traced without padding at a shorter length (what eager
//    computes at that length), its valid part, within float rounding.
// Every result (outputs, parameters, gradients, optimizer and generator state, arguments written
// in place) must agree bit for bit between the run as called (zeros) and the three others, and in
// value with the unpadded trace.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/bucket.h"
#include "graph/plan.h"

namespace encore::graph {

/// A tensor registered as carrying the padded axis while the bucket's function traced.
struct Registered {
  int axis = 0;
  size_t node = 0;  // nodes recorded before the registration: where the probe overwrites it
  /// Its valid length from the call's length (a layer's host formula; null: the call's length).
  std::function<int64_t(int64_t)> of_call;
  /// An internal result whose padded entries no reader may use (not masked, not an argument,
  /// not captured state): the probe overwrites them.
  bool overwrite = false;
  Value value, length;  // when `overwrite`: the tensor and its symbolic valid length
};

/// What the probe needs from the trace.
struct BucketProbe {
  const Graph* graph = nullptr;  // as recorded: no passes, written constants not yet restored
  std::vector<Registered> registered;
  std::vector<Trim> known;  // per output: the trim a layer registered (axis -1: none)
  const ShapePolicy* policy = nullptr;
  const BucketedCall* call = nullptr;
  /// The bucket's Plan, run as calls run it (null: built from `graph`; so when the graph has an
  /// external-effect op, which a probe never runs).
  Plan* plan = nullptr;
  std::string name;
  std::vector<std::string> arg_names;
  /// A training-mode dropout draws over the padded shape (graph::note_inexact): the unpadded
  /// comparison cannot hold, and is skipped.
  bool exact_in_distribution_only = false;
  /// Records the function traced without bucketing on `args` (the unpadded arguments of a shorter
  /// call); throws what eager would throw at that length.
  std::function<Graph(const std::vector<Arg>&)> trace_unpadded;
};

struct ProbeResult {
  std::vector<Trim> trims;      // how to trim each output back
  int64_t shortest_served = 1;  // shorter calls are traced exactly (they do what eager does)
};

/// Probes the bucket's graph (leaving every buffer it writes as it found it). Throws ValueError
/// naming the results that depend on the padding, or saying why the graph cannot be probed (an
/// external-effect op without a stand-in, graph/effects.h).
ProbeResult probe_bucket(const BucketProbe& p);

/// The shortest call length at which every registered tensor has a valid entry and the bucket
/// pads (shorter lengths are served exactly): one past the longest failing length of the bucket.
int64_t shortest_served(const std::vector<Registered>& registered, const BucketedCall& b);

}  // namespace encore::graph
