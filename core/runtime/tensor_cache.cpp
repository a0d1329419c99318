// tensor_cache.cpp — the packed weights' files on disk. See tensor_cache.h.
#include "core/runtime/tensor_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "core/runtime/kernel_cache.h"
#include "core/runtime/mapped_file.h"

namespace lathe {

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full, kP3 = 0x165667B19E3779F9ull;
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

struct Digest {
  uint64_t a = 0, b = 0;
};

// One chunk: eight lanes of 8 bytes each per 64-byte step (independent multiply chains, so the
// loop runs at memory speed), the tail zero-padded; the length is mixed in, so the padding is
// not ambiguous.
Digest digest_chunk(const unsigned char* p, size_t n) {
  uint64_t v[8];
  for (int l = 0; l < 8; ++l) v[l] = kP1 * static_cast<uint64_t>(l + 1) + n;
  auto step = [&v](const unsigned char* q) {
    for (int l = 0; l < 8; ++l) {
      uint64_t w;
      std::memcpy(&w, q + 8 * l, 8);
      v[l] = rotl(v[l] + w * kP2, 31) * kP1;
    }
  };
  size_t i = 0;
  for (; i + 64 <= n; i += 64) step(p + i);
  if (i < n) {
    unsigned char tail[64] = {};
    std::memcpy(tail, p + i, n - i);
    step(tail);
  }
  Digest d{n * kP3, ~n * kP1};
  for (int l = 0; l < 8; ++l) {
    d.a = rotl(d.a ^ (v[l] * kP2), 27) * kP1 + kP3;
    d.b = rotl(d.b + rotl(v[l], 7 + 5 * l) * kP3, 23) * kP2 + kP1;
  }
  return {avalanche(d.a), avalanche(d.b ^ d.a)};
}

constexpr size_t kChunk = size_t(1) << 20;  // a digest per MiB, then the digest of those

constexpr size_t kHeaderBytes = 4096;  // the payload starts page-aligned
constexpr char kMagic[8] = {'L', 'A', 'T', 'H', 'E', 'P', 'K', '\n'};
constexpr uint32_t kVersion = 1;
constexpr int kMaxRank = 8;

struct Header {
  char magic[8];
  uint32_t version, dtype, rank, reserved;
  int64_t shape[kMaxRank];
  uint64_t nbytes;
  char key[64];     // the entry's key, NUL-padded
  char digest[32];  // content_digest of the payload
};
static_assert(sizeof(Header) <= kHeaderBytes, "header fits its page");

std::atomic<int> g_hits{0}, g_misses{0}, g_rejected{0}, g_stored{0};
std::atomic<uint64_t> g_mapped{0}, g_written{0};

bool trusted() {
  const char* e = std::getenv("LATHE_PACK_CACHE");
  return e && std::string(e) == "trust";
}

std::string entry_path(const std::string& key) { return tensor_cache_dir() + "/" + key + ".pack"; }

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t w = ::write(fd, c, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

Header make_header(const std::string& key, const HostTensor& t, const std::string& digest) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.dtype = static_cast<uint32_t>(t.dtype());
  h.rank = static_cast<uint32_t>(t.rank());
  for (size_t i = 0; i < t.rank(); ++i) h.shape[i] = t.shape()[i];
  h.nbytes = t.nbytes();
  std::memcpy(h.key, key.data(), std::min(key.size(), sizeof h.key));
  std::memcpy(h.digest, digest.data(), std::min(digest.size(), sizeof h.digest));
  return h;
}

}  // namespace

