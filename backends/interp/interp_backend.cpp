// interp_backend.cpp — the `interp` backend: runs whole graphs with the reference
// interpreter (core/interp). Supports every op and dtype; slow by design; the oracle.
#include "backends/backend.h"
#include "core/interp/interp.h"

namespace lathe {

namespace {

class InterpProgram : public CompiledProgram {
 public:
  explicit InterpProgram(const Program& p) : graph_(p.graph) {}
  void launch(int, void* const*, const int64_t*) override {}
  bool runs_whole_graph() const override { return true; }
  TensorMap run_graph(const Graph& g, const TensorMap& inputs, TensorMap* updated) override {
    return interpret(g, inputs, updated);
  }
  std::string source(int) const override { return "(the interp backend runs the graph node by node; it has no kernel source)\n"; }

 private:
  Graph graph_;
};

class InterpBackend : public Backend {
 public:
  std::string name() const override { return "interp"; }
  std::string description() const override { return "reference interpreter: every op and dtype, node by node (the oracle)"; }
  std::string supports(NodeRef) const override { return ""; }
  std::string render(const Program&, int) const override { return "(no source: the interp backend interprets the graph)\n"; }
  std::shared_ptr<CompiledProgram> compile(const Program& p, const CompileOptions&) override {
    return std::make_shared<InterpProgram>(p);
  }
};

LATHE_REGISTER_BACKEND(InterpBackend);

}  // namespace

}  // namespace lathe
