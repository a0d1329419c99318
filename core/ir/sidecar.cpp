// sidecar.cpp — writing and reading NAME.lathe.bin (see sidecar.h).
#include "core/ir/sidecar.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/ir/diag.h"

namespace lathe {

namespace {
constexpr char kMagic[8] = {'L', 'A', 'T', 'H', 'E', 'B', 'I', 'N'};
constexpr uint32_t kVersion = 1;

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
}  // namespace

uint64_t SidecarPlan::add(const std::shared_ptr<const HostTensor>& t) {
  uint64_t off = (size + 63) / 64 * 64;
  tensors.push_back({off, t});
  size = off + t->nbytes();
  return off;
}

uint64_t sidecar_check(const void* data, uint64_t nbytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull ^ nbytes;
  auto mix = [&](uint64_t i) {
    for (uint64_t k = i; k < std::min(nbytes, i + 16); ++k) h = (h ^ p[k]) * 1099511628211ull;
  };
  if (nbytes <= 64 * 16) {
    mix(0);
    for (uint64_t i = 16; i < nbytes; i += 16) mix(i);
  } else {
    for (uint64_t s = 0; s < 64; ++s) mix((nbytes - 16) * s / 63);
  }
  return h;
}

std::string check_text(uint64_t check) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(check));
  return buf;
}

void write_sidecar(const std::string& path, const SidecarPlan& plan) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw UserError("cannot write " + path + ": " + std::strerror(errno));
  auto fail = [&](const std::string& why) {
    ::close(fd);
    std::remove(path.c_str());
    throw UserError("cannot write " + path + ": " + why);
  };
  unsigned char header[kSidecarHeader] = {};
  std::memcpy(header, kMagic, 8);
  std::memcpy(header + 8, &kVersion, 4);
  std::memcpy(header + 16, &plan.size, 8);
  if (!write_all(fd, header, sizeof header)) fail(std::strerror(errno));
  uint64_t pos = kSidecarHeader;
  static const char zeros[64] = {};
  for (auto& [off, t] : plan.tensors) {
    if (off < pos || off - pos >= 64) fail("internal: sidecar offsets out of order");
    if (off > pos && !write_all(fd, zeros, off - pos)) fail(std::strerror(errno));
    if (!write_all(fd, t->data(), t->nbytes())) fail(std::strerror(errno));
    pos = off + t->nbytes();
  }
  if (pos != plan.size) fail("internal: sidecar size mismatch");
  if (::close(fd) != 0) {
    std::remove(path.c_str());
    throw UserError("cannot write " + path + ": " + std::strerror(errno));
  }
}

HostTensor SidecarReader::tensor(uint64_t offset, uint64_t nbytes, uint64_t check, DType dt,
                                 const std::vector<int64_t>& shape, std::string& error) {
  error.clear();
  if (!opened_) {
    opened_ = true;
    try {
      file_ = MappedFile::open(path_);
      uint64_t declared = 0;
      if (file_->size() < kSidecarHeader || std::memcmp(file_->data(), kMagic, 8) != 0)
        open_error_ = path_ + " is not a Lathe sidecar (no LATHEBIN header)";
      else if (std::memcpy(&declared, file_->data() + 16, 8); declared < file_->size())
        open_error_ = path_ + " has " + std::to_string(file_->size()) + " bytes but its header says " +
                      std::to_string(declared) + " (overwritten by something else?)";
      declared_ = declared;
    } catch (const UserError& e) {
      open_error_ = e.diag().message;
    }
  }
  if (!open_error_.empty()) {
    error = open_error_;
    return {};
  }
  if (offset % 64 != 0 || offset < kSidecarHeader) {
    error = "offset " + std::to_string(offset) + " is not a tensor's place in " + path_ + " (a multiple of 64 past the header)";
    return {};
  }
  if (offset > file_->size() || nbytes > file_->size() - offset) {
    error = "its bytes [" + std::to_string(offset) + ", " + std::to_string(offset + nbytes) + ") lie past the end of " +
            path_ + " (" + std::to_string(file_->size()) + " bytes" +
            (declared_ > file_->size() ? "; its header says " + std::to_string(declared_) + ": the file is truncated" : "") + ")";
    return {};
  }
  uint64_t got = sidecar_check(file_->data() + offset, nbytes);
  if (got != check) {
    error = "its bytes in " + path_ + " at offset " + std::to_string(offset) + " do not match this file (check " +
            check_text(got) + ", expected " + check_text(check) + "): the sidecar belongs to another save";
    return {};
  }
  return tensor_in_file(file_, offset, dt, shape);
}

}  // namespace lathe
