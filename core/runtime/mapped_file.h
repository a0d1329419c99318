// mapped_file.h — whole files memory-mapped read-only, and the memory budget that large
// allocations are checked against.
//
// Model weights are used where they lie in the file: load_onnx and the .lathe sidecar map
// the file once (MAP_PRIVATE, so nothing can write through to it) and wrap tensors around
// byte ranges of the mapping (HostTensor::over), which keep the mapping alive. The pages
// are the page cache's: a warm load reads nothing, and the weights are resident once.
// A file replaced by rename (save_graph, atomic_write) leaves an existing mapping intact.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/host_tensor.h"

namespace lathe {

class MappedFile {
 public:
  // UserError naming the path when the file cannot be opened or mapped. An empty file
  // maps to size() == 0 and data() == nullptr.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Reads bytes [offset, offset + n) into dst with pread (not through the mapping, whose
  // pages then stay untouched). UserError when the file cannot be read.
  void read(size_t offset, void* dst, size_t n) const;

 private:
  MappedFile() = default;
  int fd_ = -1;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Which file bytes [p, p + n) are in, when they lie inside one live MappedFile's mapping:
// "dev:inode:size:mtime:ctime:offset" of the file as it was opened (a rewrite, a rename over
// it, a touch all change it); "" when they are not a mapped file's, or when a page of them was
// written in this process (the private mapping's copy: no longer the file's bytes). Cheaper
// than reading them for a key (prepack's disk cache: a model's weights, never read on a warm
// start).
std::string file_identity(const void* p, size_t n);

// A tensor over bytes [offset, offset + nbytes) of the mapping, without copying when the
// address suits the dtype's alignment; else the bytes are read (pread) into an aligned
// buffer, leaving the mapping's pages for them untouched: at once below kDeferUnalignedBytes,
// else on the tensor's first data() (HostTensor::deferred; its bytes() are the mapping's
// until then). The caller checks bounds.
constexpr size_t kDeferUnalignedBytes = size_t(64) << 10;
HostTensor tensor_in_file(const std::shared_ptr<const MappedFile>& file, size_t offset, DType dtype,
                          std::vector<int64_t> shape);

// Bytes this process may still allocate: MemAvailable + SwapFree (/proc/meminfo), capped
// by the cgroup's memory.max, or $LATHE_MEMORY_LIMIT (bytes; suffixes K, M, G) when set.
// 0 when nothing can be read (then nothing is checked).
uint64_t memory_budget();
// Throws UserError "WHAT needs N MiB, more than the M MiB of memory available" when
// `bytes` exceeds memory_budget().
void check_memory(uint64_t bytes, const std::string& what);
// "123", "64K", "512M", "2G", "2GiB" (binary units) as bytes; 0 when malformed.
uint64_t parse_size(const char* s);
// "12.3 MiB" / "1.20 GiB".
std::string format_bytes(uint64_t bytes);

}  // namespace lathe
