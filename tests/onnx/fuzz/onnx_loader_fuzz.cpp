// onnx_loader_fuzz.cpp — libFuzzer target for the ONNX loader: any bytes either load into
// a verified graph or raise a UserError; crashes, sanitizer reports, InternalErrors and
// other exceptions are findings. The element cap is lowered so that no input can make the
// importer allocate more than a few MiB.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/import/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lathe::OnnxOptions opt;
  opt.max_elements = int64_t(1) << 20;
  try {
    lathe::load_onnx_bytes(data, size, opt, "fuzz.onnx");
  } catch (const lathe::UserError&) {
    // the expected outcome for malformed input
  } catch (const lathe::InternalError& e) {
    std::fprintf(stderr, "InternalError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
