// Everything a training program needs: #include "encore.h".
#pragma once

#include "autograd/gradcheck.h"
#include "core/ledger.h"
#include "core/modes.h"
#include "core/tensor.h"
#include "nn/checkpoint.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/losses.h"
#include "nn/lstm.h"
#include "nn/module.h"
#include "nn/normalization.h"
#include "nn/optim.h"
#include "ops/build_info.h"
#include "ops/ops.h"
#include "ops/random.h"
