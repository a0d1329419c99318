// mapped_file.cpp — read-only file mappings, tensors over them, and the memory budget.
#include "core/runtime/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core/ir/diag.h"

namespace lathe {

namespace {

// The live mappings, for file_identity: start, size and the file's identity when opened.
struct Mapped {
  const std::byte* data;
  size_t size;
  std::string id;
};
std::mutex& mapped_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<Mapped>& mapped_files() {
  static std::vector<Mapped> v;
  return v;
}

// Whether every page of [p, p + n) still holds the file's bytes: none was written (a private
// mapping's written page is an anonymous copy, present or swapped: /proc/self/pagemap bits 63
// and 61, 62). False when pagemap cannot be read.
bool unwritten(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p) / page, hi = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page;
  int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  constexpr uint64_t kPresent = uint64_t(1) << 63, kSwapped = uint64_t(1) << 62, kFile = uint64_t(1) << 61;
  std::vector<uint64_t> e(4096);
  bool ok = true;
  for (uintptr_t a = lo; ok && a < hi;) {
    const size_t count = std::min<size_t>(e.size(), hi - a);
    if (::pread(fd, e.data(), count * 8, static_cast<off_t>(a * 8)) != static_cast<ssize_t>(count * 8)) ok = false;
    for (size_t i = 0; ok && i < count; ++i) ok = !(e[i] & kSwapped) && (!(e[i] & kPresent) || (e[i] & kFile));
    a += count;
  }
  ::close(fd);
  return ok;
}

}  // namespace

std::string file_identity(const void* p, size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mapped_mu());
    for (const Mapped& m : mapped_files())
      if (b >= m.data && n <= m.size && static_cast<size_t>(b - m.data) <= m.size - n) {
        id = m.id + ":" + std::to_string(b - m.data);
        break;
      }
  }
  return !id.empty() && unwritten(p, n) ? id : "";
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw UserError("cannot read " + path + ": " + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw UserError("cannot open " + path + ": it is a directory");
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ > 0) {
    // Private and writable: a stray write copies one page instead of faulting, and never
    // reaches the file. Pages are read on first touch.
    void* p = ::mmap(nullptr, m->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw UserError("cannot map " + path + " (" + format_bytes(m->size_) + "): " + std::strerror(e));
    }
    m->data_ = static_cast<std::byte*>(p);
    const std::string id = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
                           std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
    std::lock_guard<std::mutex> lock(mapped_mu());
    mapped_files().push_back({m->data_, m->size_, id});
  }
  m->fd_ = fd;  // kept for read()
  return m;
}

MappedFile::~MappedFile() {
  if (data_) {
    {
      std::lock_guard<std::mutex> lock(mapped_mu());
      auto& v = mapped_files();
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i].data == data_) {
          v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
    }
    ::munmap(data_, size_);
  }
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::read(size_t offset, void* dst, size_t n) const {
  auto* out = static_cast<char*>(dst);
  while (n) {
    ssize_t r = ::pread(fd_, out, std::min<size_t>(n, size_t(1) << 30), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw UserError("cannot read " + path_ + " at offset " + std::to_string(offset) + ": " +
                                (r < 0 ? std::strerror(errno) : "the file is shorter than when it was opened"));
    out += r;
    offset += static_cast<size_t>(r);
    n -= static_cast<size_t>(r);
  }
}

HostTensor tensor_in_file(const std::shared_ptr<const MappedFile>& file, size_t offset, DType dtype,
                          std::vector<int64_t> shape) {
  const std::byte* p = file->data() + offset;
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(dtype) == 0) {
    // An aliasing pointer: shares the mapping's ownership, points at the tensor's bytes.
    std::shared_ptr<std::byte[]> keep(std::const_pointer_cast<MappedFile>(file), const_cast<std::byte*>(p));
    return HostTensor(dtype, std::move(shape), std::move(keep));
  }
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(std::max<int64_t>(d, 0));
  if (n < kDeferUnalignedBytes) {
    HostTensor t(dtype, std::move(shape));
    if (t.nbytes()) file->read(offset, t.data(), t.nbytes());
    return t;
  }
  // read on first use: a weight that the build packs (from the mapping) is never copied
  return HostTensor::deferred(dtype, std::move(shape), p, file, [file, offset, n](void* dst) { file->read(offset, dst, n); });
}

uint64_t parse_size(const char* s) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno || end == s) return 0;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k') mul = uint64_t(1) << 10, ++end;
  else if (*end == 'M' || *end == 'm') mul = uint64_t(1) << 20, ++end;
  else if (*end == 'G' || *end == 'g') mul = uint64_t(1) << 30, ++end;
  if (*end == 'i' || *end == 'B') ++end;
  if (*end == 'B') ++end;
  return *end ? 0 : v * mul;
}

namespace {

uint64_t meminfo_kb(const std::string& text, const char* key) {
  size_t p = text.find(key);
  if (p == std::string::npos) return 0;
  return std::strtoull(text.c_str() + p + std::strlen(key), nullptr, 10);
}

}  // namespace

uint64_t memory_budget() {
  if (const char* lim = std::getenv("LATHE_MEMORY_LIMIT"); lim && *lim) {
    if (uint64_t v = parse_size(lim)) return v;
  }
  uint64_t budget = 0;
  {
    std::ifstream f("/proc/meminfo");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    budget = (meminfo_kb(text, "MemAvailable:") + meminfo_kb(text, "SwapFree:")) * 1024;
  }
  std::ifstream cg("/sys/fs/cgroup/memory.max"), cur("/sys/fs/cgroup/memory.current");
  std::string max_s;
  uint64_t used = 0;
  if (cg >> max_s && max_s != "max" && cur >> used) {
    uint64_t max = std::strtoull(max_s.c_str(), nullptr, 10);
    uint64_t left = max > used ? max - used : 0;
    if (budget == 0 || left < budget) budget = left;
  }
  return budget;
}

void check_memory(uint64_t bytes, const std::string& what) {
  uint64_t budget = memory_budget();
  if (budget && bytes > budget)
    throw UserError(what + " needs " + format_bytes(bytes) + ", more than the " + format_bytes(budget) +
                    " of memory available");
}

std::string format_bytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
  else if (b >= (uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace lathe
