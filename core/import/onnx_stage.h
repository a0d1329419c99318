// onnx_stage.h — internal to core/import: what the importer's node loop needs to lower one
// segment of a staged model (onnx_staged.h), and the pieces onnx_staged.cpp reuses.
#pragma once
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/import/onnx_import.h"

namespace lathe::onnx_import {

using HostValues = std::map<std::string, HostTensor>;

// One segment's import. The node loop (onnx_model.cpp) skips nodes in `done`, binds every
// host value as a graph input of its concrete shape, evaluates a boundary node on the host
// when all it reads is known there (run_control for Loop / If), and otherwise stops at it.
struct StageCtx {
  HostValues& host;                 // run-time values by ONNX name (grows with host evaluations)
  const std::set<int>& done;        // node positions (indices into the GraphProto) computed already
  HostValues& consts;               // the graph's initializers, and values a segment folded to
                                    // constants that a later one reads (bound as constants)
  std::string prefix;               // "" for the model's graph, "node 'L' (Loop) > " in a body
  // Host-side control flow: the outputs of Loop / If node np, given the values it reads
  // (its inputs and its bodies' free names) by name.
  std::function<std::vector<HostTensor>(const onnx::NodeProto& np, const std::string& where, const HostValues& reads)>
      run_control;
  // Whether node k may be specialized on these values once more (a node seen with many
  // values — a Slice whose start is the loop counter — runs on the host instead).
  std::function<bool(int k, const std::string& spec)> may_specialize;
  // results
  std::vector<int> lowered;         // nodes lowered or host-evaluated in this segment
  int barrier = -1;                 // the node the segment stops at, or -1 (ran to the end)
  std::vector<std::string> live;    // at a barrier: values the rest of the graph reads
  int host_evals = 0;
  int host_checks = 0;              // host values read for checks (NodeCtx::known_in)
  std::string spec;                 // host values the segment was specialized on ("name=1,2,;")
};

struct Segment {
  Graph graph;                      // outputs named by ONNX value (empty: nothing to run)
  std::vector<int> lowered;
  int barrier = -1;
  std::string spec;                 // StageCtx::spec: part of the program's key
};

Segment lower_segment(const onnx::GraphProto& g, int opset, const OnnxOptions& opt, const std::string& file, StageCtx& st);

// Names a graph's nodes (and nested bodies) read that the graph does not define.
std::set<std::string> free_names(const onnx::GraphProto& g);
// What node np reads: its non-empty inputs and its graph attributes' free names.
std::set<std::string> node_reads(const onnx::NodeProto& np);

onnx::ModelProto read_model_file(const std::string& path);
onnx::ModelProto read_model_bytes(const void* data, size_t size, const std::string& name);
int model_opset_of(const onnx::ModelProto& m, const std::string& file);

}  // namespace lathe::onnx_import
