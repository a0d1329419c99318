// tensor_cache.h — large tensors kept on disk between processes: the packed weights' cache.
//
// Prepacking (core/loop/prepack.h) copies each large GEMM weight into its kernel's panel
// layout on every start: GPT-2 small writes ~0.5 GB of fresh pages (~0.7 s of a warm start,
// most of it page faults). The packed copies are a pure function of the weight's bytes and the
// layout, so they are kept in the kernel cache's directory (kernel_cache.h: $LATHE_CACHE_DIR,
// $XDG_CACHE_HOME/lathe, ~/.cache/lathe), under packed/, a file per copy named by its key, and
// a later start maps the file read-only instead of packing again (the page cache holds it).
//
// A file: a 4096-byte header (magic, format version, dtype, shape, payload size, the entry's
// key, a full digest of the payload) and the payload, page-aligned. A file is trusted only
// when all of these agree with what the reader expects and the payload's digest checks; any
// other file is ignored (the caller packs again, and its store replaces the file). Written to
// a temp name and renamed into place, so concurrent processes see a whole file or none, and a
// mapping stays valid when another process replaces or evicts the file.
//
// Disk use is bounded: after a store, the least recently used files (modification time,
// refreshed on each hit) are removed until the directory holds at most tensor_cache_max_bytes.
// Checking the payload's digest reads every byte of it before the first run does (GPT-2: ~0.5 GB,
// ~60 ms of CPU, 150-200 ms of prepack's wall time at load 12); LATHE_PACK_CACHE=trust skips
// that check (size, header and key still checked: a file cut short or another's is ignored).
// LATHE_PACK_CACHE=0 neither reads nor writes it; LATHE_PACK_CACHE_MAX (bytes, K/M/G) bounds it;
// LATHE_PACK_CACHE_DIR puts it elsewhere (read on every call: tests point it at a temp dir).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/host_tensor.h"

namespace lathe {

// A 128-bit digest of all n bytes (not sampled: one changed byte anywhere changes it), as 32 hex
// chars; ~memory speed (eight independent multiply lanes).
std::string content_digest(const void* p, size_t n);

bool tensor_cache_enabled();        // LATHE_PACK_CACHE != "0"
uint64_t tensor_cache_max_bytes();  // LATHE_PACK_CACHE_MAX, default 4 GiB
std::string tensor_cache_dir();     // $LATHE_PACK_CACHE_DIR, else <cache_dir>/packed (created)

// The tensor stored under key (32 hex chars, cache_key) with this dtype and shape, mapped
// read-only from its file (the tensor keeps the mapping alive); an undefined tensor when
// there is none or the file does not check (size, header, key, payload digest).
HostTensor tensor_cache_load(const std::string& key, DType dtype, const std::vector<int64_t>& shape);
// Stores t under key (temp file + rename) and bounds the directory; false when it cannot
// (no space, not writable, larger than the bound): the caller goes on without it.
bool tensor_cache_store(const std::string& key, const HostTensor& t);
// The same on a background thread (the packed copy stays alive until written): GPT-2's
// first start wrote ~0.5 GB here, ~1.6 s of its build on this VM. Stores still queued when
// the process exits are finished first (a static's destructor; a process killed before leaves
// at most a temp file, which a later trim removes).
void tensor_cache_store_later(const std::string& key, const HostTensor& t);
void tensor_cache_flush();  // until every store handed to the background is done
// Removes the least recently used files until the directory holds at most max_bytes, and
// temp files older than an hour (a writer killed mid-write). Returns the files removed.
int tensor_cache_trim(uint64_t max_bytes);

struct TensorCacheStats {
  int hits = 0, misses = 0, rejected = 0, stored = 0;  // rejected: a file there that did not check
  uint64_t bytes_mapped = 0, bytes_written = 0;
};
TensorCacheStats tensor_cache_stats();  // this process's, so far

}  // namespace lathe
