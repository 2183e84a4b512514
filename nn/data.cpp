#include "nn/data.h"

#include <cstring>
#include <numeric>
#include <random>

#include "core/modes.h"
#include "ops/ops.h"

namespace encore::nn {

ArrayDataset::ArrayDataset(Tensor x, Tensor y, int64_t batch_size, bool shuffle, uint64_t seed,
                           Tensor sample_weight)
    : x_(std::move(x)),
      y_(std::move(y)),
      w_(std::move(sample_weight)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      seed_(seed) {
  ENCORE_CHECK(x_.defined() && x_.dim() >= 1, ValueError,
               "[data] x must be a tensor with a batch axis",
               x_.defined() ? ", got " + describe(x_) : "");
  ENCORE_CHECK(!y_.defined() || (y_.dim() >= 1 && y_.shape()[0] == x_.shape()[0]), ShapeError,
               "[data] x and y must have the same number of rows, got ", describe(x_), " and ",
               y_.defined() ? describe(y_) : "none");
  ENCORE_CHECK(batch_size >= 1, ValueError, "[data] batch_size must be >= 1, got ", batch_size);
  ENCORE_CHECK(!w_.defined() || (w_.dim() == 1 && w_.shape()[0] == x_.shape()[0]), ShapeError,
               "[data] sample_weight must hold one weight per row of x ", describe(x_), ", got ",
               w_.defined() ? describe(w_) : "none");
  ENCORE_CHECK(!w_.defined() || is_floating(w_.dtype()), DTypeError,
               "[data] sample_weight must be floating, got ", w_.defined() ? describe(w_) : "none");
}

int64_t ArrayDataset::size() const { return (rows() + batch_size_ - 1) / batch_size_; }

std::vector<int64_t> ArrayDataset::order(int epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(rows()));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle_) return order;
  // Fisher-Yates with the engine's raw output (the standard fixes mt19937_64's sequence, not
  // that of its distributions), so the order is the same on every platform.
  std::mt19937_64 rng(seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  return order;
}

void ArrayDataset::start(int epoch) {
  order_ = shuffle_ ? order(epoch) : std::vector<int64_t>{};
  at_ = 0;
}

std::optional<Batch> ArrayDataset::next() {
  if (at_ >= rows()) return std::nullopt;
  const int64_t end = std::min(at_ + batch_size_, rows());
  Batch b{gather(x_, at_, end), y_.defined() ? gather(y_, at_, end) : Tensor(),
          w_.defined() ? gather(w_, at_, end) : Tensor()};
  at_ = end;
  return b;
}

Tensor ArrayDataset::gather(const Tensor& t, int64_t begin, int64_t end) const {
  if (!shuffle_) return t.slice(0, begin, end);
  NoGradGuard no_grad;
  if (t.device().is_cpu() && t.is_contiguous()) {
    Shape shape = t.shape();
    shape[0] = end - begin;
    Tensor out = Tensor::empty(shape, t.dtype());
    const size_t row = t.numel() / t.shape()[0] * itemsize(t.dtype());
    const char* src = static_cast<const char*>(t.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t i = begin; i < end; ++i)
      std::memcpy(dst + (i - begin) * row, src + order_[i] * row, row);
    return out;
  }
  std::vector<Tensor> parts;
  for (int64_t i = begin; i < end; ++i) parts.push_back(t.slice(0, order_[i], order_[i] + 1));
  return concat(parts, 0);
}

ShardedDataset::ShardedDataset(Dataset& data, int rank, int size)
    : data_(data), rank_(rank), size_(size) {
  ENCORE_CHECK(size >= 1 && rank >= 0 && rank < size, ValueError, "[ShardedDataset] rank ", rank,
               " is not in a world of ", size);
}

std::optional<Batch> ShardedDataset::next() {
  for (;;) {
    std::optional<Batch> b = data_.next();
    if (!b) return b;
    const int64_t rows = b->x.dim() ? b->x.shape()[0] : 0;
    if (rows < size_) continue;
    const int64_t begin = rows * rank_ / size_, end = rows * (rank_ + 1) / size_;
    Batch part{b->x.slice(0, begin, end), b->y.defined() ? b->y.slice(0, begin, end) : Tensor()};
    return part;
  }
}

}  // namespace encore::nn
