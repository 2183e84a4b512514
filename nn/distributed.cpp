#include "nn/distributed.h"

#include <map>

#include "autograd/hooks.h"
#include "core/modes.h"
#include "ops/collective.h"
#include "ops/ops.h"

namespace encore::dist {

namespace {

// The buckets of one optimizer and where each stands in the current step. A bucket goes
// idle -> started (its gradients packed, the all-reduce running) -> reduced (waited for, the
// averages written back into .grad), and back to idle when the next backward pass reaches it.
class GradientBuckets {
 public:
  GradientBuckets(nn::Optimizer& optimizer, DistributedOptions options)
      : optimizer_(optimizer), options_(options) {
    const std::vector<Tensor>& params = optimizer.params();
    std::vector<size_t> current;
    int64_t bytes = 0;
    // Reverse order: the backward pass finishes the last layers' gradients first.
    for (size_t k = params.size(); k-- > 0;) {
      const Tensor& p = params[k];
      const int64_t n = p.numel() * static_cast<int64_t>(itemsize(p.dtype()));
      const bool fits = !current.empty() && params[current[0]].dtype() == p.dtype() &&
                        params[current[0]].device() == p.device() &&
                        bytes + n <= options.bucket_bytes;
      if (!current.empty() && !fits) {
        parts_.push_back(std::move(current));
        current.clear();
        bytes = 0;
      }
      current.push_back(k);
      bytes += n;
    }
    if (!current.empty()) parts_.push_back(std::move(current));
    state_.resize(parts_.size());
    bucket_of_.resize(params.size());
    for (size_t b = 0; b < parts_.size(); ++b)
      for (size_t k : parts_[b]) bucket_of_[k] = b;
  }

  ~GradientBuckets() {
    for (uint64_t id : hooks_) autograd::remove_grad_ready_hook(id);
  }

  void install_hooks(const std::shared_ptr<GradientBuckets>& self) {
    if (!options_.overlap) return;
    const std::weak_ptr<GradientBuckets> weak = self;
    const std::vector<Tensor>& params = optimizer_.params();
    for (size_t k = 0; k < params.size(); ++k)
      hooks_.push_back(autograd::add_grad_ready_hook(params[k], [weak, k] {
        if (const auto b = weak.lock()) b->on_ready(k);
      }));
  }

  const std::vector<std::vector<size_t>>& parts() const { return parts_; }

  // A gradient is final: its bucket starts when it was the bucket's last.
  void on_ready(size_t k) {
    Bucket& b = state_[bucket_of_[k]];
    if (b.stage == Stage::Started) reduce(bucket_of_[k], false);  // accumulation: start over
    if (b.stage == Stage::Reduced) b = Bucket{};
    if (++b.ready == static_cast<int>(parts_[bucket_of_[k]].size())) start(bucket_of_[k]);
  }

  // The step's updates are queued: the next backward pass (or step) starts every bucket anew.
  void after_step() {
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i].stage == Stage::Started) reduce(i, false);  // a bucket no update waited for
    for (Bucket& b : state_) b = Bucket{};
  }

  // Before the update of bucket `index`: its averaged gradients are in .grad.
  void before_update(size_t index) {
    Bucket& b = state_[index];
    if (b.stage == Stage::Reduced) return;
    // Not started by the backward pass (no overlap, gradients set by hand, a parameter the
    // loss does not reach): start every idle bucket now, in order, so the ranks agree.
    for (size_t i = 0; i < state_.size(); ++i)
      if (state_[i].stage == Stage::Idle) start(i);
    reduce(index, true);
  }

 private:
  enum class Stage { Idle, Started, Reduced };
  struct Bucket {
    Stage stage = Stage::Idle;
    int ready = 0;
    Tensor packed;                // one fused buffer of the bucket's gradients, averaged in place
    std::vector<size_t> members;  // the parameters whose gradients it holds
  };