std::string content_digest(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  Digest d;
  if (n <= kChunk) {
    d = digest_chunk(p, n);
  } else {
    // fixed 1 MiB chunks (the digest does not depend on the threads), on up to two threads
    // from 8 MiB: a warm start digests every packed weight and its source once
    const size_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<Digest> parts(chunks);
    auto run = [&](size_t c0, size_t c1) {
      for (size_t c = c0; c < c1; ++c) parts[c] = digest_chunk(p + c * kChunk, std::min(kChunk, n - c * kChunk));
    };
    const size_t workers = n >= (size_t(8) << 20) ? std::min<size_t>(2, std::max(1u, std::thread::hardware_concurrency())) : 1;
    std::vector<std::thread> pool;
    for (size_t w = 1; w < workers; ++w) pool.emplace_back(run, chunks * w / workers, chunks * (w + 1) / workers);
    run(0, chunks / workers);
    for (auto& t : pool) t.join();
    d = digest_chunk(reinterpret_cast<const unsigned char*>(parts.data()), parts.size() * sizeof(Digest));
    d.a ^= avalanche(n + kP2);
  }
  char s[40];
  std::snprintf(s, sizeof s, "%016llx%016llx", static_cast<unsigned long long>(d.a), static_cast<unsigned long long>(d.b));
  return s;
}

// Off unless LATHE_PACK_CACHE is set (1, on or trust): the first start writes every packed copy
// (GPT-2: 0.47 GB), which costs a cold start more than a warm one gains (README).
bool tensor_cache_enabled() {
  const char* e = std::getenv("LATHE_PACK_CACHE");
  return e && *e && std::string(e) != "0";
}

uint64_t tensor_cache_max_bytes() {
  if (const char* e = std::getenv("LATHE_PACK_CACHE_MAX"); e && *e) {
    if (std::string(e) == "0") return 0;
    if (uint64_t v = parse_size(e)) return v;
  }
  return uint64_t(4) << 30;
}

std::string tensor_cache_dir() {
  if (const char* e = std::getenv("LATHE_PACK_CACHE_DIR"); e && *e) {
    ::mkdir(e, 0755);
    return e;
  }
  std::string d = cache_path("packed", "");
  if (!d.empty() && d.back() == '/') d.pop_back();
  return d;
}

HostTensor tensor_cache_load(const std::string& key, DType dtype, const std::vector<int64_t>& shape) {
  if (!tensor_cache_enabled() || static_cast<int>(shape.size()) > kMaxRank) return {};
  size_t nbytes = dtype_size(dtype);
  for (int64_t d : shape) nbytes *= static_cast<size_t>(std::max<int64_t>(d, 0));
  const std::string path = entry_path(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ++g_misses;
    return {};
  }
  struct stat st {};
  const size_t want = kHeaderBytes + nbytes;
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != want) {  // truncated, or another tensor's
    ::close(fd);
    ++g_rejected;
    return {};
  }
  // private and writable (mapped_file.cpp): a stray write copies a page and never reaches the file
  void* m = ::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file (also once it is replaced or evicted)
  if (m == MAP_FAILED) {
    ++g_rejected;
    return {};
  }
  std::shared_ptr<std::byte> mapping(static_cast<std::byte*>(m), [want](std::byte* q) { ::munmap(q, want); });
  Header h;
  std::memcpy(&h, m, sizeof h);
  bool ok = std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.version == kVersion &&
            h.dtype == static_cast<uint32_t>(dtype) && h.rank == shape.size() && h.nbytes == nbytes &&
            std::string(h.key, strnlen(h.key, sizeof h.key)) == key;
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = h.shape[i] == shape[i];
  const std::byte* payload = mapping.get() + kHeaderBytes;
  // (LATHE_PACK_CACHE=trust: not the payload's digest; the size, header and key still)
  if (ok && !trusted()) ok = std::string(h.digest, sizeof h.digest) == content_digest(payload, nbytes);
  if (!ok) {
    ++g_rejected;
    return {};
  }
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used: the last to be evicted
  ++g_hits;
  g_mapped += nbytes;
  std::shared_ptr<std::byte[]> keep(mapping, const_cast<std::byte*>(payload));
  return HostTensor(dtype, shape, std::move(keep));
}

