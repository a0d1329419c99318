// page_release.h — giving the pages of memory whose values now live elsewhere back to the OS.
//
// Prepacking copies a constant weight into the layout its kernel reads; when every reader
// uses the copy, the original still counts in the process's resident memory. Releasing its
// pages keeps the values (a later touch brings them back) and lowers the resident size.
//
// How depends on the page. A model's weights are pages of a read-only file mapping
// (mapped_file.h) that are also the page cache's: MADV_DONTNEED unmaps them from this
// process only, so the next process (a warm start) still finds them in memory. MADV_PAGEOUT,
// used before, also evicted them from the page cache, and every next start read the model from
// disk again (a resnet50 run left 87 of its 97 MB cached). Anonymous pages (tensors on the
// heap, or a private mapping's page written since it was mapped) would lose their values to
// MADV_DONTNEED: they get MADV_PAGEOUT, which swaps them out where there is swap and otherwise
// leaves them.
#pragma once
#include <cstddef>

namespace lathe {

struct ReleasedPages {
  size_t unmapped = 0;   // bytes of file pages unmapped (MADV_DONTNEED), still in the page cache
  size_t paged_out = 0;  // bytes of anonymous pages handed to MADV_PAGEOUT
};

// Releases the whole pages inside [p, p + n); pages not resident are left alone. A hint:
// errors are ignored, and where /proc/self/pagemap cannot be read nothing is released.
ReleasedPages release_pages(const void* p, size_t n);

}  // namespace lathe
