// rnn_op.h — the fused recurrence: an Extern node named "rnn" that runs one direction of an
// ONNX RNN / GRU / LSTM layer over all T steps in one kernel (the loop over the steps is
// inside the kernel; the importer, core/import/lower_rnn.cpp, computes the input projections
// of every step as one GEMM before it).
//
//   Extern{name="rnn", ints=[kind, T, B, H, XW, col0, reverse, flags, clip_bits,
//                            act0, alpha0_bits, beta0_bits, act1, …, act2, … [, I]]}
//         (XP, RT [, h0] [, c0] [, P] [, lens] [, rbh])        (present per `flags`, in this order)
//   XP   [T·B, XW] f32: the input projections with the biases folded in; step t, batch entry b
//        reads its G·H gate inputs at row t·B + b, columns [col0, col0 + G·H)
// With the `proj` flag the node computes those projections itself (one pass over the layer, no
// GEMM kernel and [T·B, XW] buffer of its own before it); the ints gain I (19 of them) and:
//         (X, RT [, h0] [, c0] [, P] [, lens] [, rbh], WT [, xb])
//   X    [T·B, I] f32: the layer's input; XP's row t·B + b is then X[t·B + b] · WT (+ xb)
//   WT   [I, XW] f32: the input weights transposed (both directions' columns; col0 picks them)
//   xb   [XW] f32: the biases folded into the projections (zeros when absent)
//   RT   [H, G·H] f32: the recurrent weight transposed (Rᵀ of one direction: column g·H + j
//        is gate g's unit j), gates in ONNX order (LSTM i o f c, GRU z r h, RNN one)
//   h0, c0 [B, H] f32 initial states (zeros when absent); P [3H] f32 peepholes (i o f);
//   lens [B] i32 (sequence_lens; a value outside [0, T] acts as clamped into it);
//   rbh  [H] f32 GRU's recurrent bias of the candidate gate (linear_before_reset only)
//   result [T + S, B, H] f32 (S = 2 for LSTM, else 1): rows 0..T-1 are Y of this direction
//   (zeros at steps t >= lens[b]), row T the last hidden state, row T+1 (LSTM) the last cell.
//
// The steps run t = 0..T-1 (reverse: T-1..0); a step at or past lens[b] leaves entry b's
// state as it is. The arithmetic per step (f, g, h the activations, clip() clamps the gate
// pre-activations to [-clip, clip] when the clip flag is set, x = XP's row, r = h·RT):
//   RNN:  h' = f(clip(x + r))
//   GRU:  z = f(clip(x_z + r_z)), r = f(clip(x_r + r_r)),
//         h~ = g(clip(x_h + (r ⊙ h)·RT_h))          (linear_before_reset = 0)
//         h~ = g(clip(x_h + r ⊙ (r_h + rbh)))       (linear_before_reset = 1)
//         h' = (1 - z) ⊙ h~ + z ⊙ h
//   LSTM: i = f(clip(x_i + r_i + P_i ⊙ c)), fg = f(clip(x_f + r_f + P_f ⊙ c)) (input_forget: 1 - i),
//         c' = fg ⊙ c + i ⊙ g(clip(x_c + r_c)), o = f(clip(x_o + r_o + P_o ⊙ c')), h' = o ⊙ h(c')
// Implementations: the interpreter (core/interp/eval_rnn.cpp, the oracle), the CPU library
// kernel of c and llvm (backends/library_rnn.cpp) and the cuda rendering
// (backends/cuda/render_rnn.cpp). Floats in ints are f32 bit patterns read as int32.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/ir/node.h"

namespace lathe {

enum class RnnKind : int { Rnn = 0, Gru = 1, Lstm = 2 };

// The recurrent activations ONNX names, with their alpha / beta (see rnn_activate).
enum class RnnActKind : int {
  Sigmoid = 0, Tanh, Relu, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus, Affine, Count
};
struct RnnAct {
  RnnActKind kind = RnnActKind::Sigmoid;
  float alpha = 0, beta = 0;
};

struct RnnSpec {
  RnnKind kind = RnnKind::Lstm;
  int64_t T = 0, B = 0, H = 0;
  int64_t XW = 0, col0 = 0;   // XP's row width and this direction's first column
  bool reverse = false;
  bool has_h0 = false, has_c0 = false, has_peep = false, has_lens = false, has_rbh = false;
  bool input_forget = false;  // LSTM
  bool lbr = false;           // GRU linear_before_reset
  bool has_clip = false;
  float clip = 0;
  bool has_proj = false;      // X, WT [, xb] in place of XP (the projection computed inside)
  bool has_xb = false;        // proj only
  int64_t I = 0;              // X's width (proj only)
  RnnAct act[3];              // f, g, h (RNN uses f; GRU f, g)

  int gates() const { return kind == RnnKind::Lstm ? 4 : kind == RnnKind::Gru ? 3 : 1; }
  int state_rows() const { return kind == RnnKind::Lstm ? 2 : 1; }
  int num_acts() const { return kind == RnnKind::Lstm ? 3 : kind == RnnKind::Gru ? 2 : 1; }
  // input positions (-1 when absent)
  int in_h0() const { return has_h0 ? 2 : -1; }
  int in_c0() const { return has_c0 ? 2 + has_h0 : -1; }
  int in_peep() const { return has_peep ? 2 + has_h0 + has_c0 : -1; }
  int in_lens() const { return has_lens ? 2 + has_h0 + has_c0 + has_peep : -1; }
  int in_rbh() const { return has_rbh ? 2 + has_h0 + has_c0 + has_peep + has_lens : -1; }
  int in_wt() const { return has_proj ? 2 + has_h0 + has_c0 + has_peep + has_lens + has_rbh : -1; }
  int in_xb() const { return has_xb ? in_wt() + 1 : -1; }
  int num_inputs() const { return 2 + has_h0 + has_c0 + has_peep + has_lens + has_rbh + has_proj + has_xb; }
};

std::vector<int64_t> rnn_ints(const RnnSpec& s);
// The spec of an Extern "rnn" node; nullopt for any other node or malformed ints.
std::optional<RnnSpec> rnn_spec(NodeRef n);
std::optional<RnnSpec> rnn_spec_of_ints(const std::vector<int64_t>& ints);
// "" when these operands, ints and result type make a valid rnn node; else what is wrong.
std::string check_rnn(const std::vector<NodeRef>& in, DType dt, const Shape& shape, const std::vector<int64_t>& ints);
// Builds the node (checked); absent optional inputs are nullptr and must agree with the spec
// (xp is X under `has_proj`, and wt, xb its WT and xb).
NodeRef rnn_call(const RnnSpec& s, NodeRef xp, NodeRef rt, NodeRef h0, NodeRef c0, NodeRef peep, NodeRef lens, NodeRef rbh,
                 NodeRef wt = nullptr, NodeRef xb = nullptr);

// The ONNX activation name (case-insensitive) -> kind with ONNX's default alpha/beta; nullopt
// when unknown.
std::optional<RnnAct> rnn_act_named(const std::string& name);
bool rnn_act_takes_alpha(RnnActKind k);
bool rnn_act_takes_beta(RnnActKind k);
const char* rnn_act_name(RnnActKind k);
// The activation in double (the reference the kernels are tested against).
double rnn_activate(const RnnAct& a, double x);

}  // namespace lathe
