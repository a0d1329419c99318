// kernel_dedup.h — kernels that are the same code under different names.
//
// A network repeats its layers (GPT-2's twelve blocks, ResNet's bottlenecks), and the
// kernels of a repeated layer differ only in their names and the buffers they are handed
// at launch. Code depends on the LoopFunc alone (buffers arrive through the argument
// array, dims through the dims array), so the compiling backends compile one copy of each
// distinct loop IR and point the others at it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/loop/loop_ir.h"

namespace lathe {

// f's buffer parameters in the order its body first mentions them (a pre-order walk of the
// statements, each statement's expressions in order; a buffer never mentioned after the
// others, in its own order): position c holds the index into f.buffers. Kernels that differ
// only in the order of their parameters (GPT-2's first MLP layer lists its shared scalar
// constants in another order than the eleven after it) list them alike in this order.
std::vector<int> canonical_buffer_order(const loop::LoopFunc& f);

// The loop IR text with the function's name, its buffers' launch offsets, their names and
// their order left out (the parameters renamed $0, $1, … and listed in
// canonical_buffer_order): equal exactly when the code is, up to the order in which it takes
// its buffers.
std::string code_key(const loop::LoopFunc& f);

// Per function: its code key, and the index of the first function with the same key
// (itself when it is the first), and the order in which the first's code takes this
// function's buffers.
struct SameCode {
  std::vector<std::string> keys;
  std::vector<int> first;
  // per function: empty when the first's code takes its buffers in their order; else, for
  // each parameter j of the first's code, the index into this function's buffers to pass
  // there (a launch reorders its buffer pointers by it)
  std::vector<std::vector<int>> args;
  // per function: canonical_buffer_order (what the key leaves out; a cache key that names
  // compiled code must add it back)
  std::vector<std::vector<int>> orders;
  bool is_first(size_t i) const { return first[i] == static_cast<int>(i); }
  size_t distinct() const;
};
SameCode same_code(const std::vector<const loop::LoopFunc*>& funcs);

// The code key with every integer literal (extents, strides, tile sizes, array sizes) left
// out: kernels equal under it differ only in constants, and are the most that making shape
// parameters run-time values could share. A diagnostic (`lathe run --stats`:
// distinct_up_to_constants). Measured on the full models: resnet50 32 distinct kernels -> 26,
// mobilenet_v2 32 -> 21 (13 depthwise layers: 6 codes -> 1), unet_small 36 -> 21, bert_base
// 14 -> 13, gpt2_small 16 -> 15; the rest differ in their schedule's structure (pack plans,
// tails, M splits, epilogues), not only in constants.
std::string shape_free_key(const loop::LoopFunc& f);
size_t distinct_up_to_constants(const std::vector<const loop::LoopFunc*>& funcs);

}  // namespace lathe
