#include "core/shape.h"

#include "core/error.h"

namespace encore {

void Dims::assign(const int64_t* b, const int64_t* e) {
  const auto n = std::distance(b, e);
  ENCORE_CHECK(n <= kMaxDims, ShapeError, "[shape] rank ", n, " exceeds the maximum of ", kMaxDims);
  n_ = static_cast<int8_t>(n);
  std::copy(b, e, d_);
}

void Dims::push_back(int64_t v) {
  ENCORE_CHECK(n_ < kMaxDims, ShapeError, "[shape] rank exceeds the maximum of ", kMaxDims);
  d_[n_++] = v;
}

void Dims::resize(int n, int64_t v) {
  ENCORE_CHECK(n >= 0 && n <= kMaxDims, ShapeError, "[shape] rank ", n, " exceeds the maximum of ",
               kMaxDims);
  for (int i = n_; i < n; ++i) d_[i] = v;
  n_ = static_cast<int8_t>(n);
}

void Dims::insert(int pos, int64_t v) {
  ENCORE_CHECK(n_ < kMaxDims, ShapeError, "[shape] rank exceeds the maximum of ", kMaxDims);
  for (int i = n_; i > pos; --i) d_[i] = d_[i - 1];
  d_[pos] = v;
  ++n_;
}

void Dims::erase(int pos) {
  for (int i = pos; i + 1 < n_; ++i) d_[i] = d_[i + 1];
  --n_;
}

std::string Dims::str() const {
  std::string s = "(";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[i]);
  }
  if (n_ == 1) s += ",";
  return s + ")";
}

Strides contiguous_strides(const Shape& shape) {
  Strides st = Dims::filled(shape.size(), 1);
  for (int i = shape.size() - 2; i >= 0; --i)
    st[i] = st[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return st;
}

bool is_contiguous(const Shape& shape, const Strides& strides) {
  if (shape.numel() == 0) return true;
  int64_t expected = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t checked_numel(const Shape& shape, const char* op) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    ENCORE_CHECK(d >= 0, ShapeError, "[", op, "] negative dimension in ", shape.str());
    if (d == 0) {
      empty = true;
      continue;
    }
    ENCORE_CHECK(!__builtin_mul_overflow(nonzero, d, &nonzero) && nonzero <= kMaxNumel, ShapeError,
                 "[", op, "] shape ", shape.str(),
                 " has too many elements (at most 2^60 - 1, so that byte sizes fit in int64)");
  }
  return empty ? 0 : nonzero;
}

int normalize_axis(int64_t axis, int rank, const char* op) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  ENCORE_CHECK(a >= 0 && a < rank, ShapeError, "[", op, "] axis ", axis,
               " is out of range for a tensor of rank ", rank);
  return static_cast<int>(a);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int n = std::max(a.size(), b.size());
  Shape out = Dims::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const int ia = a.size() - n + i, ib = b.size() - n + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    ENCORE_CHECK(da == db || da == 1 || db == 1, ShapeError, "[", op, "] shapes ", a.str(), " and ",
                 b.str(), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Walks chunks of old dims that are contiguous with each other, innermost first, and splits
// each chunk into new dims.
bool view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape,
                  Strides& out) {
  out = Dims::filled(shape.size(), 1);
  if (old_shape.numel() == 0 || old_shape.size() == 0) {
    out = contiguous_strides(shape);
    return true;
  }
  int view_d = shape.size() - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = old_shape.size() - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    const bool chunk_ends =
        d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
      out[view_d] = view_numel * chunk_base_stride;
      view_numel *= shape[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return false;
    if (d > 0) {
      chunk_base_stride = old_strides[d - 1];
      tensor_numel = view_numel = 1;
    }
  }
  return view_d == -1;
}

}  // namespace encore
