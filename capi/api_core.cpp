// api_core.cpp — the C API's plumbing and tensor frontend: errors and version, help text,
// strings, the shared Lua state, DLPack descriptors, tensor handles and lathe_call (any
// composite by name, through the Lua API's own Tensor-method / lathe.* tables).
#include <dlfcn.h>

#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "capi/internal.h"
#include "core/frontend/tensor.h"
#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "scripting/binding.h"
#ifdef HAVE_LATHE_IMPORT
#include "core/import/onnx_import.h"
#endif

#if __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
static_assert(sizeof(lathe_dltensor) == sizeof(DLTensor), "lathe_dltensor must be laid out as DLTensor");
static_assert(offsetof(lathe_dltensor, ndim) == offsetof(DLTensor, ndim));
static_assert(offsetof(lathe_dltensor, dtype) == offsetof(DLTensor, dtype));
static_assert(offsetof(lathe_dltensor, shape) == offsetof(DLTensor, shape));
static_assert(offsetof(lathe_dltensor, strides) == offsetof(DLTensor, strides));
static_assert(offsetof(lathe_dltensor, byte_offset) == offsetof(DLTensor, byte_offset));
#endif

using namespace lathe;

namespace lathe::capi {
namespace {
thread_local std::string t_last_error;

// Installed layout: <prefix>/lib/liblathe.so and <prefix>/share/lathe/assets/rules. Built-in
// rule sets are found there unless LATHE_ASSETS says otherwise (the scripting layer looks
// next to the executable, which for a binding is the host language's interpreter).
void point_assets_at_install() {
  if (const char* env = std::getenv("LATHE_ASSETS"); env && *env) return;
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&point_assets_at_install), &info) || !info.dli_fname) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path lib = fs::canonical(info.dli_fname, ec);
  if (ec) return;
  for (fs::path cand : {lib.parent_path().parent_path() / "share" / "lathe" / "assets",
                        lib.parent_path().parent_path().parent_path() / "share" / "lathe" / "assets"})
    if (fs::is_directory(cand / "rules", ec)) {
      setenv("LATHE_ASSETS", cand.c_str(), 0);
      return;
    }
}
}  // namespace

lathe_status fail(lathe_status st, const std::string& msg) {
  t_last_error = msg;
  return st;
}

std::recursive_mutex& lua_mutex() {
  static std::recursive_mutex m;
  return m;
}

script::Engine& engine() {
  // Never destroyed: rule sets and sessions may outlive static destruction order.
  static script::Engine* e = [] {
    point_assets_at_install();
#ifdef HAVE_LATHE_IMPORT
    register_onnx_loader();
#endif
    // the Lua API's limits: a runaway rule stops with "instruction budget exceeded"
    return new script::Engine(script::Limits{});
  }();
  return *e;
}

char* dup_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = 0;
  return p;
}
void put_string(char** out, const std::string& s) { need(out, "out") = dup_string(s); }

lathe_tensor new_tensor(NodeRef n) {
  auto* t = new lathe_tensor_s;
  t->n = n;
  return t;
}

DType dl_dtype(const lathe_dltensor& t, const std::string& what) {
  int code = t.dtype.code, bits = t.dtype.bits;
  if (t.dtype.lanes != 1) throw UserError(what + ": vector dtypes (lanes " + std::to_string(t.dtype.lanes) + ") are not supported");
  auto bad = [&]() -> DType {
    throw UserError(what + ": unsupported DLPack dtype (code " + std::to_string(code) + ", " + std::to_string(bits) + " bits)");
  };
  switch (code) {
    case 0: return bits == 8 ? DType::I8 : bits == 16 ? DType::I16 : bits == 32 ? DType::I32 : bits == 64 ? DType::I64 : bad();
    case 1: return bits == 8 ? DType::U8 : bits == 16 ? DType::U16 : bits == 32 ? DType::U32 : bits == 64 ? DType::U64 : bad();
    case 2: return bits == 16 ? DType::F16 : bits == 32 ? DType::F32 : bits == 64 ? DType::F64 : bad();
    case 4: return bits == 16 ? DType::BF16 : bad();
    case 6: return bits == 8 ? DType::Bool : bad();
    default: return bad();
  }
}

