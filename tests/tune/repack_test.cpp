// repack_test.cpp — GEMM candidates and records with other blocks than the build's read the
// weights packed once in their own layout (loop::repack_for), not packed on every run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "backends/backend.h"
#include "backends/tune_measure.h"
#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/interp/interp.h"
#include "core/loop/loop_print.h"
#include "core/loop/repack.h"
#include "core/runtime/random.h"
#include "core/tune/records.h"
#include "core/tune/search.h"
#include "tune_check.h"
#include "tests/backends/test_env.h"

namespace lathe {
namespace {

using namespace tune_test;

using test::sin_weights;
using test::ScopedEnv;

struct Blocks {
  long mr = 0, nr = 0, kc = 0, mc = 0, nc = 0;
};
Blocks blocks_of(const loop::LoopFunc& f) {
  Blocks b;
  EXPECT_EQ(std::sscanf(f.schedule_log.at(0).c_str(), "matmul: MR=%ld NR=%ld KC=%ld MC=%ld NC=%ld", &b.mr, &b.nr, &b.kc,
                        &b.mc, &b.nc), 5) << f.schedule_log.at(0);
  return b;
}

int matmul_kernel(const Program& p) {
  int k = -1;
  for (int i = 0; i < p.num_kernels(); ++i)
    if (p.kg.kernels[i].kind == "matmul") k = i;
  return k;
}

// Before: a candidate keeps the prepacked weights only if its KC and MR (NR) are the
// heuristic's; any other packs them on every run (and loses to the heuristic by that copy),
// and an applied record with other blocks did the same in the tuned program. Now the record's
// build packs them in its layout once, and the measurer times the candidate that way. Odd
// sizes, B (a matmul's weights, batch rows 1, 49 and 64) and A (a convolution's weights, W · X,
// batch 1 and 2, stride 2), against the interpreter.
TEST(TuneRepack, OtherBlocksReadTheWeightsPackedOnceInTheirLayout) {
  struct Case { std::string what; Graph g; bool b_side; };
  Conv2dOptions same, strided;
  same.padding = {1, 1};
  strided.padding = {1, 1};
  strided.stride = {2, 2};
  std::vector<Case> cases;
  for (int64_t m : {1, 49, 64}) {
    Tensor x = input("x", {m, 131});
    cases.push_back({"matmul " + std::to_string(m) + "x131 . 131x67",
                     Graph::from_outputs({{"y", matmul(x, from_host(sin_weights({131, 67}, 1))).node()}}), true});
  }
  {
    Tensor x = input("x", {2, 41, 11, 11});
    cases.push_back({"conv n2 c41 11x11 k37 3x3", Graph::from_outputs({{"y", relu(conv2d(x, from_host(sin_weights({37, 41, 3, 3}, 2)),
                                                                                         from_host(sin_weights({37}, 5)), same)).node()}}), false});
  }
  {
    Tensor x = input("x", {1, 17, 23, 23});
    cases.push_back({"conv n1 c17 23x23 k31 3x3 stride 2",
                     Graph::from_outputs({{"y", conv2d(x, from_host(sin_weights({31, 17, 3, 3}, 3)), std::nullopt, strided).node()}}), false});
  }
  const int lanes = loop::host_matmul_params().lanes;
  int checked = 0;
  for (Case& c : cases) {
    // weights are prepacked by default only when larger than the last-level cache (B) or for
    // few positions (A): the B cases ask for all while the program is built
    std::optional<ScopedEnv> all;
    if (c.b_side) all.emplace("LATHE_PREPACK", "all");
    Program p = build_program(c.g);
    const int k = matmul_kernel(p);
    if (k < 0) continue;  // (one row: a matrix-vector product, no GEMM)
    const loop::LoopFunc& heur = p.funcs[k];
    const std::string side = c.b_side ? " B prepacked" : " A prepacked";
    // which side the build packs depends on the job split (the thread count) and the row count
    if (heur.schedule_log.at(0).find(side) == std::string::npos) continue;
    ++checked;
    const Blocks h = blocks_of(heur);
    // other blocks: KC 64 (K 131 and 369: blocks of 48 and 64 against the build's 136 and
    // 192) and MR 4 where the build's is not
    loop::MatmulParams mp;
    mp.mr = h.mr == 4 ? 5 : 4;
    mp.nr = (int)h.nr;
    mp.lanes = lanes;
    mp.kc = 64;
    mp.mc = mp.mr * 16;
    mp.nc = (int)h.nc;
    const std::vector<std::string> schedule{tune::matmul_line(mp)};
    loop::LoopFunc plain = tune::replay(p.kg, k, schedule);
    // (without the repacking: the kernel packs the weights itself)
    ASSERT_EQ(plain.schedule_log.at(0).find(side), std::string::npos) << c.what << ": " << plain.schedule_log[0];
    // the tuned program (a record that beat the heuristic)
    tune::Record r;
    r.hash = tune::structural_hash(p.kg, k);
    r.target = tune::target_of("c");
    r.kernel = p.kg.kernels[k].name;
    r.kind = "matmul";
    r.schedule = schedule;
    r.ms = 1;
    r.baseline_ms = 2;
    std::vector<std::string> notes;
    int applied = 0;
    Executable e = compile_tuned(c.g, "c", {r}, &notes, &applied);
    ASSERT_EQ(applied, 1) << c.what;
    const loop::LoopFunc& f = e.program().funcs.at(k);
    const Blocks t = blocks_of(f);
    EXPECT_TRUE(t.kc != h.kc || t.mr != h.mr) << c.what << ": " << f.schedule_log[0];
    EXPECT_EQ(t.mr, mp.mr) << c.what;
    EXPECT_NE(f.schedule_log[0].find(side), std::string::npos) << c.what << ": " << f.schedule_log[0];
    const std::string ir = loop::print_loop(f);
    EXPECT_EQ(ir.find(c.b_side ? "pack B" : "pack A"), std::string::npos) << c.what << ": the kernel packs the weights per run";
    TensorMap in = random_inputs(c.g, 3);
    EXPECT_LT(max_diff(e.run(in), interpret(c.g, in)), 1e-3) << c.what;
    // the measurer times the candidate so too (its output checked against the heuristic's)
    BackendMeasurer m(p, "c", random_inputs(c.g, 1), 2);
    auto times = m.measure_each(k, {{&plain, &schedule}});
    ASSERT_EQ(times.size(), 1u);
    EXPECT_EQ(m.repacked, 1) << c.what;
    EXPECT_GT(times[0].ms, 0) << c.what << ": failed, or its output differs from the heuristic's";
    // the heuristic's own blocks need no second copy
    KernelGraph kg = p.kg;
    loop::MatmulParams hp = mp;
    hp.mr = (int)h.mr, hp.kc = (int)h.kc, hp.mc = (int)h.mc;
    EXPECT_FALSE(loop::repack_for(kg, k, hp)) << c.what;
    EXPECT_EQ(kg.buffers.size(), p.kg.buffers.size()) << c.what;
  }
  EXPECT_GE(checked, 2) << "no case had prepacked weights";
}

}  // namespace
}  // namespace lathe
