// loop_print.cpp — print_loop: a readable, indented listing of one kernel's loop IR.
//
//   kernel k1_softmax(out: f32 [w], in0: f32 [r])  dims()  kind=reduce
//     parallel for i0 in 0..4096:            # output dim 0
//       let acc0: f32 = -inf
//       vectorized for r1 in 0..4096 reduce max(acc0):   # reduce axis 1
//         acc0 = max(acc0, in0[i0*4096 + r1])
#include "core/loop/loop_print.h"

#include <cmath>
#include <sstream>

namespace lathe::loop {

namespace {

std::string num(const ExprRef& e) {
  if (!is_float(e->dtype)) return e->dtype == DType::Bool ? (e->i ? "true" : "false") : std::to_string(e->i);
  if (std::isinf(e->f)) return e->f > 0 ? "inf" : "-inf";
  if (std::isnan(e->f)) return "nan";
  std::ostringstream o;
  o.precision(9);
  o << e->f;
  std::string s = o.str();
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string infix(Op op) {
  switch (op) {
    case Op::Add: return " + ";
    case Op::Mul: return "*";
    case Op::IDiv: return " / ";
    case Op::Mod: return " % ";
    case Op::CmpLT: return " < ";
    case Op::CmpNE: return " != ";
    case Op::And: return " && ";
    case Op::Or: return " || ";
    case Op::Xor: return " ^ ";
    default: return "";
  }
}

std::string lower_name(Op op) {
  std::string s(op_name(op));
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string print_expr(const ExprRef& e, const LoopFunc* f) {
  if (!e) return "_";
  auto lanes = [&](std::string s) { return e->lanes > 1 ? s + "<" + std::to_string(e->lanes) + ">" : s; };
  switch (e->kind) {
    case ExprKind::Const: return num(e);
    case ExprKind::Var: return e->name;
    case ExprKind::Load: {
      std::string b = f && e->buffer < (int)f->buffers.size() ? f->buffers[e->buffer].name : "buf" + std::to_string(e->buffer);
      std::string s = lanes(b) + "[" + print_expr(e->args[0], f) + "]";
      if (e->args.size() > 1) s += " if " + print_expr(e->args[1], f);
      return e->args.size() > 1 ? "(" + s + ")" : s;
    }
    case ExprKind::LocalLoad: return lanes(e->name) + "[" + print_expr(e->args[0], f) + "]";
    case ExprKind::Unary: return lower_name(e->op) + "(" + print_expr(e->args[0], f) + ")";
    case ExprKind::Binary: {
      std::string in = infix(e->op);
      if (in.empty()) return lower_name(e->op) + "(" + print_expr(e->args[0], f) + ", " + print_expr(e->args[1], f) + ")";
      return "(" + print_expr(e->args[0], f) + in + print_expr(e->args[1], f) + ")";
    }
    case ExprKind::Select:
      return "(" + print_expr(e->args[0], f) + " ? " + print_expr(e->args[1], f) + " : " + print_expr(e->args[2], f) + ")";
    case ExprKind::Cast: return std::string(dtype_name(e->dtype)) + "(" + print_expr(e->args[0], f) + ")";
    case ExprKind::Broadcast: return "broadcast<" + std::to_string(e->lanes) + ">(" + print_expr(e->args[0], f) + ")";
    case ExprKind::Dot:
      return "dot" + std::to_string(e->args[1]->lanes) + (e->op == Op::Max ? "sat16(" : "(") + print_expr(e->args[0], f) + ", " + print_expr(e->args[1], f) +
             ", " + print_expr(e->args[2], f) + ")";
  }
  return "?";
}

namespace {

std::string buffer_name(const LoopFunc& f, int b) {
  return b >= 0 && b < (int)f.buffers.size() ? f.buffers[b].name : "buf" + std::to_string(b);
}

void print_stmts(std::ostringstream& o, const std::vector<Stmt>& body, const LoopFunc& f, int depth) {
  std::string pad(2 * depth, ' ');
  for (const Stmt& s : body) {
    switch (s.kind) {
      case StmtKind::For: {
        o << pad;
        if (s.annot.parallel) o << "parallel ";
        if (s.annot.vectorize && s.annot.width)
          o << "vectorized(" << s.annot.width << (s.annot.masked ? " masked" : "") << ") ";
        else if (s.annot.vectorize) o << "vectorized ";
        else if (s.annot.scalar) o << "scalar ";
        if (s.annot.unroll) o << "unroll(" << s.annot.unroll << ") ";
        if (s.annot.interleave) o << "interleave(" << s.annot.interleave << ") ";
        if (s.annot.stride) o << "strided(" << s.annot.stride << (s.annot.max_trip ? " <= " + std::to_string(s.annot.max_trip) : std::string()) << ") ";
        if (s.annot.transpose) o << "transpose ";
        o << "for " << s.var << " in 0.." << print_expr(s.extent, &f);
        if (!s.reduces.empty()) {
          o << " reduce " << reduce_op_name(s.reduce_op) << "(";
          for (size_t i = 0; i < s.reduces.size(); ++i) o << (i ? ", " : "") << s.reduces[i];
          o << ")";
        }
        o << ":";
        if (!s.note.empty()) o << "   # " << s.note;
        o << "\n";
        print_stmts(o, s.body, f, depth + 1);
        break;
      }
      case StmtKind::If:
        o << pad << "if " << print_expr(s.cond, &f) << ":\n";
        print_stmts(o, s.body, f, depth + 1);
        if (!s.else_body.empty()) {
          o << pad << "else:\n";
          print_stmts(o, s.else_body, f, depth + 1);
        }
        break;
      case StmtKind::Store:
        o << pad << buffer_name(f, s.buffer) << "[" << print_expr(s.index, &f) << "] = " << print_expr(s.value, &f) << "\n";
        break;
      case StmtKind::Prefetch:  // prefetch.w out[i] (locality 3, the default, unprinted)
        o << pad << "prefetch." << (s.write ? "w " : "r ") << buffer_name(f, s.buffer) << "[" << print_expr(s.index, &f) << "]";
        if (s.locality != 3) o << " locality " << s.locality;
        o << "\n";
        break;
      case StmtKind::Let:
        o << pad << "let " << s.var << ": " << dtype_name(s.dtype);
        if (s.value && s.value->lanes > 1) o << "<" << s.value->lanes << ">";
        o << " = " << print_expr(s.value, &f) << "\n";
        break;
      case StmtKind::Assign: o << pad << s.var << " = " << print_expr(s.value, &f) << "\n"; break;
      case StmtKind::Alloc:
        o << pad << "alloc " << s.var << ": " << dtype_name(s.dtype);
        if (s.lanes > 1) o << "<" << s.lanes << ">";
        o << "[" << s.count << "]" << (s.registers ? " in registers" : "") << "\n";
        break;
      case StmtKind::LocalStore:
        o << pad << s.var;
        if (s.value && s.value->lanes > 1) o << "<" << s.value->lanes << ">";
        o << "[" << print_expr(s.index, &f) << "] = " << print_expr(s.value, &f) << "\n";
        break;
    }
  }
}

}  // namespace

std::string print_loop(const LoopFunc& f) {
  std::ostringstream o;
  o << "kernel " << f.name << "(";
  for (size_t i = 0; i < f.buffers.size(); ++i)
    o << (i ? ", " : "") << f.buffers[i].name << ": " << dtype_name(f.buffers[i].dtype) << (f.buffers[i].written ? " [w]" : " [r]")
      << (f.buffers[i].offset ? " @+" + std::to_string(f.buffers[i].offset) : "");
  o << ")";
  if (!f.dims.empty()) {
    o << "  dims(";
    for (size_t i = 0; i < f.dims.size(); ++i) o << (i ? ", " : "") << f.dims[i];
    o << ")";
  }
  o << "  kind=" << f.kind << "\n";
  for (auto& l : f.schedule_log) o << "  # schedule: " << l << "\n";
  print_stmts(o, f.body, f, 1);
  return o.str();
}

}  // namespace lathe::loop
