// onnx_loader_fuzz.cpp — libFuzzer target for the ONNX loader: any bytes either load into
// a verified graph or raise a UserError; crashes, sanitizer reports, InternalErrors and
// other exceptions are findings. The element cap is lowered so that no input can make the
// importer allocate more than a few MiB.
//
// A model the loader reports as needing run-time values to decide shapes (NonZero,
// Compress, Unique, NonMaxSuppression, TopK's k, shape inputs, run-time Loop / If, a Loop or
// Scan too long to unroll, scatter indices known only at run time) also
// runs through the staged executor on the interpreter, with small inputs made from the
// bytes, a low iteration cap and the same element cap: UserErrors only, never a crash or
// a hang.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/import/onnx_import.h"
#include "core/import/onnx_staged.h"
#include "core/interp/interp.h"

namespace {

void run_staged(const uint8_t* data, size_t size, const lathe::OnnxOptions& onnx) {
  lathe::StagedOptions opt;
  opt.onnx = onnx;
  opt.max_loop_iterations = 64;
  lathe::SegmentRunner interp = [](const lathe::Graph& g, const std::string&, const lathe::TensorMap& ins) {
    return lathe::interpret(g, ins);
  };
  lathe::StagedOnnx model(data, size, "fuzz.onnx", opt, interp);
  auto dtypes = model.input_dtypes();
  lathe::TensorMap inputs;
  uint64_t state = size * 0x9E3779B97F4A7C15ull + 1;
  for (const auto& [name, dims] : model.input_dims()) {
    auto dt = dtypes.find(name);
    if (dt == dtypes.end()) return;
    std::vector<int64_t> shape;
    int64_t n = 1;
    for (int64_t d : dims) {
      shape.push_back(d < 0 ? 2 : d);
      n *= shape.back();
      if (n > 4096) return;  // keep each run small
    }
    lathe::HostTensor t(dt->second, shape);
    for (int64_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      t.set_i64(i, static_cast<int64_t>((state >> 33) % 7) - 2);  // small values, zeros and negatives
    }
    inputs[name] = t;
  }
  model.run(inputs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lathe::OnnxOptions opt;
  opt.max_elements = int64_t(1) << 20;
  try {
    lathe::load_onnx_bytes(data, size, opt, "fuzz.onnx");
  } catch (const lathe::UserError& e) {
    // the expected outcome for malformed input; a dynamic shape runs staged
    if (lathe::onnx_needs_staged(e.what())) {
      try {
        run_staged(data, size, opt);
      } catch (const lathe::UserError&) {
      } catch (const lathe::InternalError& ie) {
        std::fprintf(stderr, "InternalError (staged): %s\n", ie.what());
        std::abort();
      }
    }
  } catch (const lathe::InternalError& e) {
    std::fprintf(stderr, "InternalError: %s\n", e.what());
    std::abort();
  }
  return 0;
}
