// binding.h — the small toolkit every binding file (bind_*.cpp) uses: registration
// tables, C++-exception-to-Lua-error conversion, userdata types and argument conversion.
//
// A binding file exports one `void bind_AREA(lua_State* L, int module)` that registers
// its table of `Function`s into the `lathe` module table at stack index `module` (or into
// a metatable). Each entry carries a signature and a one-line doc, which feed `lathe help`
// and the REPL's `:help` and completion.
//
// Functions are registered through `push_guarded`: a UserError (or any std::exception) thrown inside F
// becomes a Lua error whose message starts with the Lua caller's "file:line:". Lua's own
// errors pass through untouched (lua5.4-c++ unwinds them as C++ exceptions of another type).
#pragma once
#include <lua.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/runtime/host_tensor.h"

namespace lathe::script {

// One row of a registration table.
struct Function {
  const char* name;       // "input" (module function) or "matmul" (method)
  lua_CFunction fn;
  const char* signature;  // "lathe.input(name, dims [, dtype])"
  const char* doc;        // one line
};

// Help entries, filled by registration (topic = "lathe.input", "Tensor:matmul", …).
struct HelpEntry { std::string signature, doc; };
const std::map<std::string, HelpEntry>& help_entries();
void add_help(const std::string& topic, const std::string& signature, const std::string& doc);
// The entry a topic names: a registered topic ("Schedule:split"), a short name ("split",
// "randn"), or a name as the listings show it ("k:split", "s:step"); nullptr if none.
const HelpEntry* find_help_entry(const std::string& topic);
// The head of a signature as the listings show it: "k:split" of "k:split(loop, factor)".
std::string help_signature_head(const std::string& signature);
// Longer topics that are not one function ("patterns": the rule pattern syntax); nullptr if none.
const char* help_guide(const std::string& topic);

// Registers fns into the table at `table` (absolute index); topics are prefix + name.
// Every function is registered through push_guarded, so C++ exceptions become Lua errors.
void register_functions(lua_State* L, int table, const Function* fns, const std::string& help_prefix);
// Pushes a C closure calling `raw` under the exception guard. `data` (optional) is
// available to raw as lua_upvalueindex(2) (a light userdata), for table-driven bindings;
// `extra_upvalues` values popped from the stack become upvalues 3, 4, ….
void push_guarded(lua_State* L, lua_CFunction raw, const void* data = nullptr, int extra_upvalues = 0);
inline const void* guarded_data(lua_State* L) { return lua_touserdata(L, lua_upvalueindex(2)); }

// Raises a Lua error "file:line: msg" at the Lua caller of the running C function.
[[noreturn]] void raise(lua_State* L, const std::string& msg);
// Message text of a C++ exception as shown to a Lua caller (without the location).
std::string exception_text(const std::exception& e);
// A value's type for messages: the metatable's __name ("lathe.Graph") or the Lua type.
std::string type_of(lua_State* L, int idx);

// ---- userdata type names (metatables in the registry) ----
inline constexpr const char* kTensorMT = "lathe.Tensor";    // a lazy graph node
inline constexpr const char* kValueMT = "lathe.Value";      // a concrete HostTensor
inline constexpr const char* kGraphMT = "lathe.Graph";

// Typed userdata holding a C++ value; the metatable must exist (created by its bind file).
template <class T>
T* new_udata(lua_State* L, const char* mt, T value) {
  void* p = lua_newuserdatauv(L, sizeof(T), 0);
  T* obj = new (p) T(std::move(value));
  luaL_setmetatable(L, mt);
  return obj;
}
template <class T>
T* test_udata(lua_State* L, int idx, const char* mt) { return static_cast<T*>(luaL_testudata(L, idx, mt)); }
// Creates a metatable with __gc calling T's destructor, __name, and __index = methods
// table (left for the caller to fill). Leaves the metatable on the stack.
template <class T>
void new_type(lua_State* L, const char* mt) {
  luaL_newmetatable(L, mt);
  lua_pushcfunction(L, [](lua_State* L) -> int {
    static_cast<T*>(lua_touserdata(L, 1))->~T();
    return 0;
  });
  lua_setfield(L, -2, "__gc");
}

// ---- values ----
void push_node(lua_State* L, NodeRef n);                // a lathe.Tensor
NodeRef check_node(lua_State* L, int idx);              // lathe.Tensor (or a lathe.Value → Const)
NodeRef to_node_or_null(lua_State* L, int idx);         // nullptr when not a tensor-like
void push_value(lua_State* L, HostTensor t);            // a lathe.Value
HostTensor& check_value(lua_State* L, int idx);
void push_graph(lua_State* L, Graph g);
Graph& check_graph(lua_State* L, int idx);

// "f32" → DType; raises a located error listing the dtypes for an unknown name.
DType check_dtype(lua_State* L, int idx, DType dflt);
void push_dtype(lua_State* L, DType t);
// {"B", 784} → Shape (numbers must be non-negative integers; strings parse as SymInt).
Shape check_shape(lua_State* L, int idx);
std::vector<int64_t> check_int_list(lua_State* L, int idx, const char* what);
void push_shape(lua_State* L, const Shape& s);           // {"B", 784}
void push_int_list(lua_State* L, const std::vector<int64_t>& v);
int64_t check_int(lua_State* L, int idx, const char* what);
// An axis argument (0-based, negative counts from the end, PyTorch style) normalized
// against `rank`; raises a located error when out of range.
int check_axis(lua_State* L, int idx, int rank);

// A table field as a string/number/bool with default.
std::string opt_field_string(lua_State* L, int table, const char* key, const std::string& dflt);
double opt_field_number(lua_State* L, int table, const char* key, double dflt);
bool opt_field_bool(lua_State* L, int table, const char* key, bool dflt);

// Tensor methods: registered into the lathe.Tensor methods table (x:exp()) and, unless
// the module already has the name, as module functions too (lathe.exp(x)).
void add_tensor_methods(lua_State* L, int module, const Function* fns);
// Axes argument: nil → {} (all), integer → {a}, table → list.
std::vector<int> opt_axes(lua_State* L, int idx);
// True when the value at idx is an options table ({axis=1, keepdim=true}), not a list.
bool is_options_table(lua_State* L, int idx);

// Binding entry points (one per area; each file holds its registration table).
void bind_tensor(lua_State* L, int module);   // bind_tensor.cpp: lathe.input/const, operators, math
void bind_tensor_shape(lua_State* L, int module);  // bind_tensor_shape.cpp: shape ops, reductions
void bind_tensor_nn(lua_State* L, int module);     // bind_tensor_nn.cpp: matmul, conv, norms, attention
void bind_tensor_torch(lua_State* L, int module);  // bind_tensor_torch.cpp: dim, numel, masked_fill, einsum …
void bind_value(lua_State* L, int module);    // bind_value.cpp: lathe.tensor/randn/allclose + Value
void bind_graph(lua_State* L, int module);    // bind_graph.cpp: lathe.graph/load + Graph methods
void bind_run(lua_State* L, int module);      // bind_run.cpp: lathe.run (+ lathe.compile later)
void bind_attention(lua_State* L, int module);  // bind_attention.cpp: lathe.attention/strided/causal_pattern
void bind_rules(lua_State* L, int module);    // bind_rules.cpp: lathe.rule/ruleset/rules.*
void bind_session(lua_State* L, int module);  // bind_session.cpp: lathe.rewrite + Session
void bind_quantize(lua_State* L, int module);  // bind_quantize.cpp: lathe.quantize/quantization_error
// Builds the whole `lathe` module and sets it as a global (module.cpp).
void open_lathe(lua_State* L);

}  // namespace lathe::script
