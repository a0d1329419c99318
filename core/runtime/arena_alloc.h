// arena_alloc.h — the memory a program's intermediates live in (memory_plan.h places them).
//
// An arena of 2 MiB or more is mapped 2 MiB-aligned and advised into transparent huge pages
// (madvise mode), then touched once: its physical placement is then contiguous, so which L2
// sets a buffer falls in (Zen 3's L2 is physically indexed: 64 KiB a way) follows from its
// offset in the plan, the same in every process, rather than from where the kernel happened
// to put each 4 KiB page. Off by default (LATHE_ARENA_HUGE=1 turns it on): at load 9 on the
// shared 2-core VM unet_small's one-thread CPU time per run did not separate from the plain
// arena's; it is the switch for a quiet A/B of the per-process spread. Otherwise the arena
// is aligned_alloc memory, untouched until a kernel writes it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace lathe {

// 64-byte aligned, at least `bytes`; 2 MiB aligned and zero-filled when huge pages are asked for.
std::shared_ptr<std::byte[]> alloc_arena(int64_t bytes);

// Whether alloc_arena maps large arenas into huge pages (LATHE_ARENA_HUGE=1; default off).
bool arena_huge_pages();

}  // namespace lathe
