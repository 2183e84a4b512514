// The float32 fast paths of dense (the fused epilogue: per block of rows after the BLAS GEMM,
// or oneDNN's matmul with post-ops from 2^20 multiply-adds), matmul (batched, broadcast, 1-D)
// and the reductions (sum, mean, max), forward and backward, against float64 references
// written here, on random configurations. The bound: tests/cpp/fastpath.h.
#include "fastpath.h"
#include "helpers.h"

namespace encore {
namespace {

using namespace fastpath;

// ---- dense ------------------------------------------------------------------------------------

std::string check_dense(Rng& rng, std::string& config) {
  // Leading dims: none (a 1-D x), one or two, an empty batch now and then; a third of the
  // products large enough for oneDNN's matmul.
  const bool large = rng.chance(1.0 / 3);
  Shape lead;
  for (int64_t i = 0, dims = rng.integer(0, 2); i < dims; ++i)
    lead.push_back(rng.chance(0.04) ? 0 : rng.integer(1, large ? 12 : 9));
  int64_t m = lead.numel();
  const int64_t k = large ? rng.integer(64, 300) : rng.integer(1, 70),
                n = large ? rng.integer(64, 200) : rng.integer(1, 70);
  if (large && m > 0 && m * k * n < (int64_t{1} << 20)) {
    lead = {(int64_t{1} << 20) / (k * n) + rng.integer(1, 16)};
    m = lead[0];
  }
  const Activation act = rng.pick(fusable_activations());
  Shape xs = lead;
  xs.push_back(k);
  std::ostringstream s;
  s << "dense x " << xs.str() << ", w (" << k << ", " << n << "), activation " << name(act)
    << (m * k * n >= (int64_t{1} << 20) ? " (oneDNN's matmul)" : " (BLAS)");
  config = s.str();

  const std::vector<double> xv = rng.values(m * k), wv = rng.values(k * n), bv = rng.values(n),
                            g = rng.values(m * n);
  const Tensor x = f32(xv, xs, true), w = f32(wv, {k, n}, true), b = f32(bv, {n}, true);
  const Tensor y = dense(x, w, b, act);
  y.backward(f32(g, y.shape()));
  const std::vector<double> y_got = y.to_vector<double>();

  Shape ys = lead;
  ys.push_back(n);
  Expected ey(ys), egx(xs), egw({k, n}), egb({n});
  std::vector<double> mag_y(ey.value.size()), mag_gx(egx.value.size()), mag_gw(egw.value.size()),
      mag_gb(n), gy(g.size()), gy_err(g.size()), err_gx(mag_gx.size()), err_gw(mag_gw.size()),
      err_gb(n);
  for (size_t i = 0; i < g.size(); ++i) {
    gy[i] = activation_grad(act, g[i], y_got[i]);
    gy_err[i] = activation_grad_error(act, g[i], y_got[i]);
  }
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const size_t o = static_cast<size_t>(r * n + j);
      double sum = bv[j], mag = std::fabs(bv[j]);
      for (int64_t p = 0; p < k; ++p) {
        const size_t xi = static_cast<size_t>(r * k + p), wi = static_cast<size_t>(p * n + j);
        sum += xv[xi] * wv[wi];
        mag += std::fabs(xv[xi] * wv[wi]);
        egx.value[xi] += gy[o] * wv[wi];
        mag_gx[xi] += std::fabs(gy[o] * wv[wi]);
        err_gx[xi] += gy_err[o] * std::fabs(wv[wi]);
        egw.value[wi] += xv[xi] * gy[o];
        mag_gw[wi] += std::fabs(xv[xi] * gy[o]);
        err_gw[wi] += std::fabs(xv[xi]) * gy_err[o];
      }
      egb.value[j] += gy[o];
      mag_gb[j] += std::fabs(gy[o]);
      err_gb[j] += gy_err[o];
      ey.value[o] = activate(act, sum);
      mag_y[o] = mag;
    }
  bound_sums(ey, mag_y, k + 1);
  for (size_t o = 0; o < ey.value.size(); ++o)
    ey.bound[o] = activation_bound(act, ey.bound[o], ey.value[o]);
  bound_sums(egx, mag_gx, n, err_gx);
  bound_sums(egw, mag_gw, m, err_gw);
  bound_sums(egb, mag_gb, m, err_gb);
  return first_violation({{"y", y.detach(), &ey},
                          {"grad x", x.grad(), &egx},
                          {"grad w", w.grad(), &egw},
                          {"grad b", b.grad(), &egb}});
}

TEST(FastPath, Dense) {
  const Configs run("Dense", 0.12);
  Failures failures{run};
  int64_t onednn = 0;
  for (int64_t i = run.first; i < run.first + run.count; ++i) {
    Rng rng(run.seed, run.test, i);
    std::string config;
    if (failures.add(i, config, check_dense(rng, config))) break;
    onednn += config.find("oneDNN") != std::string::npos;
  }
  std::cout << "[fastpath] dense: " << run.count << " configurations, " << onednn
            << " of them on oneDNN's matmul\n";
}

// ---- matmul -----------------------------------------------------------------------------------

// Index of `at` (an index of the broadcast batch shape `out`) in an operand of batch shape `s`.
int64_t broadcast_index(const Shape& out, const Shape& s, int64_t at) {
  int64_t index = 0, stride = 1;
  for (int64_t d = out.size() - 1, e = s.size() - 1; d >= 0; --d, --e) {
    const int64_t i = at % out[d];
    at /= out[d];
    if (e >= 0) {
      if (s[e] != 1) index += i * stride;
      stride *= s[e];
    }
  }
  return index;
}

std::string check_matmul(Rng& rng, std::string& config) {
  const int64_t m = rng.integer(1, 40), k = rng.integer(1, 60), n = rng.integer(1, 40);
  // Batch dims of each operand, broadcast against each other; a 1-D operand now and then.
  Shape batch, ba, bb;
  for (int64_t i = 0, dims = rng.integer(0, 2); i < dims; ++i) batch.push_back(rng.integer(1, 4));
  for (const int64_t d : batch) {
    ba.push_back(rng.chance(0.3) ? 1 : d);
    bb.push_back(rng.chance(0.3) ? 1 : d);
  }
  if (rng.chance(0.3) && !ba.empty()) ba.erase(0);
  for (int d = 0; d < batch.size(); ++d) {  // what the operands broadcast to
    const int e = d - (batch.size() - ba.size());
    batch[d] = std::max(bb[d], e >= 0 ? ba[e] : int64_t{1});
  }
  const bool vec_a = batch.empty() && rng.chance(0.2),
             vec_b = batch.empty() && !vec_a && rng.chance(0.2);
  Shape as = ba, bs = bb;
  if (!vec_a) as.push_back(m);
  as.push_back(k);
  bs.push_back(k);
  if (!vec_b) bs.push_back(n);
  config = "matmul " + as.str() + " @ " + bs.str();
  const int64_t mm = vec_a ? 1 : m, nn = vec_b ? 1 : n, nb = batch.numel();
  const std::vector<double> av = rng.values(as.numel()), bv = rng.values(bs.numel());
  const Tensor a = f32(av, as, true), b = f32(bv, bs, true);
  const Tensor y = matmul(a, b);
  const std::vector<double> g = rng.values(y.numel());
  y.backward(f32(g, y.shape()));

  Expected ey(y.shape()), ega(as), egb(bs);
  std::vector<double> mag_y(ey.value.size()), mag_a(ega.value.size()), mag_b(egb.value.size());
  for (int64_t p = 0; p < nb; ++p) {
    const int64_t pa = broadcast_index(batch, ba, p), pb = broadcast_index(batch, bb, p);
    for (int64_t i = 0; i < mm; ++i)
      for (int64_t j = 0; j < nn; ++j) {
        const size_t o = static_cast<size_t>((p * mm + i) * nn + j);
        for (int64_t q = 0; q < k; ++q) {
          const size_t ai = static_cast<size_t>((pa * mm + i) * k + q),
                       bi = static_cast<size_t>((pb * k + q) * nn + j);
          ey.value[o] += av[ai] * bv[bi];
          mag_y[o] += std::fabs(av[ai] * bv[bi]);
          ega.value[ai] += g[o] * bv[bi];
          mag_a[ai] += std::fabs(g[o] * bv[bi]);
          egb.value[bi] += av[ai] * g[o];
          mag_b[bi] += std::fabs(av[ai] * g[o]);
        }
      }
  }
  bound_sums(ey, mag_y, k);
  bound_sums(ega, mag_a, nn * nb);  // a broadcast operand's gradient sums over the batch too
  bound_sums(egb, mag_b, mm * nb);
  return first_violation(
      {{"y", y.detach(), &ey}, {"grad a", a.grad(), &ega}, {"grad b", b.grad(), &egb}});
}

TEST(FastPath, Matmul) {
  const Configs run("Matmul", 0.12);
  Failures failures{run};
  for (int64_t i = run.first; i < run.first + run.count; ++i) {
    Rng rng(run.seed, run.test, i);
    std::string config;
    if (failures.add(i, config, check_matmul(rng, config))) break;
  }
}

// ---- reductions -------------------------------------------------------------------------------

std::string check_reduction(Rng& rng, std::string& config) {
  const int kind = static_cast<int>(rng.integer(0, 2));  // sum, mean, max
  Shape shape;
  if (rng.chance(0.1)) {
    shape = {rng.integer(1000, 30000)};  // a long sum, where the order matters
  } else {
    for (int64_t i = 0, dims = rng.integer(1, 4); i < dims; ++i)
      shape.push_back(rng.integer(kind == 0 ? 0 : 1, 9));
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d)
    if (rng.chance(0.5)) axes.push_back(rng.chance(0.3) ? d - rank : d);
  const bool keepdims = rng.chance(0.5);
  std::ostringstream s;
  s << std::vector<const char*>{"sum", "mean", "max"}[kind] << " x " << shape.str() << " axes (";
  for (const int64_t a : axes) s << a << ", ";
  s << ") keepdims " << keepdims;
  config = s.str();

  const std::vector<double> xv = rng.values(shape.numel());
  const Tensor x = f32(xv, shape, true);
  const Tensor y = kind == 0   ? sum(x, axes, keepdims)
                   : kind == 1 ? mean(x, axes, keepdims)
                               : max(x, axes, keepdims);
  const std::vector<double> g = rng.values(y.numel());
  y.backward(f32(g, y.shape()));

  // Each input element's output element: its index with the reduced axes dropped.
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (const int64_t a : axes) reduced[static_cast<size_t>((a + rank) % rank)] = true;
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d) count *= reduced[d] ? shape[d] : 1;
  const auto out_index = [&](int64_t flat) {
    int64_t index = 0, stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t i = flat % shape[d];
      flat /= shape[d];
      if (!reduced[d]) index += i * stride, stride *= shape[d];
    }
    return index;
  };
  Expected ey(y.shape()), egx(shape);
  std::vector<double> mag(ey.value.size()), best(ey.value.size(), -INFINITY), ties(ey.value.size());
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const size_t o = static_cast<size_t>(out_index(i));
    ey.value[o] += xv[i];
    mag[o] += std::fabs(xv[i]);
    if (xv[i] > best[o]) best[o] = xv[i], ties[o] = 0;
    ties[o] += xv[i] == best[o];
  }
  for (size_t o = 0; o < ey.value.size(); ++o) {
    if (kind == 1) ey.value[o] /= static_cast<double>(count), mag[o] /= static_cast<double>(count);
    if (kind == 2) ey.value[o] = best[o], mag[o] = 0;  // the max is exact
  }
  bound_sums(ey, mag, count);
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const size_t o = static_cast<size_t>(out_index(i));
    egx.value[i] = kind == 0          ? g[o]
                   : kind == 1        ? g[o] / static_cast<double>(count)
                   : xv[i] == best[o] ? g[o] / ties[o]
                                      : 0;
    egx.bound[i] = 2 * kU * std::fabs(egx.value[i]);
  }
  return first_violation({{"y", y.detach(), &ey}, {"grad x", x.grad(), &egx}});
}

TEST(FastPath, Reductions) {
  const Configs run("Reductions", 0.14);
  Failures failures{run};
  for (int64_t i = run.first; i < run.first + run.count; ++i) {
    Rng rng(run.seed, run.test, i);
    std::string config;
    if (failures.add(i, config, check_reduction(rng, config))) break;
  }
}

}  // namespace
}  // namespace encore
