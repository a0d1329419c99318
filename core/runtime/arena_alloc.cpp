// arena_alloc.cpp — alloc_arena: 2 MiB-aligned, huge-page advised, pre-touched arenas.
#include "core/runtime/arena_alloc.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/ir/diag.h"

namespace lathe {

namespace {
constexpr int64_t kHuge = int64_t(2) << 20;
}

bool arena_huge_pages() {
  const char* e = std::getenv("LATHE_ARENA_HUGE");
  return e && std::string(e) == "1";
}

std::shared_ptr<std::byte[]> alloc_arena(int64_t bytes) {
  const int64_t size = (std::max<int64_t>(bytes, 1) + 63) / 64 * 64;
  auto fail = [&] { return UserError("out of memory allocating a " + std::to_string(size >> 20) + " MiB buffer arena"); };
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (size >= kHuge && arena_huge_pages()) {
    // over-map by 2 MiB, keep the aligned middle, return the rest
    const int64_t whole = (size + kHuge - 1) / kHuge * kHuge;
    const size_t span = static_cast<size_t>(whole + kHuge);
    void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw fail();
    auto base = reinterpret_cast<uintptr_t>(m);
    uintptr_t lo = (base + kHuge - 1) / uintptr_t(kHuge) * uintptr_t(kHuge);
    if (lo > base) ::munmap(m, lo - base);
    uintptr_t end = base + span, hi = lo + static_cast<uintptr_t>(whole);
    if (end > hi) ::munmap(reinterpret_cast<void*>(hi), end - hi);
    ::madvise(reinterpret_cast<void*>(lo), static_cast<size_t>(whole), MADV_HUGEPAGE);  // a hint
    // touched here, once, rather than by whichever kernel first writes each page
    std::memset(reinterpret_cast<void*>(lo), 0, static_cast<size_t>(whole));
    return std::shared_ptr<std::byte[]>(reinterpret_cast<std::byte*>(lo),
                                        [whole](std::byte* q) { ::munmap(q, static_cast<size_t>(whole)); });
  }
#endif
  // not touched here: pages are faulted in by the kernels that first write them (as before the
  // switch existed; a memset would put every page of the plan in the cold start's path)
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, static_cast<size_t>(size)));
  if (!p) throw fail();
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { std::free(q); });
}

}  // namespace lathe
