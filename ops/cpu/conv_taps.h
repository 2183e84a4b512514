// conv1d's two gradients as GEMMs over blocks of `stride` taps, without an im2col buffer: an
// implementation the conv1d kernel offers beside oneDNN's (ops/cpu/onednn_conv.cpp) where
// oneDNN 2.6 has only its GEMM-based backward for channels-last data.
//
// With x padded and cut into rows of `stride` steps (stride * channels values each), the taps
// q*stride ... q*stride + stride - 1 of every output step t read exactly row t + q: a plain
// row-major matrix of T rows that starts at row q. So the weight gradient of tap block q is
// sum_b rows_b[q : q + T]^T @ gy_b, and the input gradient adds gy_b @ w_q^T into those rows:
// one GEMM per (block, sample), each as large as the channels allow, where oneDNN's GEMM-based
// backward first copies every step's whole receptive field (an im2col of kernel * channels
// values per output step). Measured in docs/BENCHMARKS.md.
//
// The same rows give the input gradient a second form (encore:tap_forward): row u of the
// padded gradient is sum_q gy[u - q] @ w_q^T, a stride-1 convolution of gy with the tap blocks
// as its kernel. Reversed in time it is a plain forward convolution (padding Q - 1 on both
// sides), which oneDNN runs with its brgemm forward, skipping the padding, where the per-block
// GEMMs have only T rows each.
#pragma once

#include <array>
#include <cstddef>

#include "ops/cpu/onednn_conv.h"

namespace encore::cpu {

/// Whether p (a backward kind) can run as tap-block GEMMs: channels-last x and y, no dilation,
/// the kernel a whole number of strides.
bool tap_gemm_applies(const ConvProblem& p);
/// The scratch memory one call takes (the padded input, or the padded input gradient).
size_t tap_gemm_scratch_bytes(const ConvProblem& p);
/// gw (K, C, F) from x (N, L, C) and gy (N, T, F).
void tap_gemm_backward_filter(const ConvProblem& p, const float* x, const float* gy, float* gw);
/// gx (N, L, C) from gy (N, T, F) and w (K, C, F).
void tap_gemm_backward_data(const ConvProblem& p, const float* gy, const float* w, float* gx);

/// encore:tap_forward's convolution for backward-data problem p: x (N, T, F) the time-reversed
/// gy, w (Q, F, stride * C) whose tap q is tap block q of p's weights, read in place
/// (tap_forward_weights_strides), y (N, T + Q - 1, stride * C) the time-reversed padded rows.
ConvProblem tap_forward_problem(const ConvProblem& p);
/// Strides of p's (K, C, F) weights seen as the forward's (stride * C, F, Q) weights (oneDNN's
/// (out, in, taps) order).
std::array<int64_t, 3> tap_forward_weights_strides(const ConvProblem& p);
/// out (N, steps, width) = in with its steps reversed, per sample.
void reverse_steps(const float* in, float* out, int64_t n, int64_t steps, int64_t width);
/// gx (N, L, C) from the forward's output y: input step l is y's reversed row of padded step
/// l + pad_l (zero where no output reads it).
void tap_forward_gather(const ConvProblem& p, const float* y, float* gx);

}  // namespace encore::cpu
