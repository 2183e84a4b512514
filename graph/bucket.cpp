#include "graph/bucket.h"

#include <algorithm>

#include "ops/ops.h"

namespace encore {

ShapePolicy ShapePolicy::bucket(int axis, std::vector<int64_t> sizes, std::vector<int> args) {
  ENCORE_CHECK(!sizes.empty() && !args.empty(), ValueError,
               "[trace] a bucket policy needs sizes and arguments");
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  ENCORE_CHECK(sizes.front() > 0, ValueError, "[trace] bucket sizes must be positive");
  ShapePolicy p;
  p.kind = Kind::Bucket;
  p.axis = axis;
  p.sizes = std::move(sizes);
  p.args = std::move(args);
  return p;
}

std::string ShapePolicy::str() const {
  if (kind == Kind::Exact) return "exact";
  std::string s = detail::cat("bucket(axis ", axis, ", sizes ");
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += '/';
    s += std::to_string(sizes[i]);
  }
  return s + ")";
}

namespace graph {

BucketedCall bucket_call(const ShapePolicy& p, const std::vector<Arg>& call,
                         const std::string& name) {
  BucketedCall b;
  b.length = -1;
  for (int i : p.args) {
    ENCORE_CHECK(
        i >= 0 && static_cast<size_t>(i) < call.size() && std::holds_alternative<Tensor>(call[i]),
        ValueError, "[trace] the bucket policy of '", name, "' names argument ", i,
        ", which is not a tensor argument");
    const Tensor& t = std::get<Tensor>(call[i]);
    b.axis = normalize_axis(p.axis, t.dim(), "trace");
    ENCORE_CHECK(b.length < 0 || t.shape()[b.axis] == b.length, ShapeError,
                 "[trace] bucketed arguments of '", name, "' differ in length along axis ", b.axis);
    b.length = t.shape()[b.axis];
  }
  const auto it = std::lower_bound(p.sizes.begin(), p.sizes.end(), b.length);
  b.bucketed = it != p.sizes.end();
  b.bucket = b.bucketed ? *it : b.length;
  b.shortest = !b.bucketed ? b.length : it == p.sizes.begin() ? 1 : *(it - 1) + 1;
  b.args = call;
  if (b.pad() > 0)
    for (int i : p.args) {
      const Tensor& t = std::get<Tensor>(call[i]);
      Shape zs = t.shape();
      zs[b.axis] = b.pad();
      b.args[i] = concat({t, zeros(zs, t.dtype(), t.device())}, b.axis);
    }
  b.padded_args = p.args;
  b.length_arg = static_cast<int>(b.args.size());
  b.args.emplace_back(
      full({1}, b.length, DType::Int64, std::get<Tensor>(call[p.args[0]]).device()));
  return b;
}

void trim_outputs(std::vector<Tensor>& out, const std::vector<Trim>& trims, int64_t length,
                  int64_t pad) {
  for (size_t i = 0; i < out.size() && i < trims.size(); ++i)
    if (const int a = trims[i].axis; a >= 0) {
      const int64_t extent = out[i].shape()[a], keep = trims[i].trimmed(extent, length, pad);
      if (keep != extent) out[i] = out[i].slice(a, 0, keep);
    }
}

}  // namespace graph
}  // namespace encore
