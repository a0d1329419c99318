// page_release.cpp — see page_release.h.
#include "core/runtime/page_release.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace lathe {

ReleasedPages release_pages(const void* p, size_t n) {
  ReleasedPages r;
#if defined(__linux__) && defined(MADV_PAGEOUT)
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (hi <= lo) return r;
  // /proc/self/pagemap: one 64-bit entry per virtual page; bit 63 present, bit 61 a file
  // page (or shared memory), clear for anonymous pages, a private mapping's copies included
  int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return r;
  constexpr uint64_t kPresent = uint64_t(1) << 63, kFile = uint64_t(1) << 61;
  enum Kind { None, File, Anon };
  auto advise = [&](Kind kind, uintptr_t from, uintptr_t to) {
    if (kind == None || to <= from) return;
    if (madvise(reinterpret_cast<void*>(from), to - from, kind == File ? MADV_DONTNEED : MADV_PAGEOUT) == 0)
      (kind == File ? r.unmapped : r.paged_out) += to - from;
  };
  const size_t chunk = 4096;  // entries read at a time (16 MiB of address space)
  std::vector<uint64_t> entries(chunk);
  Kind run = None;
  uintptr_t run_start = lo;
  uintptr_t a = lo;
  while (a < hi) {
    size_t count = std::min<size_t>(chunk, (hi - a) / page);
    ssize_t got = ::pread(fd, entries.data(), count * sizeof(uint64_t), static_cast<off_t>(a / page * sizeof(uint64_t)));
    if (got < static_cast<ssize_t>(count * sizeof(uint64_t))) break;  // unreadable: stop here
    for (size_t i = 0; i < count; ++i, a += page) {
      uint64_t e = entries[i];
      Kind k = !(e & kPresent) ? None : (e & kFile) ? File : Anon;
      if (k != run) {
        advise(run, run_start, a);
        run = k;
        run_start = a;
      }
    }
  }
  advise(run, run_start, a);  // the last run (up to where the entries could be read)
  ::close(fd);
#else
  (void)p, (void)n;
#endif
  return r;
}

}  // namespace lathe