  void start(size_t index) {
    Bucket& b = state_[index];
    const NoGradGuard no_grad;
    std::vector<Tensor> flat;
    for (size_t k : parts_[index]) {
      const Tensor g = optimizer_.params()[k].grad();
      if (!g.defined()) continue;  // no gradient on any rank: the step skips it too
      b.members.push_back(k);
      flat.push_back(g.reshape({-1}));
    }
    b.stage = Stage::Started;
    if (flat.empty()) return;
    b.packed = flat.size() == 1 ? flat[0].clone() : concat(flat, 0);
    all_reduce_start_(b.packed, ReduceOp::Mean);
  }

  // Waits for a started bucket; `write` copies the averages back into the gradients.
  void reduce(size_t index, bool write) {
    Bucket& b = state_[index];
    const NoGradGuard no_grad;
    if (b.packed.defined()) {
      all_reduce_wait_(b.packed);
      int64_t at = 0;
      for (size_t k : b.members) {
        Tensor g = optimizer_.params()[k].grad();
        const int64_t n = g.numel();
        if (write) g.copy_(b.packed.slice(0, at, at + n).reshape(g.shape()));
        at += n;
      }
    }
    // Nothing of the step stays referenced: inside a trace these are symbolic.
    b.packed = Tensor();
    b.members.clear();
    b.stage = Stage::Reduced;
  }

  nn::Optimizer& optimizer_;
  DistributedOptions options_;
  std::vector<std::vector<size_t>> parts_;
  std::vector<size_t> bucket_of_;
  std::vector<Bucket> state_;
  std::vector<uint64_t> hooks_;
};

std::map<const nn::Optimizer*, std::weak_ptr<GradientBuckets>>& registry() {
  static auto* r = new std::map<const nn::Optimizer*, std::weak_ptr<GradientBuckets>>();
  return *r;
}

}  // namespace

std::shared_ptr<nn::Optimizer> DistributedOptimizer(std::shared_ptr<nn::Optimizer> optimizer,
                                                    DistributedOptions options) {
  ENCORE_CHECK(optimizer, ValueError, "[DistributedOptimizer] got no optimizer");
  ENCORE_CHECK(!optimizer->distributed(), ValueError, "[DistributedOptimizer] the ",
               optimizer->kind(), " optimizer is distributed already");
  ENCORE_CHECK(options.bucket_bytes >= 0, ValueError,
               "[DistributedOptimizer] bucket_bytes must be >= 0, got ", options.bucket_bytes);
  init();
  auto buckets = std::make_shared<GradientBuckets>(*optimizer, options);
  buckets->install_hooks(buckets);
  const std::weak_ptr<GradientBuckets> weak = buckets;
  optimizer->set_update_parts(
      buckets->parts(),
      [weak](size_t part) {
        if (const auto b = weak.lock()) b->before_update(part);
      },
      [weak] {
        if (const auto b = weak.lock()) b->after_step();
      },
      buckets);
  registry()[optimizer.get()] = buckets;
  return optimizer;
}

std::vector<std::vector<size_t>> buckets(const nn::Optimizer& optimizer) {
  const auto it = registry().find(&optimizer);
  const std::shared_ptr<GradientBuckets> b = it == registry().end() ? nullptr : it->second.lock();
  ENCORE_CHECK(b, ValueError, "[buckets] the ", optimizer.kind(), " optimizer is not distributed");
  return b->parts();
}

void broadcast_parameters(const std::vector<Tensor>& tensors, int root) {
  const NoGradGuard no_grad;
  for (const Tensor& t : tensors) {
    Tensor target = t;
    target.copy_(broadcast(t, root));
  }
}

void broadcast_parameters(const nn::Module& module, int root) {
  std::vector<Tensor> all;
  for (const auto& [name, t] : module.named_weights()) all.push_back(t);
  ENCORE_CHECK(!all.empty(), ValueError,
               "[broadcast_parameters] the module has no parameters yet: build it first");
  broadcast_parameters(all, root);
}

}  // namespace encore::dist
