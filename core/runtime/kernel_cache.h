// kernel_cache.h — the on-disk kernel cache shared by the compiling backends.
//
// Location: $LATHE_CACHE_DIR, else $XDG_CACHE_HOME/lathe, else ~/.cache/lathe. If that
// cannot be created or written, a private temp directory is used instead and one warning
// is printed. Entries are keyed by a hash of everything that determines the binary
// (source, backend, compiler and flags, CPU model), written to a temp name and renamed
// into place (atomic under concurrent processes). Readers must validate an entry (e.g.
// dlopen it) and rebuild it when it is corrupt — never trust it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

std::string cache_dir();                       // created on first use
std::string cache_path(const std::string& subdir, const std::string& file);  // dir created
// 128-bit hash as 32 hex chars of the parts (length-prefixed, so ("ab","c") != ("a","bc")).
std::string cache_key(const std::vector<std::string_view>& parts);
std::string cpu_model();                       // "AMD EPYC … | avx512f avx512bw …"
// Writes data to path atomically (temp file in the same dir + rename); false on failure.
bool atomic_write(const std::string& path, const std::string& data);
// A unique temp path next to `path` (same directory, so rename is atomic).
std::string temp_path_for(const std::string& path);

// Advisory locks (flock) beside an entry, for a compile that writes it from another process
// (the llvm full tier's detached child): the holder keeps a descriptor open; the kernel
// releases the lock when the last one closes, also when the process is killed, so a lock
// never outlives its writer.
// try_lock_exclusive: the open descriptor holding lock_path's exclusive lock, or -1 when
// another holds it (or the file cannot be created). Close the descriptor to release it.
int try_lock_exclusive(const std::string& lock_path);
// Whether lock_path was held when asked, and if so whether it was released within max_ms.
enum class LockWait { kFree, kReleased, kStillHeld };
LockWait wait_unlocked(const std::string& lock_path, double max_ms);

}  // namespace lathe
