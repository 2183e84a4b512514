// Data for Model::fit / evaluate / predict: a Dataset yields the batches of one pass (an
// epoch); ArrayDataset cuts in-memory arrays into batches, in order or shuffled from a seed.
#pragma once

#include <cstdint>
#include <optional>

#include "ops/tensor.h"

namespace encore::nn {

/// Inputs and targets of one batch (targets undefined for predict), and the weight of each
/// row in the loss (Keras' sample_weight; undefined: every row weighs 1).
struct Batch {
  Tensor x, y;
  Tensor sample_weight = {};
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  /// Starts pass `epoch` (0-based); a shuffling dataset draws that pass's order.
  virtual void start(int epoch) = 0;
  /// The next batch of the pass, or nullopt after its last.
  virtual std::optional<Batch> next() = 0;
  /// Batches per pass, or -1 when unknown.
  virtual int64_t size() const = 0;
};

/// Rows of `x` (and `y`, when defined) in batches of `batch_size`; the last batch of a pass is
/// smaller when the rows do not divide evenly (Model::fit traces it once, as a signature of
/// its own). With `shuffle`, pass e visits the rows in a permutation that depends only on
/// (seed, e), so a resumed fit sees the order an uninterrupted one saw. Batches in order are
/// views of the arrays; shuffled ones are gathered into new tensors.
class ArrayDataset : public Dataset {
 public:
  /// `sample_weight` (optional): one weight per row, batched with the rows.
  ArrayDataset(Tensor x, Tensor y, int64_t batch_size, bool shuffle = false, uint64_t seed = 0,
               Tensor sample_weight = {});

  void start(int epoch) override;
  std::optional<Batch> next() override;
  int64_t size() const override;
  int64_t rows() const { return x_.shape()[0]; }

  /// The row order of pass `epoch` (the identity without shuffle).
  std::vector<int64_t> order(int epoch) const;

 private:
  Tensor gather(const Tensor& t, int64_t begin, int64_t end) const;

  Tensor x_, y_, w_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  std::vector<int64_t> order_;
  int64_t at_ = 0;
};

/// A data-parallel rank's part of another dataset: of every batch of `data`, the rows
/// [rows * rank / size, rows * (rank + 1) / size). A shuffling ArrayDataset draws the same order
/// on every rank (it depends on (seed, epoch) only), so each rank trains on its own slice of
/// every global batch, reshuffled per epoch alike everywhere (as PyTorch's DistributedSampler).
/// A batch with fewer rows than ranks is skipped on every rank: some rank would get none.
class ShardedDataset : public Dataset {
 public:
  ShardedDataset(Dataset& data, int rank, int size);
  void start(int epoch) override { data_.start(epoch); }
  std::optional<Batch> next() override;
  int64_t size() const override { return data_.size(); }

 private:
  Dataset& data_;
  int rank_, size_;
};

}  // namespace encore::nn
