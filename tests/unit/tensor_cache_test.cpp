// tensor_cache_test.cpp — the packed weights' files on disk (core/runtime/tensor_cache.h):
// a round trip, files that do not check (truncated, a flipped byte, another shape) ignored,
// the digest over every byte, and the bound on the directory's size.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/runtime/kernel_cache.h"
#include "core/runtime/mapped_file.h"
#include "core/runtime/tensor_cache.h"
#include "../backends/temp_pack_dir.h"

namespace lathe {
namespace {

using test::TempPackDir;

HostTensor ramp(std::vector<int64_t> shape, float seed) {
  HostTensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = seed + 0.25f * static_cast<float>(i % 1013);
  return t;
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(TensorCache, DigestReadsEveryByte) {
  // one byte changed anywhere (inside a chunk, at a chunk's edge, in the tail) changes it
  std::vector<unsigned char> v((size_t(3) << 20) + 37, 7);
  const std::string d0 = content_digest(v.data(), v.size());
  EXPECT_EQ(d0.size(), 32u);
  EXPECT_EQ(d0, content_digest(v.data(), v.size()));
  for (size_t at : {size_t(0), size_t(12345), (size_t(1) << 20) - 1, size_t(1) << 20, v.size() - 1}) {
    v[at] ^= 1;
    EXPECT_NE(content_digest(v.data(), v.size()), d0) << at;
    v[at] ^= 1;
  }
  EXPECT_NE(content_digest(v.data(), v.size() - 1), d0);  // the length counts
  std::vector<unsigned char> z(100, 0);
  EXPECT_NE(content_digest(z.data(), 99), content_digest(z.data(), 100));
}

TEST(TensorCache, RoundTripMapsTheStoredValues) {
  TempPackDir tmp;
  const HostTensor t = ramp({3, 5, 7, 16}, 1.5f);
  const std::string key = cache_key({"round-trip", "1"});
  EXPECT_FALSE(tensor_cache_load(key, DType::F32, t.shape()).defined());  // nothing yet
  ASSERT_TRUE(tensor_cache_store(key, t));
  HostTensor got = tensor_cache_load(key, DType::F32, t.shape());
  ASSERT_TRUE(got.defined());
  EXPECT_TRUE(same_bytes(got, t));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data()) % 64, 0u);  // page-aligned payload
  // another dtype or shape under the same key: not this entry
  EXPECT_FALSE(tensor_cache_load(key, DType::I32, t.shape()).defined());
  EXPECT_FALSE(tensor_cache_load(key, DType::F32, {3, 5, 16, 7}).defined());
  // a mapping outlives the file being replaced and removed
  HostTensor other = ramp({3, 5, 7, 16}, -4.0f);
  ASSERT_TRUE(tensor_cache_store(key, other));
  std::remove(tmp.path(key).c_str());
  EXPECT_TRUE(same_bytes(got, t));
  // LATHE_PACK_CACHE=0: neither read nor written
  ASSERT_TRUE(tensor_cache_store(key, t));
  setenv("LATHE_PACK_CACHE", "0", 1);
  EXPECT_FALSE(tensor_cache_load(key, DType::F32, t.shape()).defined());
  EXPECT_FALSE(tensor_cache_store(cache_key({"round-trip", "2"}), t));
  setenv("LATHE_PACK_CACHE", "1", 1);
  EXPECT_TRUE(tensor_cache_load(key, DType::F32, t.shape()).defined());
}

TEST(TensorCache, TruncatedOrCorruptFilesAreIgnored) {
  TempPackDir tmp;
  const HostTensor t = ramp({1000, 33}, 0.5f);
  for (int how = 0; how < 4; ++how) {
    const std::string key = cache_key({"corrupt", std::to_string(how)});
    ASSERT_TRUE(tensor_cache_store(key, t));
    const std::string path = tmp.path(key);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    if (how == 0) {
      ASSERT_EQ(truncate(path.c_str(), st.st_size - 4), 0);  // cut short
    } else if (how == 1) {
      ASSERT_EQ(truncate(path.c_str(), 100), 0);  // only part of its header
    } else {
      // a byte of the payload (how 2) or of the header's key (how 3) changed in place
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(how == 2 ? st.st_size - 1000 : 100);
      f.put('#');
    }
    const TensorCacheStats before = tensor_cache_stats();
    EXPECT_FALSE(tensor_cache_load(key, DType::F32, t.shape()).defined()) << how;
    EXPECT_EQ(tensor_cache_stats().rejected, before.rejected + 1) << how;
    // stored again (as the build does after packing anew): read back whole
    ASSERT_TRUE(tensor_cache_store(key, t));
    HostTensor got = tensor_cache_load(key, DType::F32, t.shape());
    ASSERT_TRUE(got.defined()) << how;
    EXPECT_TRUE(same_bytes(got, t)) << how;
  }
  // an empty file, or a stranger's
  const std::string key = cache_key({"corrupt", "empty"});
  { std::ofstream f(tmp.path(key)); }
  EXPECT_FALSE(tensor_cache_load(key, DType::F32, t.shape()).defined());
  // LATHE_PACK_CACHE=trust: the payload's digest is not checked, the size and header are
  const std::string cut = cache_key({"corrupt", "0"});
  ASSERT_TRUE(tensor_cache_load(cut, DType::F32, t.shape()).defined());
  struct stat st {};
  ASSERT_EQ(stat(tmp.path(cut).c_str(), &st), 0);
  ASSERT_EQ(truncate(tmp.path(cut).c_str(), st.st_size - 4), 0);
  setenv("LATHE_PACK_CACHE", "trust", 1);
  EXPECT_FALSE(tensor_cache_load(cut, DType::F32, t.shape()).defined());
  EXPECT_FALSE(tensor_cache_load(cache_key({"corrupt", "3"}), DType::F32, {33, 1000}).defined());
  setenv("LATHE_PACK_CACHE", "1", 1);
}

TEST(TensorCache, DiskUseIsBoundedLeastRecentlyUsedFirst) {
  TempPackDir tmp;
  const HostTensor t = ramp({64 << 10}, 2.0f);  // 256 KiB + a 4 KiB header per file
  const uint64_t each = t.nbytes() + 4096;
  setenv("LATHE_PACK_CACHE_MAX", std::to_string(3 * each).c_str(), 1);
  std::vector<std::string> keys;
  for (int i = 0; i < 3; ++i) {
    keys.push_back(cache_key({"bound", std::to_string(i)}));
    ASSERT_TRUE(tensor_cache_store(keys.back(), t));
    usleep(20000);  // distinct modification times
  }
  // key 0 used again: key 1 is now the least recently used
  ASSERT_TRUE(tensor_cache_load(keys[0], DType::F32, t.shape()).defined());
  usleep(20000);
  keys.push_back(cache_key({"bound", "3"}));
  ASSERT_TRUE(tensor_cache_store(keys.back(), t));
  EXPECT_EQ(tmp.files().size(), 3u);
  EXPECT_TRUE(tensor_cache_load(keys[0], DType::F32, t.shape()).defined());
  EXPECT_FALSE(tensor_cache_load(keys[1], DType::F32, t.shape()).defined());
  EXPECT_TRUE(tensor_cache_load(keys[2], DType::F32, t.shape()).defined());
  EXPECT_TRUE(tensor_cache_load(keys[3], DType::F32, t.shape()).defined());
  // a tensor larger than the whole bound is not stored
  setenv("LATHE_PACK_CACHE_MAX", std::to_string(each - 1).c_str(), 1);
  EXPECT_FALSE(tensor_cache_store(cache_key({"bound", "big"}), t));
}

// A weight in a model file is keyed by the file's identity (mapped_file.h) instead of its
// bytes: another offset, a file rewritten in place or replaced, or a page of the private
// mapping written in this process, each give another identity or none.
TEST(TensorCache, FileIdentityChangesWithTheFile) {
  TempPackDir tmp;
  const std::string path = tmp.dir + "/model.bin";
  std::vector<char> bytes(size_t(3) << 20, 'a');
  auto write = [&](char c) {
    bytes[bytes.size() / 2] = c;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  write('a');
  auto m = MappedFile::open(path);
  const HostTensor w = tensor_in_file(m, 4096, DType::F32, {1024, 256});
  const std::string id = file_identity(w.bytes(), w.nbytes());
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(id, file_identity(w.bytes(), w.nbytes()));
  EXPECT_NE(id, file_identity(m->data() + 8192, w.nbytes()));  // another offset
  EXPECT_EQ(file_identity(bytes.data(), 100), "");                // not a mapped file's
  EXPECT_EQ(file_identity(m->data() + m->size() - 10, 20), "");   // past its end
  usleep(20000);
  write('b');  // rewritten in place (same inode)
  auto m2 = MappedFile::open(path);
  const std::string id2 = file_identity(m2->data() + 4096, w.nbytes());
  EXPECT_NE(id2, id);
  usleep(20000);
  const std::string other = tmp.dir + "/other.bin";
  std::rename(path.c_str(), other.c_str());
  write('b');  // the same bytes in a new file
  auto m3 = MappedFile::open(path);
  EXPECT_NE(file_identity(m3->data() + 4096, w.nbytes()), id2);
  // a page of the (private) mapping written: its bytes are no longer the file's
  const_cast<std::byte*>(m3->data())[4096 + 100] = std::byte{1};
  EXPECT_EQ(file_identity(m3->data() + 4096, w.nbytes()), "");
  EXPECT_FALSE(file_identity(m3->data() + 2 * 4096, 4096).empty());  // (other pages still are)
  std::remove(other.c_str());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lathe
