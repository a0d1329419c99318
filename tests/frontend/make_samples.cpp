// make_samples.cpp — writes the sample gallery as .lathe text: samples/NN-name.lathe for
// every entry of sample_names() (core/frontend/samples.h).
// Usage: lathe_make_samples [OUT_DIR]   (default: the source tree's samples/)
#include <cstdio>
#include <exception>
#include <string>

#include "core/frontend/samples.h"
#include "core/ir/loader.h"
#include "core/ir/verify.h"

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : std::string(LATHE_SOURCE_DIR) + "/samples";
  try {
    for (const auto& name : lathe::sample_names()) {
      lathe::Graph g = lathe::build_sample(name);
      lathe::verify_or_throw(g, name);
      std::string path = dir + "/" + name + ".lathe";
      lathe::save_graph(g, path);
      std::printf("wrote %s (%zu nodes)\n", path.c_str(), g.size());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe_make_samples: %s\n", e.what());
    return 1;
  }
  return 0;
}
