// temp_pack_dir.h — a private packed-weight cache directory for a test (LATHE_PACK_CACHE_DIR),
// with the cache switched on (it is off by default), removed with what it holds afterwards.
// Shared by tests/unit/tensor_cache_test.cpp and tests/backends/pack_cache_test.cpp.
#pragma once
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace lathe::test {

struct TempPackDir {
  std::string dir;
  TempPackDir() {
    char t[] = "/tmp/lathe-pack-test-XXXXXX";
    dir = mkdtemp(t);
    setenv("LATHE_PACK_CACHE_DIR", dir.c_str(), 1);
    setenv("LATHE_PACK_CACHE", "1", 1);  // off by default
  }
  ~TempPackDir() {
    for (const std::string& f : files()) std::remove((dir + "/" + f).c_str());
    ::rmdir(dir.c_str());
    unsetenv("LATHE_PACK_CACHE_DIR");
    unsetenv("LATHE_PACK_CACHE_MAX");
    unsetenv("LATHE_PACK_CACHE");
  }
  TempPackDir(const TempPackDir&) = delete;
  TempPackDir& operator=(const TempPackDir&) = delete;
  std::vector<std::string> files() const {
    std::vector<std::string> r;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.') r.push_back(e->d_name);
      closedir(d);
    }
    return r;
  }
  std::string path(const std::string& key) const { return dir + "/" + key + ".pack"; }
};

}  // namespace lathe::test
