// sidecar.h — the binary sidecar of a .lathe file (NAME.lathe.bin): large constants' bytes.
//
// save_graph() keeps the text readable and quick to write: a Const tensor of more than
// kInlineElements elements is printed as `Const {bin=[OFFSET, NBYTES] check=HEX}` and its
// bytes go to the sidecar, row-major, at OFFSET (64-byte aligned, so load_graph can use
// them in place from a mapping of the file). check is a hash of the size and 64 samples of
// the bytes: it catches a sidecar from another save, not bit rot.
//
// Layout: a 64-byte header — "LATHEBIN", u32 version (1), u32 0, u64 file size, zeros —
// then each tensor's bytes, each at a multiple of 64 (zero padding between).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/host_tensor.h"
#include "core/runtime/mapped_file.h"

namespace lathe {

constexpr int64_t kInlineElements = 64;     // up to this many elements stay in the text
constexpr uint64_t kSidecarHeader = 64;

// What print_graph puts in a sidecar: each tensor at its offset, and the file's size.
struct SidecarPlan {
  std::vector<std::pair<uint64_t, std::shared_ptr<const HostTensor>>> tensors;
  uint64_t size = kSidecarHeader;
  uint64_t add(const std::shared_ptr<const HostTensor>& t);  // returns the offset
};

uint64_t sidecar_check(const void* data, uint64_t nbytes);
std::string check_text(uint64_t check);  // 16 hex digits

// Writes the plan to `path` (the caller renames it into place). UserError on failure, with
// the partial file removed.
void write_sidecar(const std::string& path, const SidecarPlan& plan);

// Opens a sidecar lazily for the parser; tensor() says what is wrong in words (for the
// parser to report at the Const's line), or returns the tensor over the mapped bytes.
class SidecarReader {
 public:
  explicit SidecarReader(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // error empty on success.
  HostTensor tensor(uint64_t offset, uint64_t nbytes, uint64_t check, DType dt, const std::vector<int64_t>& shape,
                    std::string& error);

 private:
  std::string path_;
  bool opened_ = false;
  std::string open_error_;
  uint64_t declared_ = 0;
  std::shared_ptr<const MappedFile> file_;
};

}  // namespace lathe
