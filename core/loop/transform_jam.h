// transform_jam.h — the jam schedule primitive (row blocking), beside transform.h's.
#pragma once
#include <string>

#include "core/loop/loop_ir.h"

namespace lathe::loop {

// Row blocking (unroll and jam): R iterations of an output loop run together, each
// statement of its body R times in a row and the R copies of an inner loop fused into one:
//   for v in 0..E: { S1; for r: B }  →  for v in 0..E/R: { S1[v*R]; …; S1[v*R+R-1];
//                                                        for r: { B[v*R]; …; B[v*R+R-1] } }
// (locals renamed per copy: acc, acc_1, …). A softmax row's three short passes then carry R
// independent chains (max, sum) instead of one. Needs a constant extent R divides,
// independent iterations (as parallel), innermost loops in the body with extents that do
// not depend on v, and no local arrays; R from 2 to 8.
void jam(LoopFunc& f, std::string loop, int factor);

}  // namespace lathe::loop