bool tensor_cache_store(const std::string& key, const HostTensor& t) {
  if (!tensor_cache_enabled() || t.rank() > static_cast<size_t>(kMaxRank) || key.size() > 64) return false;
  const uint64_t max = tensor_cache_max_bytes(), total = kHeaderBytes + t.nbytes();
  if (total > max) return false;
  const std::string path = entry_path(key);
  // leave the disk at least 1 GiB free (a cache never fills a disk)
  struct statvfs vfs {};
  if (::statvfs(tensor_cache_dir().c_str(), &vfs) == 0 &&
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize < total + (uint64_t(1) << 30))
    return false;
  const std::string digest = content_digest(t.data(), t.nbytes());
  const Header h = make_header(key, t, digest);
  std::vector<char> head(kHeaderBytes, 0);
  std::memcpy(head.data(), &h, sizeof h);
  const std::string tmp = temp_path_for(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write_all(fd, head.data(), head.size()) && write_all(fd, t.data(), t.nbytes());
  ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  ++g_stored;
  g_written += total;
  tensor_cache_trim(max);
  return true;
}

namespace {

// The stores handed to the background: one thread, a queue, drained before the process exits
// (the holder is a function-local static made after cache_dir()'s, so destroyed before it).
struct Storer {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::string, HostTensor>> queue;
  int busy = 0;
  bool closing = false;
  std::thread thread;
  Storer() {
    thread = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        cv.wait(lock, [&] { return closing || !queue.empty(); });
        if (queue.empty()) return;
        auto job = std::move(queue.front());
        queue.pop_front();
        ++busy;
        lock.unlock();
        tensor_cache_store(job.first, job.second);
        job.second = HostTensor();
        lock.lock();
        --busy;
        cv.notify_all();
      }
    });
  }
  ~Storer() {
    {
      std::lock_guard<std::mutex> lock(mu);
      closing = true;
    }
    cv.notify_all();
    thread.join();
  }
};
Storer& storer() {
  tensor_cache_dir();  // (its statics first: they outlive the storer)
  static Storer s;
  return s;
}

}  // namespace

void tensor_cache_store_later(const std::string& key, const HostTensor& t) {
  if (!tensor_cache_enabled()) return;
  Storer& s = storer();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.queue.emplace_back(key, t);
  }
  s.cv.notify_all();
}

void tensor_cache_flush() {
  Storer& s = storer();
  std::unique_lock<std::mutex> lock(s.mu);
  s.cv.wait(lock, [&] { return s.queue.empty() && s.busy == 0; });
}

int tensor_cache_trim(uint64_t max_bytes) {
  const std::string dir = tensor_cache_dir();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  struct Entry {
    struct timespec mtime;
    uint64_t size;
    std::string path;
  };
  std::vector<Entry> entries;
  uint64_t sum = 0;
  int removed = 0;
  const time_t now = std::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (name.size() < 5 || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (name.find(".tmp.") != std::string::npos) {  // a writer's, or one killed mid-write
      if (now - st.st_mtim.tv_sec > 3600 && std::remove(path.c_str()) == 0) ++removed;
      continue;
    }
    if (name.compare(name.size() - 5, 5, ".pack") != 0) continue;
    entries.push_back({st.st_mtim, static_cast<uint64_t>(st.st_size), path});
    sum += static_cast<uint64_t>(st.st_size);
  }
  ::closedir(d);
  if (sum <= max_bytes) return removed;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.mtime.tv_sec != b.mtime.tv_sec ? a.mtime.tv_sec < b.mtime.tv_sec : a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  for (const Entry& e : entries) {
    if (sum <= max_bytes) break;
    if (std::remove(e.path.c_str()) == 0) ++removed;  // a process that maps it keeps its pages
    sum -= e.size;
  }
  return removed;
}

TensorCacheStats tensor_cache_stats() {
  TensorCacheStats s;
  s.hits = g_hits;
  s.misses = g_misses;
  s.rejected = g_rejected;
  s.stored = g_stored;
  s.bytes_mapped = g_mapped;
  s.bytes_written = g_written;
  return s;
}

}  // namespace lathe
