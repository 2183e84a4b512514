// Shapes and strides: a small inline array of dimensions, so that creating a tensor
// allocates nothing for its geometry (eager dispatch overhead matters).
#pragma once

#include "core/cxx20.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace encore {

constexpr int kMaxDims = 8;

class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> d) { assign(d.begin(), d.end()); }
  explicit Dims(std::span<const int64_t> d) { assign(d.data(), d.data() + d.size()); }
  explicit Dims(const std::vector<int64_t>& d) { assign(d.data(), d.data() + d.size()); }
  static Dims filled(int n, int64_t v) {
    Dims r;
    r.resize(n, v);
    return r;
  }

  int size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t& operator[](int i) { return d_[i]; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t back() const { return d_[n_ - 1]; }
  int64_t* begin() { return d_; }
  int64_t* end() { return d_ + n_; }
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + n_; }
  const int64_t* data() const { return d_; }
  void push_back(int64_t v);
  void resize(int n, int64_t v = 0);
  void insert(int pos, int64_t v);
  void erase(int pos);
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  operator std::span<const int64_t>() const { return {d_, static_cast<size_t>(n_)}; }

  int64_t numel() const {
    int64_t p = 1;
    for (int i = 0; i < n_; ++i) p *= d_[i];
    return p;
  }
  /// "(32, 140, 30)"
  std::string str() const;

  friend bool operator==(const Dims& a, const Dims& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  void assign(const int64_t* b, const int64_t* e);
  // Only the first n_ are meaningful; not zeroing the rest keeps the arrays of them that every
  // dispatch builds (inputs, outputs, metas) from being cleared each call.
  int64_t d_[kMaxDims];
  int8_t n_ = 0;
};

using Shape = Dims;
using Strides = Dims;

/// Row-major strides of `shape`. Size-0 dims count as 1, so every stride is positive and a
/// tensor that becomes non-empty through a view keeps valid strides.
Strides contiguous_strides(const Shape& shape);
/// Whether (shape, strides) lays elements out as `contiguous_strides(shape)` does. Strides of
/// size-1 dims do not matter, and an empty tensor is contiguous (it has no layout): the
/// dispatcher's "make inputs contiguous" step relies on a fresh tensor always passing.
bool is_contiguous(const Shape& shape, const Strides& strides);
/// Strides of `shape` that view the same elements as (old_shape, old_strides), or false when
/// a reshape needs a copy (e.g. a transposed tensor flattened).
bool view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape,
                  Strides& out);
/// The most elements a tensor may have: every byte size (at most 8 bytes per element) and every
/// element offset then fits in int64.
constexpr int64_t kMaxNumel = INT64_MAX / 8;
/// The element count of `shape`, or a ShapeError naming `op` and the shape when a dimension is
/// negative or the count exceeds kMaxNumel. The product of the non-zero dims is what is checked
/// ((2**31, 0) is fine, (2**40, 2**40, 0) is not), so that `Dims::numel()` and
/// `contiguous_strides()` of a checked shape cannot overflow. Every place that creates a shape
/// from user input calls this: op outputs in the dispatcher, Tensor::empty, reshape, the
/// Python shape parser, the layers' builds.
int64_t checked_numel(const Shape& shape, const char* op);
/// Wraps a possibly negative axis into [0, rank); throws ShapeError naming `op` otherwise.
int normalize_axis(int64_t axis, int rank, const char* op);
/// NumPy broadcasting of two shapes; throws ShapeError naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace encore
