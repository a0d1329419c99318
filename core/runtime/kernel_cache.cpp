// kernel_cache.cpp — cache directory selection, keys and atomic writes (see header).
#include "core/runtime/kernel_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

namespace lathe {

namespace {

bool make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

bool writable_dir(const std::string& dir) {
  if (!make_dirs(dir)) return false;
  std::string probe = dir + "/.probe." + std::to_string(getpid());
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) return false;
  std::fclose(f);
  std::remove(probe.c_str());
  return true;
}

std::string choose_dir() {
  std::string dir;
  if (const char* d = std::getenv("LATHE_CACHE_DIR"); d && *d) dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/lathe";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/lathe";
  if (!dir.empty() && writable_dir(dir)) return dir;
  char tmpl[] = "/tmp/lathe-cache-XXXXXX";
  const char* t = mkdtemp(tmpl);
  std::string fallback = t ? t : "/tmp";
  std::cerr << "lathe: warning: kernel cache directory '" << (dir.empty() ? "(none: HOME unset)" : dir)
            << "' is not writable; using " << fallback << " for this process\n";
  return fallback;
}

uint64_t fnv(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::string cache_dir() {
  static std::once_flag once;
  static std::string dir;
  std::call_once(once, [] { dir = choose_dir(); });
  return dir;
}

std::string cache_path(const std::string& subdir, const std::string& file) {
  std::string d = cache_dir() + "/" + subdir;
  make_dirs(d);
  return d + "/" + file;
}

std::string cache_key(const std::vector<std::string_view>& parts) {
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  for (auto p : parts) {
    std::string len = std::to_string(p.size()) + ":";
    a = fnv(p, fnv(len, a));
    b = fnv(p, fnv(len, b * 31 + 7));
  }
  char s[40];
  std::snprintf(s, sizeof s, "%016llx%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  return s;
}

std::string cpu_model() {
  static std::once_flag once;
  static std::string model;
  std::call_once(once, [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, name, flags;
    while (std::getline(f, line)) {
      if (name.empty() && line.rfind("model name", 0) == 0) name = line.substr(line.find(':') + 2);
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line.substr(line.find(':') + 2);
      if (!name.empty() && !flags.empty()) break;
    }
    model = name + " | " + cache_key({flags}).substr(0, 12);
  });
  return model;
}

std::string temp_path_for(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
}

bool atomic_write(const std::string& path, const std::string& data) {
  std::string tmp = temp_path_for(path);
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return false;
    f << data;
    if (!f) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

int try_lock_exclusive(const std::string& lock_path) {
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

LockWait wait_unlocked(const std::string& lock_path, double max_ms) {
  int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return LockWait::kFree;  // no lock file: nobody ever locked it
  LockWait r = LockWait::kFree;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    auto t0 = std::chrono::steady_clock::now();
    for (r = LockWait::kStillHeld;
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < max_ms;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
        r = LockWait::kReleased;
        break;
      }
    }
  }
  ::close(fd);  // releases the shared lock too
  return r;
}

}  // namespace lathe
