// op_report.cpp — run_op_report: the cases of `lathe test-backend` (see op_report.h), their
// differential run against the interpreter, and the Markdown / JSON reports.
#include "backends/op_report.h"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "core/interp/interp.h"
#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/runtime/compare.h"
#include "core/runtime/random.h"

namespace lathe {

namespace {

const DType kDTypes[kNumDTypes] = {DType::Bool, DType::U8,  DType::I8,   DType::I16, DType::I32,
                                   DType::I64,  DType::F16, DType::BF16, DType::F32, DType::F64,
                                   DType::U16,  DType::U32, DType::U64};

struct Case {
  int row;          // index into the report's rows
  int dtype;        // index into kDTypes
  std::string what; // "f16→i8" when a cell has several cases, else ""
  Graph g;
  TensorMap inputs;
};

class Builder {
 public:
  std::vector<OpRow> rows;
  std::vector<Case> cases;

  int row(const std::string& op, const std::string& variant = "") {
    rows.push_back({op, variant, {}});
    return static_cast<int>(rows.size()) - 1;
  }
  // Adds a case built by `make` (which may throw UserError: the IR does not define it, n/a).
  template <class F>
  void add(int r, int d, F&& make, const std::string& what = "", std::map<std::string, HostTensor> fixed = {}) {
    NodeRef out;
    try {
      out = make(kDTypes[d]);
    } catch (const UserError&) {
      return;  // not a valid node for this dtype: the cell stays n/a
    }
    if (!out) return;
    Graph g = Graph::from_outputs({{"y", out}});
    TensorMap in = random_inputs(g, 11 + cases.size());
    for (auto& [n, t] : fixed) in[n] = t;
    cases.push_back({r, d, what, std::move(g), std::move(in)});
  }
  template <class F>
  void each_dtype(int r, F&& make) {
    for (int d = 0; d < kNumDTypes; ++d) add(r, d, make);
  }
};

const Shape kShape = {3, 7};

NodeRef in(const char* name, DType dt, Shape s = kShape) { return prim::input(name, dt, std::move(s)); }

void build_cases(Builder& b) {
  // sources
  b.each_dtype(b.row("Input"), [](DType dt) { return in("x", dt); });
  b.each_dtype(b.row("Const", "scalar"), [](DType dt) { return prim::constant(dt == DType::Bool ? 1 : 3, dt, kShape); });
  b.each_dtype(b.row("Const", "tensor literal"),
               [](DType dt) { return prim::constant_tensor(random_tensor(dt, {4, 5}, 3)); });
  {
    int r = b.row("Index");
    for (int d = 0; d < kNumDTypes; ++d) {
      b.add(r, d, [](DType dt) { return prim::index(dt, {4, 6}, 0); }, "axis 0");
      b.add(r, d, [](DType dt) { return prim::index(dt, {4, 6}, 1); }, "axis 1");
    }
  }
  // movement: one row per view kind, each on an input
  const Shape vs = {4, 6};
  ViewSpec base = ViewSpec::contiguous(vs);
  std::vector<std::pair<std::string, ViewSpec>> views = {
      {"permute", view_permute(base, {1, 0})},
      {"flip", view_flip(base, {0, 1})},
      {"shrink", view_shrink(base, {{1, 3}, {2, 5}})},
      {"pad", view_pad(base, {{1, 2}, {0, 3}})},
      {"reshape", *view_reshape(base, {2, 12})},
  };
  for (auto& [kind, v] : views) {
    ViewSpec spec = v;
    b.each_dtype(b.row("View", kind), [spec, vs](DType dt) { return prim::view(in("x", dt, vs), spec); });
  }
  b.each_dtype(b.row("View", "expand"), [](DType dt) {
    NodeRef y = in("x", dt, {4, 1});
    return prim::view(y, view_expand(ViewSpec::contiguous(y->shape), {4, 6}));
  });
  // a padded, flipped view of a computed value (inlined into the consumer's kernel)
  b.each_dtype(b.row("View", "of a computed value"), [base, vs](DType dt) {
    NodeRef w = prim::where(in("c", DType::Bool, vs), in("a", dt, vs), in("b", dt, vs));
    return prim::view(w, view_flip(view_pad(base, {{2, 1}, {1, 1}}), {1}));
  });
  {
    int r = b.row("Take");
    HostTensor idx(DType::I64, {4, 3});
    for (int64_t i = 0; i < idx.numel(); ++i) idx.set_i64(i, (i * 7) % 10 - 5);  // -5 … 4, negatives from the end
    for (int d = 0; d < kNumDTypes; ++d)
      b.add(r, d, [](DType dt) { return prim::take(in("x", dt, {5, 3}), in("i", DType::I64, {4, 3}), 0); }, "",
            {{"i", idx}});
  }
  // memory
  b.each_dtype(b.row("Copy"), [base, vs](DType dt) { return prim::copy(prim::view(in("x", dt, vs), view_permute(base, {1, 0}))); });
  b.each_dtype(b.row("Assign"), [](DType dt) {
    NodeRef x = in("x", dt);
    return prim::assign(in("w", dt), prim::copy(prim::view(x, view_flip(ViewSpec::contiguous(x->shape), {1}))));
  });
  // unary, binary, ternary
  for (Op op : {Op::Neg, Op::Recip, Op::Sin, Op::Exp2, Op::Log2, Op::Sqrt, Op::Not})
    b.each_dtype(b.row(std::string(op_name(op))), [op](DType dt) { return prim::unary(op, in("x", dt)); });
  {
    int r = b.row("Cast");
    for (int d = 0; d < kNumDTypes; ++d)
      for (DType to : kDTypes) {
        DType from = kDTypes[d];
        if (to == from) continue;
        // floats scaled by 1000: out-of-range values check the saturating conversion
        HostTensor x = random_tensor(from, {17}, 5 + d);
        if (is_float(from))
          for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, x.get_f64(i) * 1000);
        b.add(r, d, [to](DType dt) { return prim::cast(in("x", dt, {17}), to); },
              std::string(dtype_name(from)) + "→" + std::string(dtype_name(to)), {{"x", x}});
      }
  }
  for (Op op : {Op::Add, Op::Mul, Op::IDiv, Op::Mod, Op::Max, Op::And, Op::Or, Op::Xor, Op::CmpLT, Op::CmpNE})
    b.each_dtype(b.row(std::string(op_name(op))), [op](DType dt) { return prim::binary(op, in("a", dt), in("b", dt)); });
  b.each_dtype(b.row("Where"), [](DType dt) { return prim::where(in("c", DType::Bool), in("a", dt), in("b", dt)); });
  // reduce: one row per kind, over an inner, an outer and two axes; 65-long sums catch
  // accumulators that round to f16/bf16 at every step
  for (ReduceOp k : {ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul}) {
    int r = b.row("Reduce", std::string(reduce_op_name(k)));
    for (int d = 0; d < kNumDTypes; ++d)
      for (std::vector<int> axes : {std::vector<int>{2}, {0}, {0, 2}}) {
        std::string what = "axes";
        for (int a : axes) what += " " + std::to_string(a);
        b.add(r, d, [k, axes](DType dt) { return prim::reduce(k, in("x", dt, {3, 9, 65}), axes); }, what);
      }
  }
  b.each_dtype(b.row("Extern", "sgemm"), [](DType dt) {
    return prim::extern_call("sgemm", {in("a", dt, {5, 7}), in("b", dt, {7, 3})}, dt, {5, 3}, {5, 3, 7, 0, 0});
  });
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

void fail(OpCell& c, const std::string& category, const std::string& what, const std::string& message) {
  if (c.status != OpCell::Fail) {
    c.category = category;
    c.message = message;
  }
  c.status = OpCell::Fail;
  c.failing.push_back(what);
}

}  // namespace

std::string OpRow::status() const {
  int pass = 0, fail = 0;
  for (auto& c : cells) {
    if (c.status == OpCell::Pass) ++pass;
    if (c.status == OpCell::Fail) ++fail;
  }
  if (pass + fail == 0) return "n/a";
  return fail == 0 ? "✅" : pass == 0 ? "❌" : "🟡";
}

int OpReport::failures() const {
  int n = 0;
  for (auto& r : rows)
    for (auto& c : r.cells) n += c.status == OpCell::Fail;
  return n;
}

OpReport run_op_report(const std::string& backend) {
  Backend& be = get_backend(backend);
  if (std::string why = be.available(); !why.empty()) throw UserError("backend '" + backend + "' is not available here: " + why);
  Builder b;
  build_cases(b);
  OpReport rep;
  rep.backend = backend;
  rep.rows = b.rows;
  // The interpreter first: what it cannot run is n/a, not a backend failure.
  std::vector<TensorMap> want(b.cases.size());
  std::vector<bool> todo(b.cases.size(), false);
  std::vector<std::string> unsupported(b.cases.size());
  for (size_t i = 0; i < b.cases.size(); ++i) {
    try {
      want[i] = interpret(b.cases[i].g, b.cases[i].inputs);
    } catch (const std::exception&) {
      continue;
    }
    todo[i] = true;
    unsupported[i] = be.supports_graph(b.cases[i].g);
  }
  // Build and compile every runnable case, in one batch when possible.
  std::vector<Program> programs(b.cases.size());
  std::vector<std::string> build_error(b.cases.size());
  std::vector<const Program*> batch;
  std::vector<size_t> batch_ids;
  for (size_t i = 0; i < b.cases.size(); ++i) {
    if (!todo[i] || !unsupported[i].empty()) continue;
    try {
      programs[i] = build_program(b.cases[i].g);
      batch.push_back(&programs[i]);
      batch_ids.push_back(i);
    } catch (const std::exception& e) {
      build_error[i] = e.what();
    }
  }
  std::vector<std::shared_ptr<CompiledProgram>> compiled(b.cases.size());
  std::vector<std::string> compile_error(b.cases.size());
  try {
    auto all = be.compile_many(batch);
    for (size_t j = 0; j < batch_ids.size(); ++j) compiled[batch_ids[j]] = all[j];
  } catch (const std::exception&) {
    for (size_t i : batch_ids) {  // find the ones that do not compile
      try {
        compiled[i] = be.compile(programs[i]);
      } catch (const std::exception& e) {
        compile_error[i] = e.what();
      }
    }
  }
  for (size_t i = 0; i < b.cases.size(); ++i) {
    if (!todo[i]) continue;
    Case& c = b.cases[i];
    OpCell& cell = rep.rows[c.row].cells[c.dtype];
    if (cell.status == OpCell::NA) cell.status = OpCell::Pass;
    if (!unsupported[i].empty()) { fail(cell, "unsupported", c.what, unsupported[i]); continue; }
    if (!build_error[i].empty()) { fail(cell, "compile error", c.what, build_error[i]); continue; }
    if (!compile_error[i].empty()) { fail(cell, "compile error", c.what, compile_error[i]); continue; }
    std::string why;
    try {
      Executable exe(std::move(programs[i]), compiled[i], backend);
      TensorMap got = exe.run(c.inputs);
      for (auto& [name, w] : want[i]) {
        auto it = got.find(name);
        if (it == got.end()) { why = "output '" + name + "' missing"; break; }
        if (it->second.shape() != w.shape()) { why = "shape " + it->second.shape_string() + ", interpreter " + w.shape_string(); break; }
        Tolerance tol = default_tolerance(w.dtype());
        double loosen = backend == "cuda" ? 4 : 1;  // fused multiply-add, tiled sums
        std::string d;
        if (!allclose(it->second, w, tol.rtol * loosen, tol.atol * loosen, &d)) { why = d; break; }
      }
      if (!why.empty()) fail(cell, "wrong values", c.what, why);
    } catch (const std::exception& e) {
      fail(cell, "run error", c.what, e.what());
    }
  }
  return rep;
}

std::string OpReport::markdown() const {
  std::string s = "# Op support: `" + backend + "` backend\n\n"
                  "Generated by `lathe test-backend --backend " + backend + " --report` (do not edit; CTest checks it is\n"
                  "current). Every principal op of `core/ir/ops.def` × every dtype, with the key attribute cases,\n"
                  "run on `" + backend + "` and compared with the interpreter (`default_tolerance` of the dtype).\n\n"
                  "✅ every dtype passes · 🟡 some do · ❌ none · `·` the op is not defined for the dtype\n"
                  "(or the interpreter cannot run it) · the last column names the failing dtypes and why.\n\n"
                  "| Op | Case | Status |";
  for (DType d : kDTypes) s += " " + std::string(dtype_name(d)) + " |";
  s += " Failing |\n|---|---|---|";
  for (int i = 0; i < kNumDTypes; ++i) s += ":-:|";
  s += "---|\n";
  for (auto& r : rows) {
    s += "| " + r.op + " | " + r.variant + " | " + r.status() + " |";
    std::string failing;
    for (int d = 0; d < kNumDTypes; ++d) {
      const OpCell& c = r.cells[d];
      s += c.status == OpCell::Pass ? " ✅ |" : c.status == OpCell::Fail ? " ❌ |" : " · |";
      if (c.status != OpCell::Fail) continue;
      std::string what;
      for (auto& w : c.failing)
        if (!w.empty()) what += (what.empty() ? "" : ", ") + w;
      failing += (failing.empty() ? "" : "; ") + std::string(dtype_name(kDTypes[d])) + " (" + c.category +
                 (what.empty() ? "" : ": " + what) + ")";
    }
    s += " " + failing + " |\n";
  }
  int ok = 0, partial = 0, none = 0;
  for (auto& r : rows) {
    std::string st = r.status();
    ok += st == "✅";
    partial += st == "🟡";
    none += st == "❌";
  }
  s += "\n" + std::to_string(rows.size()) + " rows: " + std::to_string(ok) + " ✅, " + std::to_string(partial) + " 🟡, " +
       std::to_string(none) + " ❌.\n";
  return s;
}

std::string OpReport::json() const {
  nlohmann::json rs = nlohmann::json::array();
  for (auto& r : rows) {
    nlohmann::json cells = nlohmann::json::object();
    for (int d = 0; d < kNumDTypes; ++d) {
      const OpCell& c = r.cells[d];
      if (c.status == OpCell::NA) continue;
      nlohmann::json cj = {{"status", c.status == OpCell::Pass ? "pass" : "fail"}};
      if (c.status == OpCell::Fail) {
        cj["category"] = c.category;
        cj["failing"] = c.failing;
        cj["message"] = first_line(c.message);
      }
      cells[std::string(dtype_name(kDTypes[d]))] = cj;
    }
    std::string st = r.status();
    rs.push_back({{"op", r.op}, {"case", r.variant},
                  {"status", st == "✅" ? "pass" : st == "🟡" ? "partial" : st == "❌" ? "fail" : "n/a"},
                  {"dtypes", cells}});
  }
  return nlohmann::json{{"backend", backend}, {"rows", rs}, {"failures", failures()}}.dump(1);
}

}  // namespace lathe
