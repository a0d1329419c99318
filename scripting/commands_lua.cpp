// commands_lua.cpp — the colon commands, written in Lua over the public `lathe` API and
// installed as lathe.cmd.NAME (so `:step 3` in the REPL is lathe.cmd.step("3") in a
// script or the GUI console). Each returns the text to show; errors are raised with
// level 0 (no position: the command line is the position).
//
// State lives in Lua globals the user can also touch: g (graph), s (session), rules, p.
#include <lua.hpp>

#include "scripting/engine.h"

namespace lathe::script {

extern const char* const kCommandsChunkName = "=lathe-command";

extern const char* const kCommandsLua = R"LUA(
local cmd = {}
lathe.cmd = cmd

local function fail(msg) error(msg, 0) end
local function current_graph()
  if s ~= nil then return s:graph() end
  if g == nil then fail("no graph loaded (use :load FILE, or g = lathe.graph{ y = … })") end
  return g
end
local function need_session()
  if s == nil then fail("no rewrite session (use :rules FILE, or s = lathe.rewrite(g, rules))") end
  return s
end
local function need_program()
  if p == nil then fail("nothing compiled yet (use :compile [backend])") end
  return p
end
local function int_arg(v, what, dflt)
  if v == nil then
    if dflt == nil then fail("missing " .. what) end
    return dflt
  end
  local n = math.tointeger(tonumber(v))
  if n == nil then fail(what .. " must be an integer, got '" .. tostring(v) .. "'") end
  return n
end
local function at(ss) return "at step " .. ss:current() .. " of " .. #ss end

function cmd.load(path)
  if path == nil then fail("usage: :load FILE  (.lua, .lathe or .onnx)") end
  local gr = lathe.load(path)
  g, s, p = gr, nil, nil
  return tostring(gr)
end

function cmd.graph() return tostring(current_graph()) end
function cmd.text() return (current_graph():text():gsub("\n$", "")) end

function cmd.save(path)
  if path == nil then fail("usage: :save FILE.lathe") end
  if path:match("%.lathe%-session$") then fail("session files (.lathe-session) are not supported yet; :save FILE.lathe writes the graph") end
  current_graph():save(path)
  return "wrote " .. path
end

function cmd.rules(path, opt)
  if path == nil then fail("usage: :rules FILE.lua|BUILTIN [check]  (builtins: " .. table.concat(lathe.rules.list(), ", ") .. ")") end
  local gr = current_graph()
  local rs
  if path:match("%.lua$") then rs = lathe.rules.load(path) else rs = lathe.rules.builtin(path) end
  local ss = lathe.rewrite(gr, rs, { check = (opt == "check" or opt == "--check") })
  rules, s = rs, ss
  return "ruleset " .. rs.name .. ": " .. #rs .. " rules; session at step 0 on " .. #gr .. " nodes"
end

function cmd.step(n)
  local ss = need_session()
  if n == nil then
    local st = ss:step()
    if st == nil then return "fixpoint: no rule applies (" .. at(ss) .. ")" end
    return tostring(st)
  end
  local want = int_arg(n, "n")
  local steps = ss:step(want)
  local out = {}
  for _, st in ipairs(steps) do out[#out + 1] = tostring(st) end
  if #steps < want then out[#out + 1] = "fixpoint: no rule applies (" .. at(ss) .. ")" end
  return table.concat(out, "\n")
end

function cmd.back(n)
  local ss = need_session()
  ss:back(int_arg(n, "n", 1))
  return at(ss)
end

function cmd.seek(k)
  local ss = need_session()
  ss:seek(int_arg(k, "step"))
  return at(ss)
end

function cmd.run()
  local ss = need_session()
  local r = ss:run()
  if r.stop == "breakpoint" then
    return string.format("breakpoint: rule %s is about to fire at %%%d (%s)", r.rule, r.node, at(ss))
  end
  return string.format("fixpoint after %d step%s (%d rewrites); %s, %d nodes", r.steps, r.steps == 1 and "" or "s",
                       r.rewrites, at(ss), #ss:graph())
end

function cmd.history()
  local ss = need_session()
  local out = {}
  for _, st in ipairs(ss:history()) do
    out[#out + 1] = (st.index == ss:current() and "> " or "  ") .. tostring(st)
  end
  if #out == 0 then return "no steps yet" end
  return table.concat(out, "\n")
end

function cmd.diff(a, b)
  local ss = need_session()
  local d = ss:diff(a and int_arg(a, "step a"), b and int_arg(b, "step b"))
  local t = tostring(d):gsub("\n$", "")
  if t == "" then return "no differences" end
  return t
end

cmd["break"] = function(rule)
  if rule == nil then fail("usage: :break RULE") end
  need_session():breakpoint(rule)
  return "breakpoint on rule " .. rule
end

function cmd.why(rule, node)
  if rule == nil or node == nil then fail("usage: :why RULE NODE  (NODE: an id such as 12 or %12)") end
  return need_session():why(rule, node)
end

function cmd.stats() return (tostring(need_session():stats()):gsub("\n$", "")) end

function cmd.check()
  local r = need_session():check()
  if r.ok then return "check passed: the current graph computes what step 0 computes" end
  return string.format("check FAILED at step %d (rule %s): %s", r.step, r.rule, r.message)
end

function cmd.compile(backend)
  p = lathe.compile(current_graph(), { backend = backend })
  return cmd.kernels()
end

function cmd.kernels()
  local out = {}
  for i, k in ipairs(need_program():kernels()) do
    out[#out + 1] = string.format("%3d  %-28s %-12s %d nodes", i, k.name, k.kind, k.nodes)
  end
  return table.concat(out, "\n")
end

function cmd.source(k) return need_program():source(int_arg(k, "kernel", 1)) end
function cmd.loop(k) return need_program():loop(int_arg(k, "kernel", 1)) end
function cmd.profile(iters)
  return (need_program():profile{ iters = int_arg(iters, "iters", 20) }.text:gsub("\n$", ""))
end
)LUA";

}  // namespace lathe::script