std::vector<int64_t> dl_shape(const lathe_dltensor& t, const std::string& what) {
  if (t.device.device_type != 1 && t.device.device_type != 3)  // kDLCPU, kDLCUDAHost
    throw UserError(what + ": only host memory is accepted (DLPack device type " + std::to_string(t.device.device_type) + ")");
  if (t.ndim < 0 || t.ndim > 64) throw UserError(what + ": bad ndim " + std::to_string(t.ndim));
  if (t.ndim > 0 && !t.shape) throw UserError(what + ": shape is NULL");
  std::vector<int64_t> s(t.shape, t.shape + t.ndim);
  for (int64_t d : s)
    if (d < 0) throw UserError(what + ": negative dimension");
  if (t.strides) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (s[i] != 1 && t.strides[i] != expect)
        throw UserError(what + ": strided tensors are not accepted; pass a contiguous (row-major) copy");
      expect *= s[i];
    }
  }
  return s;
}

void* dl_data(const lathe_dltensor& t) { return static_cast<char*>(t.data) + t.byte_offset; }

const lathe_value* find_opt(const lathe_value* opts, size_t n, const char* key) {
  for (size_t i = 0; i < n; ++i)
    if (opts[i].key && std::strcmp(opts[i].key, key) == 0) return &opts[i];
  return nullptr;
}

}  // namespace lathe::capi

using namespace lathe::capi;

namespace {

// ---------------------------------------------------------------- lathe_call's Lua side
void push_arg(lua_State* L, const lathe_value& v, int depth) {
  if (depth > 16) throw UserError("lathe_call: lists nested too deeply");
  switch (v.kind) {
    case LATHE_NIL: lua_pushnil(L); break;
    case LATHE_TENSOR: script::push_node(L, need(v.u.tensor, "tensor argument").n); break;
    case LATHE_INT: lua_pushinteger(L, v.u.i); break;
    case LATHE_FLOAT: lua_pushnumber(L, v.u.f); break;
    case LATHE_BOOL: lua_pushboolean(L, v.u.i != 0); break;
    case LATHE_STRING: lua_pushstring(L, need(v.u.s, "string argument")); break;
    case LATHE_LIST:
      lua_createtable(L, (int)v.u.list.n, 0);
      for (size_t i = 0; i < v.u.list.n; ++i) {
        push_arg(L, v.u.list.items[i], depth + 1);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
      }
      break;
    default: throw BadArg("lathe_call: unknown value kind " + std::to_string(v.kind));
  }
}

void collect_results(lua_State* L, int idx, std::vector<NodeRef>& out, const std::string& name) {
  if (NodeRef n = script::to_node_or_null(L, idx)) { out.push_back(n); return; }
  if (lua_istable(L, idx)) {
    lua_Integer k = luaL_len(L, idx);
    for (lua_Integer i = 1; i <= k; ++i) {
      lua_geti(L, idx, i);
      NodeRef n = script::to_node_or_null(L, -1);
      std::string t = n ? "" : script::type_of(L, -1);
      lua_pop(L, 1);
      if (!n) throw UserError(name + " returned a table holding a " + t + ", not tensors");
      out.push_back(n);
    }
    return;
  }
  if (lua_isnil(L, idx)) return;
  throw UserError(name + " returns a " + script::type_of(L, idx) + ", not a tensor");
}

// The positional parameter names of a help signature's first form:
// "x:conv2d(weight [, bias [, stride …]])" → {weight, bias, stride, …} (after self for a
// method "x:name(…)"); "" for a parameter that is not a plain name. Empty when unparsable.
std::vector<std::string> signature_params(const std::string& sig, bool* is_method) {
  std::vector<std::string> out;
  std::string first = sig.substr(0, sig.find(" | "));
  size_t open = first.find('('), close = first.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return out;
  *is_method = first.rfind("lathe.", 0) != 0;
  std::string inner = first.substr(open + 1, close - open - 1), tok;
  auto flush = [&] {
    std::string name;
    size_t i = 0;
    while (i < tok.size() && (tok[i] == ' ' || tok[i] == '[')) ++i;
    while (i < tok.size() && (std::isalnum((unsigned char)tok[i]) || tok[i] == '_')) name += tok[i++];
    while (i < tok.size() && (tok[i] == ' ' || tok[i] == ']' || tok[i] == '[')) ++i;
    if (i < tok.size() && tok[i] != '=') name.clear();  // "{before, after}", "d0, d1, …"
    out.push_back(name);
    tok.clear();
  };
  int depth = 0;
  for (char c : inner) {
    if (c == '{' || c == '(') ++depth;
    if (c == '}' || c == ')') --depth;
    if (c == ',' && depth == 0) flush();
    else tok += c;
  }
  if (!tok.empty()) flush();
  return out;
}

}  // namespace

