// page_release_test.cpp — release_pages (core/runtime/page_release.h): the pages of a mapped
// file leave the process but stay in the page cache (a warm start reads nothing from disk);
// a page written since it was mapped and heap memory keep their values.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/runtime/host_tensor.h"
#include "core/runtime/mapped_file.h"
#include "core/runtime/page_release.h"

namespace lathe {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// -1: /proc/self/pagemap unreadable; else whether the page at p is mapped in this process.
int mapped_here(const void* p) {
  int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  uint64_t e = 0;
  off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / kPage * sizeof e);
  ssize_t got = ::pread(fd, &e, sizeof e, at);
  ::close(fd);
  if (got != static_cast<ssize_t>(sizeof e)) return -1;
  return (e >> 63) & 1;
}

// Whether the page at p is in memory (for a file mapping: in the page cache, mapped here or not).
bool resident(const void* p) {
  unsigned char v = 0;
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) / kPage * kPage);
  EXPECT_EQ(mincore(page, kPage, &v), 0);
  return v & 1;
}

unsigned char pattern(size_t i) { return static_cast<unsigned char>((i * 131 + i / 4096) & 0xff); }

TEST(PageRelease, MappedFilePagesLeaveTheProcessButStayInThePageCache) {
  const size_t pages = 37;  // an odd count, and the range starts and ends mid-page below
  std::string path = (std::filesystem::temp_directory_path() / ("lathe-page-release-" + std::to_string(getpid()))).string();
  {
    std::vector<unsigned char> bytes(pages * kPage);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern(i);
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(f);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fflush(f);
    fsync(fileno(f));  // clean pages, as a model's are: the page cache may drop them any time
    std::fclose(f);
  }
  auto file = MappedFile::open(path);
  std::remove(path.c_str());  // the mapping keeps the data
  auto* bytes = const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(file->data()));
  unsigned sum = 0;
  for (size_t i = 0; i < pages * kPage; i += kPage) sum += bytes[i];  // touch every page
  if (mapped_here(bytes) < 0) GTEST_SKIP() << "/proc/self/pagemap is not readable here";
  for (size_t q = 0; q < pages; ++q) ASSERT_EQ(mapped_here(bytes + q * kPage), 1) << "page " << q << " sum " << sum;
  const size_t written = 5;
  bytes[written * kPage + 3] = static_cast<unsigned char>(pattern(written * kPage + 3) ^ 0xff);  // a private copy

  // [half a page in, half a page before the end): pages 1 .. pages-2 are whole
  ReleasedPages r = release_pages(bytes + kPage / 2, (pages - 1) * kPage);
  EXPECT_EQ(r.unmapped, (pages - 3) * kPage);
  EXPECT_EQ(r.paged_out, kPage) << "the written page is anonymous: paged out, never dropped";
  for (size_t q = 0; q < pages; ++q) {
    bool whole = q >= 1 && q + 1 < pages;
    if (q == written) continue;
    EXPECT_EQ(mapped_here(bytes + q * kPage), whole ? 0 : 1) << "page " << q;
    EXPECT_TRUE(resident(bytes + q * kPage)) << "page " << q << " left the page cache";
  }
  for (size_t i = 0; i < pages * kPage; ++i) {
    unsigned char want = pattern(i);
    if (i == written * kPage + 3) want ^= 0xff;
    ASSERT_EQ(bytes[i], want) << "byte " << i;
  }
}

TEST(PageRelease, HeapPagesKeepTheirValues) {
  HostTensor t(DType::F32, {3, 100003});  // ~1.1 MiB, odd size
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = static_cast<float>(i % 977) - 0.5f;
  ReleasedPages r = release_pages(t.data(), t.nbytes());
  EXPECT_EQ(r.unmapped, 0u) << "anonymous pages must never be dropped";
  for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.ptr<float>()[i], static_cast<float>(i % 977) - 0.5f) << i;
  EXPECT_EQ(release_pages(t.data(), 0).unmapped, 0u);
  EXPECT_EQ(release_pages(nullptr, 0).paged_out, 0u);
}

}  // namespace
}  // namespace lathe
