// text_parse_fuzz.cpp — libFuzzer target for the .lathe parser (built and run by
// run_fuzz.sh under the `fuzz` CTest label). Any input must either parse or throw
// UserError; whatever parses must print, re-parse and print the same text again.
// An InternalError or any other exception escapes and counts as a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/ir/diag.h"
#include "core/ir/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  lathe::Graph g;
  try {
    g = lathe::parse_graph(text, "fuzz.lathe");
  } catch (const lathe::UserError&) {
    return 0;
  }
  std::string printed = lathe::print_graph(g);
  std::string again;
  try {
    again = lathe::print_graph(lathe::parse_graph(printed, "reprinted.lathe"));
  } catch (const lathe::UserError& e) {
    std::fprintf(stderr, "printed text does not parse:\n%s\n--- text ---\n%s", e.what(), printed.c_str());
    std::abort();
  }
  if (again != printed) {
    std::fprintf(stderr, "round trip differs:\n%s\n--- vs ---\n%s", printed.c_str(), again.c_str());
    std::abort();
  }
  return 0;
}
