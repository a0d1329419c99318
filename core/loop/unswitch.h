// unswitch.h — loop unswitching in the default schedule. A condition inside a loop nest that
// depends on one outer loop's variable alone (a concat's "which input" test `i1 < 64` on the
// channel loop, a border test of a pad along the rows) is evaluated for every value of that
// variable; the values fall into a few versions (the tuple of truths of all such conditions),
// and the loop's body becomes an if-tree over the conditions with one copy of the body per
// version, each with its conditions folded to constants. The copies' inner loops then carry
// no invariant guards: a bilinear Resize concatenated with a skip connection had every load
// of both inputs masked by the channel test, and ran 4-wide with branches (unet_small's
// up-sampling concat, 1.38 ms for 2 MB).
#pragma once
#include "core/loop/loop_ir.h"

namespace lathe::loop {

// Unswitches every loop with a constant extent (at most kUnswitchScan) and inner loops whose
// body tests such conditions, where they give at most kUnswitchVersions versions and the
// kernel's statement count stays within kUnswitchGrowth times the original. Conditions true
// (or false) for the whole loop are folded without a copy. Appends "unswitch VAR (N
// versions)" to f.schedule_log. Returns the number of loops changed. LATHE_UNSWITCH=0: none.
int unswitch_invariant_guards(LoopFunc& f);
inline constexpr int kUnswitchVersions = 4;
inline constexpr int64_t kUnswitchScan = 1 << 16;
inline constexpr int kUnswitchGrowth = 6;

}  // namespace lathe::loop
