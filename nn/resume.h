// Checkpoints that resume training exactly: a model's parameters, its optimizer's state (step
// count, moments, momentum buffers, learning rate) and the random generators' state (dropout
// masks), in one safetensors file (nn/checkpoint.h: atomic writes, verified strict loads).
//
// N steps == k steps, save, load in a fresh process, N - k steps: bit for bit, eager or traced.
//
// The file holds "model/<parameter>", "optimizer/<state>" (Optimizer::state()) and
// "generator/<device>" (the default generator of each device the parameters live on), and
// metadata naming the parts ("checkpoint.parts": "model,optimizer,generator"), the optimizer's
// kind ("checkpoint.optimizer") and whatever the caller adds (Model adds its counters).
// nn::load reads the model part of such a file too.
#pragma once

#include "nn/checkpoint.h"
#include "nn/optim.h"

namespace encore::nn {

/// Writes `module`'s parameters, `optimizer`'s state (when given) and the default generators of
/// the parameters' devices to `path`, atomically. `extra` keys must not start with "encore.".
void save_checkpoint(const std::string& path, const Module& module,
                     const Optimizer* optimizer = nullptr, const Metadata& extra = {});

/// Restores what save_checkpoint wrote, all or nothing: the model part must hold exactly the
/// module's parameters (names, shapes, dtypes); with an optimizer the file must hold the state of
/// one of the same kind over the same parameters; the generators must be there. On any error
/// (missing, truncated, corrupt or mismatched file) nothing is changed. Tensors are written in
/// place, so traced steps keep replaying. Returns the file's metadata.
Metadata load_checkpoint(const std::string& path, Module& module, Optimizer* optimizer = nullptr);

}  // namespace encore::nn
