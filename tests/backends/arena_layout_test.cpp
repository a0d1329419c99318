// arena_layout_test.cpp — where intermediates live: staggered phases for large buffers
// (memory_plan.cpp) and the huge-page arena (arena_alloc.cpp), against the interpreter.
#include <cstdlib>
#include <map>
#include <set>

#include "core/ir/build.h"
#include "core/runtime/arena_alloc.h"
#include "core/schedule/memory_plan.h"
#include "diff_util.h"
#include "test_env.h"

namespace lathe {
namespace {

using test::ScopedEnv;

// A chain over power-of-two feature maps (each kernel reads the last two maps, so several
// are live at once) plus odd-sized ones between them.
Graph chain(int64_t c, int64_t h, int64_t w, int steps) {
  NodeRef x = prim::input("x", DType::F32, {1, c, h, w});
  NodeRef odd = prim::input("o", DType::F32, {1, c, h - 3, w - 5});
  NodeRef prev = x, cur = prim::copy(prim::unary(Op::Neg, x));
  std::map<std::string, NodeRef> outs;
  for (int i = 0; i < steps; ++i) {
    NodeRef next = prim::copy(prim::binary(Op::Add, prim::unary(Op::Exp2, prim::unary(Op::Neg, cur)), prev));
    odd = prim::copy(prim::unary(Op::Sin, odd));
    prev = cur, cur = next;
  }
  return Graph::from_outputs({{"y", cur}, {"z", odd}});
}

// Every kernel's arena buffers: pairwise disjoint unless one is written in place of the other.
void expect_disjoint(const Program& p, const MemoryPlan& m) {
  for (auto& k : p.kg.kernels) {
    std::vector<int> bs = k.inputs;
    bs.push_back(k.output);
    for (size_t i = 0; i < bs.size(); ++i)
      for (size_t j = i + 1; j < bs.size(); ++j) {
        int a = bs[i], b = bs[j];
        if (a == b || m.offset[a] < 0 || m.offset[b] < 0) continue;
        if (m.in_place_of[a] == b || m.in_place_of[b] == a) continue;
        bool apart = m.offset[a] + m.bytes[a] <= m.offset[b] || m.offset[b] + m.bytes[b] <= m.offset[a];
        EXPECT_TRUE(apart) << "kernel " << k.id << ": buffers " << a << " and " << b << " overlap";
      }
  }
}

TEST(ArenaLayout, LargeBuffersOfOneKernelStartAtDifferentPhases) {
  ScopedEnv on("LATHE_ARENA_STAGGER", "1");
  // 32 x 64 x 64 floats: 512 KiB maps (period 64 KiB); 8 x 32 x 32: 32 KiB (period 4 KiB)
  for (auto [c, h, w] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{32, 64, 64}, {8, 32, 32}}) {
    Program p = build_program(chain(c, h, w, 5));
    MemoryPlan m = plan_memory(p.kg, p.funcs, {});
    expect_disjoint(p, m);
    const int64_t bytes = c * h * w * 4, period = bytes >= (512 << 10) ? 65536 : 4096;
    int checked = 0;
    for (auto& k : p.kg.kernels) {
      std::set<int64_t> phases;
      int n = 0;
      for (int b : k.inputs)
        if (m.offset[b] >= 0 && m.bytes[b] == bytes && m.in_place_of[k.output] != b) ++n, phases.insert(m.offset[b] % period);
      if (m.offset[k.output] >= 0 && m.bytes[k.output] == bytes && m.in_place_of[k.output] < 0)
        ++n, phases.insert(m.offset[k.output] % period);
      EXPECT_EQ(static_cast<int>(phases.size()), n) << "kernel " << k.id << " of the " << bytes << "-byte chain";
      checked += n > 1;
    }
    EXPECT_GT(checked, 0);
    // the pad stays small: at most one period per buffer over the packing without it
    ScopedEnv off("LATHE_ARENA_STAGGER", "0");
    MemoryPlan plain = plan_memory(p.kg, p.funcs, {});
    EXPECT_LE(m.arena_bytes, plain.arena_bytes + 8 * period) << m.summary() << " vs " << plain.summary();
    for (size_t b = 0; b < plain.offset.size(); ++b)
      if (plain.offset[b] >= 0 && plain.bytes[b] == bytes) {
        EXPECT_EQ(plain.offset[b] % 4096, 0);
      }
  }
}

TEST(ArenaLayout, SmallBuffersAreNotMoved) {
  ScopedEnv on("LATHE_ARENA_STAGGER", "1");
  Program p = build_program(chain(3, 7, 11, 4));  // 924-byte maps
  MemoryPlan m = plan_memory(p.kg, p.funcs, {});
  expect_disjoint(p, m);
  for (size_t b = 0; b < m.offset.size(); ++b)
    if (m.offset[b] >= 0) {
      EXPECT_EQ(m.offset[b] % 64, 0);
    }
  EXPECT_LE(m.arena_bytes, m.unshared_bytes);
}

TEST(ArenaLayout, HugeArenaIsAlignedAndZeroed) {  // zeroed when huge (touched up front)
  for (const char* huge : {"1", "0"}) {
    ScopedEnv e("LATHE_ARENA_HUGE", huge);
    for (int64_t bytes : {int64_t(1), int64_t(4097), int64_t(3) << 20, (int64_t(5) << 20) + 192}) {
      auto a = alloc_arena(bytes);
      ASSERT_NE(a, nullptr);
      auto at = reinterpret_cast<uintptr_t>(a.get());
      EXPECT_EQ(at % 64, 0u);
      if (std::string(huge) == "1" && bytes >= (int64_t(2) << 20)) {
        EXPECT_EQ(at % (uintptr_t(2) << 20), 0u);
        for (int64_t i : {int64_t(0), bytes / 2, bytes - 1}) {
          EXPECT_EQ(a[i], std::byte{0});
        }
      }
      a[bytes - 1] = std::byte{7};  // writable to its last byte
    }
  }
}

// Staggered and plain layouts, huge arena or not: the interpreter's results, on chains of
// power-of-two and odd maps, batch 1 (and prime sizes in the odd maps).
TEST(ArenaLayout, StaggeredPlansMatchInterpreter) {
  for (const char* st : {"1", "0"})
    for (const char* huge : {"1", "0"}) {
      ScopedEnv a("LATHE_ARENA_STAGGER", st), b("LATHE_ARENA_HUGE", huge);
      test::DiffBatch batch;
      batch.add(std::string("32x64x64 stagger ") + st + " huge " + huge, chain(32, 64, 64, 4));
      batch.add(std::string("8x32x32 stagger ") + st + " huge " + huge, chain(8, 32, 32, 3));
      batch.add(std::string("5x37x41 stagger ") + st + " huge " + huge, chain(5, 37, 41, 3));
      EXPECT_EQ(batch.run(), 0);
    }
}

}  // namespace
}  // namespace lathe