extern "C" {

int lathe_api_version(void) { return LATHE_API_VERSION; }
const char* lathe_version(void) { return "0.1.0"; }
const char* lathe_last_error(void) { return t_last_error.c_str(); }
void lathe_string_free(char* s) { std::free(s); }

lathe_status lathe_help(const char* topic, char** out) {
  return guard([&] {
    std::string t = need(topic, "topic");
    std::lock_guard lk(lua_mutex());
    engine();  // registration fills the help table
    const auto& h = script::help_entries();
    for (const std::string& cand : {t, "lathe." + t, "Tensor:" + t}) {
      auto it = h.find(cand);
      if (it != h.end()) {
        put_string(out, it->second.signature + "\n  " + it->second.doc);
        return;
      }
    }
    throw UserError("no help topic '" + t + "' (lathe_help_topics lists them)");
  });
}

lathe_status lathe_help_topics(char** out) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    engine();
    std::string s;
    for (auto& [k, v] : script::help_entries()) s += k + "\n";
    put_string(out, s);
  });
}

lathe_status lathe_call(const char* name, const lathe_value* args, size_t nargs, lathe_tensor* results, size_t capacity,
                        size_t* count) {
  return guard([&] {
    std::string fname = need(name, "name");
    if (nargs && !args) throw BadArg("args is NULL");
    if (capacity && !results) throw BadArg("results is NULL");
    std::lock_guard lk(lua_mutex());
    script::Engine& e = engine();
    lua_State* L = e.L();
    int top = lua_gettop(L);
    struct Restore {
      lua_State* L;
      int top;
      ~Restore() { lua_settop(L, top); }
    } restore{L, top};
    // "lathe.where" is the module function; a plain name is the Tensor method, else the
    // module function of that name (input, cat, arange, …).
    bool module_only = fname.rfind("lathe.", 0) == 0;
    std::string key = module_only ? fname.substr(6) : fname;
    bool found = false;
    if (!module_only) {
      lua_getfield(L, LUA_REGISTRYINDEX, "lathe.Tensor.methods");
      found = lua_getfield(L, -1, key.c_str()) == LUA_TFUNCTION;
      lua_remove(L, -2);
      if (!found) lua_pop(L, 1);
    }
    bool found_method = found;
    if (!found) {
      lua_getglobal(L, "lathe");
      found = lua_getfield(L, -1, key.c_str()) == LUA_TFUNCTION;
      lua_remove(L, -2);
      if (!found) {
        lua_pop(L, 1);
        throw UserError("no composite or function '" + fname + "' (lathe_call_names lists them)");
      }
    }
    // Keyword arguments: one that names a positional parameter of the function's help
    // signature goes in that position (the ones skipped are nil), the others form one
    // trailing options table — so x.conv2d(w, padding=1) means x:conv2d(w, nil, nil, 1).
    std::vector<const lathe_value*> pos;
    std::vector<const lathe_value*> opts;
    for (size_t i = 0; i < nargs; ++i)
      if (!args[i].key) pos.push_back(&args[i]);
    bool any_key = pos.size() < nargs;
    if (any_key) {
      const auto& h = script::help_entries();
      auto it = h.find((found_method ? "Tensor:" : "lathe.") + key);
      if (it == h.end()) it = h.find("Tensor:" + key);
      bool is_method = false;
      std::vector<std::string> params;
      if (it != h.end()) params = signature_params(it->second.signature, &is_method);
      size_t given = pos.size();
      for (size_t i = 0; i < nargs; ++i) {
        if (!args[i].key) continue;
        size_t at = SIZE_MAX;
        for (size_t j = 0; j < params.size(); ++j)
          if (!params[j].empty() && params[j] == args[i].key) at = j + (is_method ? 1 : 0);
        if (at == SIZE_MAX) { opts.push_back(&args[i]); continue; }
        if (at < given) throw UserError(fname + ": argument '" + args[i].key + "' is given twice");
        if (pos.size() <= at) pos.resize(at + 1, nullptr);
        if (pos[at]) throw UserError(fname + ": argument '" + args[i].key + "' is given twice");
        pos[at] = &args[i];
      }
    }
    int n = 0;
    for (const lathe_value* v : pos) {
      if (v) push_arg(L, *v, 0);
      else lua_pushnil(L);
      ++n;
    }
    if (!opts.empty()) {
      lua_newtable(L);
      for (const lathe_value* v : opts) {
        push_arg(L, *v, 0);
        lua_setfield(L, -2, v->key);
      }
      ++n;
    }
    script::ScriptError err;
    if (!e.call(n, LUA_MULTRET, &err))
      throw UserError(err.message.rfind(key + ":", 0) == 0 ? err.message : fname + ": " + err.message);
    std::vector<NodeRef> outs;
    for (int i = top + 1; i <= lua_gettop(L); ++i) collect_results(L, i, outs, fname);
    if (count) *count = outs.size();
    for (size_t i = 0; i < outs.size() && i < capacity; ++i) results[i] = new_tensor(outs[i]);
  });
}

