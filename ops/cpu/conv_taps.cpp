#include "ops/cpu/conv_taps.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>

#include "core/parallel.h"
#include "ops/cpu/onednn.h"

namespace encore::cpu {

namespace {

// The padded steps in rows of `stride` steps: enough for every tap of every output step and for
// every input step (a step no output reads keeps a zero gradient).
struct Rows {
  int64_t width, per_sample, blocks;  // values per row, rows per sample, tap blocks
  explicit Rows(const ConvProblem& p)
      : width(p.stride * p.channels),
        per_sample((std::max(p.length + p.pad_l, (p.out_length() - 1) * p.stride + p.kernel) +
                    p.stride - 1) /
                   p.stride),
        blocks(p.kernel / p.stride) {}
};

// A row-major GEMM on the calling thread (inside the pool's parallel region oneDNN runs it on
// one thread). Its arguments are valid by construction, so its status carries nothing.
void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) noexcept {
  (void)dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

bool tap_gemm_applies(const ConvProblem& p) {
  return p.kind != ConvKind::Forward && p.x_block == 0 && p.y_block == 0 && p.dilation == 1 &&
         p.kernel % p.stride == 0;
}

size_t tap_gemm_scratch_bytes(const ConvProblem& p) {
  const Rows r(p);
  return static_cast<size_t>(p.n * r.per_sample * r.width) * sizeof(float);
}

void tap_gemm_backward_filter(const ConvProblem& p, const float* x, const float* gy, float* gw) {
  const Rows r(p);
  const int64_t T = p.out_length(), F = p.filters, C = p.channels;
  const int64_t sample = r.per_sample * r.width;  // values per padded sample
  float* padded = reinterpret_cast<float*>(thread_scratch(0, tap_gemm_scratch_bytes(p)));
  for (int64_t b = 0; b < p.n; ++b) {
    float* s = padded + b * sample;
    std::memset(s, 0, p.pad_l * C * sizeof(float));
    std::memcpy(s + p.pad_l * C, x + b * p.length * C, p.length * C * sizeof(float));
    std::memset(s + (p.pad_l + p.length) * C, 0,
                (sample - (p.pad_l + p.length) * C) * sizeof(float));
  }
  // Each tap block's gradient is its own: blocks split over the pool, samples summed in order.
  parallel_for(r.blocks, 2, [&](int64_t q0, int64_t q1) noexcept {
    for (int64_t q = q0; q < q1; ++q)
      for (int64_t b = 0; b < p.n; ++b)
        sgemm('T', 'N', r.width, F, T, padded + b * sample + q * r.width, r.width, gy + b * T * F,
              F, b ? 1.0f : 0.0f, gw + q * r.width * F, F);
  });
}

void tap_gemm_backward_data(const ConvProblem& p, const float* gy, const float* w, float* gx) {
  const Rows r(p);
  const int64_t T = p.out_length(), F = p.filters, C = p.channels;
  const int64_t sample = r.per_sample * r.width;
  float* padded = reinterpret_cast<float*>(thread_scratch(0, tap_gemm_scratch_bytes(p)));
  // Each sample's gradient is its own: samples split over the pool, tap blocks added in order.
  parallel_for(p.n, 2, [&](int64_t b0, int64_t b1) noexcept {
    for (int64_t b = b0; b < b1; ++b) {
      float* s = padded + b * sample;
      std::memset(s, 0, sample * sizeof(float));
      for (int64_t q = 0; q < r.blocks; ++q)
        sgemm('N', 'T', T, r.width, F, gy + b * T * F, F, w + q * r.width * F, F, 1.0f,
              s + q * r.width, r.width);
      std::memcpy(gx + b * p.length * C, s + p.pad_l * C, p.length * C * sizeof(float));
    }
  });
}

ConvProblem tap_forward_problem(const ConvProblem& p) {
  const int64_t blocks = p.kernel / p.stride;
  ConvProblem f{};
  f.kind = ConvKind::Forward;
  f.n = p.n;
  f.length = p.out_length();
  f.channels = p.filters;
  f.filters = p.stride * p.channels;
  f.kernel = blocks;
  f.stride = f.dilation = 1;
  f.pad_l = f.pad_r = blocks - 1;
  return f;
}

std::array<int64_t, 3> tap_forward_weights_strides(const ConvProblem& p) {
  return {p.filters, 1, p.stride * p.channels * p.filters};
}

void reverse_steps(const float* in, float* out, int64_t n, int64_t steps, int64_t width) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t t = 0; t < steps; ++t)
      std::memcpy(out + (b * steps + t) * width, in + (b * steps + steps - 1 - t) * width,
                  width * sizeof(float));
}

void tap_forward_gather(const ConvProblem& p, const float* y, float* gx) {
  const int64_t rows = p.out_length() + p.kernel / p.stride - 1, C = p.channels;
  const int64_t width = p.stride * C;
  parallel_for(p.n, 2, [&](int64_t b0, int64_t b1) noexcept {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t l = 0; l < p.length; ++l) {
        const int64_t step = l + p.pad_l, row = step / p.stride;
        float* to = gx + (b * p.length + l) * C;
        if (row < rows)
          std::memcpy(to, y + (b * rows + rows - 1 - row) * width + step % p.stride * C,
                      C * sizeof(float));
        else
          std::memset(to, 0, C * sizeof(float));
      }
  });
}

}  // namespace encore::cpu
