// loader.cpp — the graph loader registry (load_graph by file extension) and save_graph.
//
// The core registers `.lathe`; other layers add theirs at start-up (scripting: .lua,
// import: .onnx). Reading problems become UserErrors naming the file and the reason.
#include "core/ir/loader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <unistd.h>

#include "core/ir/diag.h"
#include "core/ir/sidecar.h"
#include "core/ir/text.h"

namespace lathe {

namespace {

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError("cannot open " + path + ": it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError("cannot open " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw UserError("cannot read " + path + ": " + std::strerror(errno));
  return ss.str();
}

// Large constants are in PATH.bin (sidecar.h), mapped when the text refers to it.
Graph load_lathe_text(const std::string& path) { return parse_graph(read_text_file(path), path, path + ".bin"); }

struct Registry {
  std::mutex mu;
  std::map<std::string, GraphLoader> by_extension{{".lathe", load_lathe_text}};
};
Registry& registry() {
  static Registry r;
  return r;
}

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

}  // namespace

void register_graph_loader(const std::string& extension, GraphLoader fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string ext = extension;
  if (!ext.empty() && ext[0] != '.') ext = "." + ext;
  r.by_extension[ext] = std::move(fn);
}

Graph load_graph(const std::string& path) {
  std::string ext = lower_extension(path);
  GraphLoader fn;
  std::string known;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_extension.find(ext);
    if (it != r.by_extension.end()) fn = it->second;
    for (auto& [e, f] : r.by_extension) known += (known.empty() ? "" : ", ") + e;
  }
  if (!fn)
    throw UserError("cannot load " + path + ": unknown file kind '" + (ext.empty() ? "(no extension)" : ext) +
                    "'; known kinds: " + known);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw UserError("cannot open " + path + ": " + std::strerror(ENOENT));
  return fn(path);
}

// The text, and its large constants in PATH.bin, each written to a temp name and renamed
// into place (sidecar first): readers never see half a file, and a reader between the
// two renames sees a sidecar whose checks do not match the old text (an error, not
// wrong numbers). A stale sidecar of an earlier save is removed.
void save_graph(const Graph& g, const std::string& path) {
  std::string ext = lower_extension(path);
  if (ext != ".lathe") throw UserError("cannot save " + path + ": graphs are saved as .lathe text (got '" + ext + "')");
  SidecarPlan plan;
  std::string text = print_graph(g, &plan);
  std::string bin = path + ".bin";
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::string bin_tmp = bin + ".tmp." + std::to_string(::getpid());
  bool with_bin = !plan.tensors.empty();
  if (with_bin) write_sidecar(bin_tmp, plan);
  auto fail = [&](const std::string& why) {
    std::remove(tmp.c_str());
    if (with_bin) std::remove(bin_tmp.c_str());
    throw UserError("cannot write " + path + ": " + why);
  };
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail(std::strerror(errno));
    f << text;
    f.flush();
    if (!f) fail(std::strerror(errno));
  }
  std::error_code ec;
  if (with_bin) {
    std::filesystem::rename(bin_tmp, bin, ec);
    if (ec) fail(ec.message());
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(ec.message());
  if (!with_bin) std::filesystem::remove(bin, ec);  // a stale sidecar: nothing refers to it now
}

}  // namespace lathe