lathe_status lathe_call_names(char** out) {
  return guard([&] {
    std::lock_guard lk(lua_mutex());
    lua_State* L = engine().L();
    int top = lua_gettop(L);
    std::string s;
    lua_getfield(L, LUA_REGISTRYINDEX, "lathe.Tensor.methods");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_isfunction(L, -1)) s += std::string("method ") + lua_tostring(L, -2) + "\n";
      lua_pop(L, 1);
    }
    lua_getglobal(L, "lathe");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -2) == LUA_TSTRING && lua_isfunction(L, -1)) s += std::string("function ") + lua_tostring(L, -2) + "\n";
      lua_pop(L, 1);
    }
    lua_settop(L, top);
    put_string(out, s);
  });
}

lathe_status lathe_tensor_from_buffer(const lathe_dltensor* data, lathe_tensor* out) {
  return guard([&] {
    const lathe_dltensor& d = need(data, "data");
    need(out, "out");
    HostTensor t(dl_dtype(d, "tensor"), dl_shape(d, "tensor"));
    if (t.nbytes()) std::memcpy(t.data(), dl_data(d), t.nbytes());
    *out = new_tensor(prim::constant_tensor(t));
  });
}

lathe_tensor lathe_tensor_retain(lathe_tensor t) {
  if (t) t->refs.fetch_add(1, std::memory_order_relaxed);
  return t;
}

void lathe_tensor_destroy(lathe_tensor t) {
  if (!t) return;
  if (t->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete t;
}

lathe_status lathe_tensor_describe(lathe_tensor t, lathe_tensor_info* out) {
  return guard([&] {
    NodeRef n = need(t, "tensor").n;
    lathe_tensor_info& o = need(out, "out");
    o.id = n->id;
    o.op = op_name(n->op).data();
    o.dtype = dtype_name(n->dtype).data();
    o.ndim = (int32_t)n->shape.size();
    o.name = (n->op == Op::Input || n->op == Op::Extern) ? n->attrs.name.c_str() : "";
  });
}

lathe_status lathe_tensor_dim(lathe_tensor t, int32_t i, int64_t* value, const char** expr) {
  return guard([&] {
    lathe_tensor_s& ts = need(t, "tensor");
    if (i < 0 || i >= (int32_t)ts.n->shape.size()) throw BadArg("dim " + std::to_string(i) + " is out of range");
    const SymInt& s = ts.n->shape[i];
    if (value) *value = s.is_const() ? s.value() : -1;
    if (expr) {
      std::lock_guard lk(lua_mutex());
      ts.strings.push_back(s.to_string());
      *expr = ts.strings.back().c_str();
    }
  });
}

lathe_status lathe_tensor_text(lathe_tensor t, char** out) {
  return guard([&] {
    NodeRef n = need(t, "tensor").n;
    // as Lua's tostring(x) (bind_tensor.cpp)
    std::string s = "Tensor " + std::string(dtype_name(n->dtype)) + shape_to_string(n->shape) + " (%" +
                    std::to_string(n->id) + " " + std::string(op_name(n->op));
    if (n->op == Op::Input) s += " \"" + n->attrs.name + "\"";
    if (n->is_scalar_const()) {
      std::ostringstream os;
      os << n->const_value();
      s += " " + os.str();
    }
    put_string(out, s + ")");
  });
}

}  // extern "C"
