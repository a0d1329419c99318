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
local cmd = lathe.cmd   -- created by the Workbench with the native helpers (_step_n, _session_save, …)
cmd.state = cmd.state or {}   -- what :save FILE.lathe-session records: rules, breakpoints, compile, profile

local function fail(msg) error(msg, 0) end
local function plural(n, word) return n .. " " .. word .. (n == 1 and "" or "s") end
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
-- p as the commands that show or run it see it: with a note when it is not the current
-- graph's program (compiled at another step, before :step / :back / :seek, or from
-- another graph), so step 2's kernels are never listed as the current graph's.
local function stale_note(prog)
  local gr = current_graph()
  if cmd._compiled_from(prog, gr) then return nil end
  local now = s ~= nil and ("the session is at step " .. s:current()) or "the current graph is another one"
  local was = "p is not compiled from the current graph"
  if s ~= nil and cmd.state.compiled_step ~= nil and cmd._compiled_from(prog, s:graph(cmd.state.compiled_step)) then
    was = "p was compiled at step " .. cmd.state.compiled_step
  end
  return "note: " .. was .. "; " .. now .. " (:compile to recompile)"
end
local function with_note(prog, text)
  local note = stale_note(prog)
  if note == nil then return text end
  return note .. "\n" .. text
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

-- An .onnx model loaded (:load, a file the app opens) gets its attention fused as `lathe run`
-- and `lathe kernels` fuse it (LATHE_FLASH_ATTENTION, scripting/attention_on_load.h), here as
-- a session s of the flash-attention rules at its last step: :history shows the step, :seek 0
-- undoes it. fuse_on_load only computes (a bad LATHE_FLASH_ATTENTION fails before any state
-- changes); start_fused makes it the session and returns the note to show (nil: none fused).
local function fuse_on_load(path, gr)
  if not path:match("%.onnx$") then return nil end
  return cmd._fuse_attention(gr)
end
local function start_fused(ss, rs, n)
  if ss == nil then return nil end
  cmd._note_rules("flash-attention", true, ss)
  rules, s = rs, ss
  return "flash-attention: " .. plural(n, "attention") .. " fused, as `lathe run` does: session s " .. at(ss) ..
         " (:seek 0 undoes; LATHE_FLASH_ATTENTION=0 loads without)"
end

function cmd.load(path)
  if path == nil then fail("usage: :load FILE  (.lua, .lathe or .onnx)") end
  if path:match("%.lathe%-session$") then return cmd.open(path) end
  local gr = lathe.load(path)
  local ss, rs, n = fuse_on_load(path, gr)
  g, s, p = gr, nil, nil
  cmd.state = { graph_path = path }
  local note = start_fused(ss, rs, n)
  return tostring(gr) .. (note and "\n" .. note or "")
end

-- The app: g is the graph it just opened from path (app/cmd_gui.cpp).
function cmd._attention_on_load(path) return start_fused(fuse_on_load(path, g)) end

function cmd.graph() return tostring(current_graph()) end
function cmd.text() return (current_graph():text():gsub("\n$", "")) end

function cmd.save(path)
  if path == nil then fail("usage: :save FILE.lathe (the graph) or :save FILE.lathe-session (the whole session)") end
  if path:match("%.lathe%-session$") then return cmd._session_save(path) end
  current_graph():save(path)
  return "wrote " .. path
end

function cmd.open(path)
  if path == nil then fail("usage: :open FILE.lathe-session  (a graph file opens as with :load)") end
  if not path:match("%.lathe%-session$") then return cmd.load(path) end
  local info = cmd._session_open(path)
  local out = { info.summary }
  if info.backend then
    -- p is compiled from the graph the session reopens at; when it was saved compiled at
    -- another step, that program is not brought back (a note says so)
    local gr, step = g, nil
    if s ~= nil then gr, step = s:graph(), s:current() end
    local ok, err = pcall(function() p = cmd._compile(gr, info.backend) end)
    if ok then
      cmd.state.backend, cmd.state.compiled_step = info.backend, step
      local nk = #p:kernels()
      out[#out + 1] = "compiled with " .. info.backend .. " as p: " .. nk .. " kernel" .. (nk == 1 and "" or "s")
      if step ~= nil and info.compiled_step ~= nil and info.compiled_step ~= step then
        out[#out + 1] = "note: p was compiled at step " .. info.compiled_step .. " when saved; compiled for the current step " .. step .. " instead"
      end
    else
      out[#out + 1] = "note: could not compile with " .. info.backend .. ": " .. tostring(err)
    end
  end
  return table.concat(out, "\n")
end

function cmd.rules(path, opt)
  if path == nil then fail("usage: :rules FILE.lua|BUILTIN [check]  (builtins: " .. table.concat(lathe.rules.list(), ", ") .. ")") end
  local gr = current_graph()
  local rs
  if path:match("%.lua$") then rs = lathe.rules.load(path) else rs = lathe.rules.builtin(path) end
  local ss = lathe.rewrite(gr, rs, { check = (opt == "check" or opt == "--check") })
  cmd._note_rules(path, not path:match("%.lua$"), ss)
  rules, s = rs, ss
  return "ruleset " .. rs.name .. ": " .. plural(#rs, "rule") .. "; session at step 0 on " .. plural(#gr, "node")
end

function cmd.step(n)
  local ss = need_session()
  if n == nil then
    local st = ss:step()
    if st == nil then return "fixpoint: no rule applies (" .. at(ss) .. ")" end
    return tostring(st)
  end
  local want = int_arg(n, "n")
  local steps, stop = cmd._step_n(ss, want)
  local out = {}
  for _, st in ipairs(steps) do out[#out + 1] = tostring(st) end
  if stop == "fixpoint" then out[#out + 1] = "fixpoint: no rule applies (" .. at(ss) .. ")" end
  if stop == "interrupted" then out[#out + 1] = "interrupted after " .. #steps .. " step" .. (#steps == 1 and "" or "s") .. " (" .. at(ss) .. ")" end
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
  local r = cmd._run(ss)
  if r.stop == "breakpoint" then
    return string.format("breakpoint: rule %s is about to fire at %%%d (%s)", r.rule, r.node, at(ss))
  end
  return string.format("fixpoint after %s (%s); %s, %s", plural(r.steps, "step"), plural(r.rewrites, "rewrite"),
                       at(ss), plural(#ss:graph(), "node"))
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
  local prog, used = cmd._compile(current_graph(), backend)
  p = prog
  cmd.state.backend = used
  cmd.state.compiled_step = s and s:current() or nil
  cmd.state.profile = nil
  return cmd.kernels()
end

function cmd.kernels()
  local out = {}
  local prog = need_program()
  for i, k in ipairs(prog:kernels()) do
    out[#out + 1] = string.format("%3d  %-28s %-12s %s", i, k.name, k.kind, plural(k.nodes, "node")) ..
                    (k.rescheduled and "  (rescheduled: :loop " .. i .. ")" or "")
  end
  if #out == 0 then return with_note(prog, "no kernels (the interp backend runs the graph as a whole)") end
  return with_note(prog, table.concat(out, "\n"))
end

function cmd.source(k) local prog = need_program() return with_note(prog, prog:source(int_arg(k, "kernel", 1))) end
function cmd.loop(k) local prog = need_program() return with_note(prog, prog:loop(int_arg(k, "kernel", 1))) end
function cmd.asm(k) local prog = need_program() return with_note(prog, prog:asm(int_arg(k, "kernel", 1))) end

-- "B=64 T=128" words -> {B = 64, T = 128}; the other words are returned in order.
local function split_binds(...)
  local binds, rest = {}, {}
  for _, w in ipairs({...}) do
    local k, v = w:match("^([%a_][%w_]*)=(%-?%d+)$")
    if k then binds[k] = math.tointeger(tonumber(v)) else rest[#rest + 1] = w end
  end
  return binds, rest
end

local function profile_result(r)
  local t = r.text:gsub("\n$", "")
  if r.defaults ~= "" then t = t .. "\nsymbolic dims not given, used " .. r.defaults .. " (e.g. :profile 20 " .. r.defaults:match("^%S+") .. ")" end
  if r.interrupted then t = t .. "\ninterrupted: " .. r.iters .. " iteration" .. (r.iters == 1 and "" or "s") .. " measured" end
  return t
end

function cmd.profile(...)
  local binds, rest = split_binds(...)
  local iters = rest[1]
  if iters == "last" then
    if cmd.state.profile == nil then fail("no profile yet (:profile [iters])") end
    return (cmd.state.profile.text:gsub("\n$", ""))
  end
  local prog = need_program()
  local r = cmd._profile(prog, int_arg(iters, "iters", 20), nil, binds)
  cmd.state.profile = { iters = r.iters, total_ms = r.total_ms, text = r.text }
  return with_note(prog, profile_result(r))
end

-- :tune [trials] [model|time] [KERNELS] [FILE.jsonl] [budget=S] [B=N]
function cmd.tune(...)
  local binds, rest = split_binds(...)
  local prog = need_program()
  local o = { binds = binds }
  for _, w in ipairs(rest) do
    local secs = w:match("^budget=(%d+%.?%d*)$")
    if math.tointeger(tonumber(w)) then o.trials = int_arg(w, "trials")
    elseif w == "model" or w == "time" then o.measure = w
    elseif secs then o.budget = tonumber(secs)
    elseif w:match("%.jsonl$") then o.records = w
    elseif w:match("^[%w_,]+$") then o.kernels = w
    else fail("usage: :tune [trials] [model|time] [k0,k2…] [FILE.jsonl] [budget=S] [SYM=N…]") end
  end
  local r = cmd._tune(prog, o)
  return with_note(prog, r.text)
end

-- :quantize [dynamic|weight-int8|weight-int4] [per-channel|per-tensor] [block=N] [error=BACKEND|none] [seed=N]
-- One step of the session (s:apply; a session with no rules is started when there is none):
-- the quantize pass (lathe.quantize), then the error it introduced per output on seeded inputs.
function cmd.quantize(...)
  local o, eb, seed = { mode = "dynamic", per_channel = false, block = 32 }, nil, 0
  local usage = "usage: :quantize [dynamic|weight-int8|weight-int4] [per-channel|per-tensor] [block=N] [error=BACKEND|none] [seed=N]"
  for _, w in ipairs({...}) do
    local k, v = w:match("^(%a+)=(.+)$")
    if w == "dynamic" or w == "weight-int8" or w == "weight-int4" then o.mode = w
    elseif w == "per-channel" or w == "--per-channel" then o.per_channel = true
    elseif w == "per-tensor" then o.per_channel = false
    elseif k == "block" then o.block = int_arg(v, "block")
    elseif k == "seed" then seed = int_arg(v, "seed")
    elseif k == "error" then eb = v
    else fail(usage .. "\n(unknown word '" .. w .. "')") end
  end
  if o.block <= 0 then fail("quantize: block must be positive, got " .. o.block) end
  if s == nil then s = lathe.rewrite(current_graph(), {}) end
  local name = "quantize " .. o.mode .. (o.mode ~= "weight-int4" and (o.per_channel and " per-channel" or " per-tensor") or "") ..
               (o.mode == "weight-int4" and (" block=" .. o.block) or "")
  local before, info = s:graph(), nil
  local st = s:apply(name, function(gr)
    local q, i = lathe.quantize(gr, o)
    info = i
    return q
  end)
  if st == nil then
    return "nothing to quantize: no MatMul/Gemm-like contraction with a constant 2-D f32 weight (" ..
           plural(info and info.skipped or 0, "contraction") .. " left float); " .. at(s)
  end
  local out = {}
  for _, n in ipairs(info.notes) do out[#out + 1] = "  " .. n end
  local function size(b) return b >= 1e6 and string.format("%.2f MB", b / 1e6) or string.format("%.1f KB", b / 1e3) end
  out[#out + 1] = string.format("%s: %s quantized, %d left float; weights %s -> %s", o.mode,
    plural(info.quantized, "contraction"), info.skipped, size(info.weight_bytes_before), size(info.weight_bytes_after))
  out[#out + 1] = tostring(st)
  if eb ~= "none" then
    for _, e in ipairs(lathe.quantization_error(before, s:graph(), seed, eb)) do
      out[#out + 1] = string.format("output %s: max|d|/max|ref| %.4g  cosine %.6f", e.output, e.rel_max, e.cosine)
    end
  end
  return table.concat(out, "\n")
end

function cmd.trace(...)
  local binds, rest = split_binds(...)
  local path, iters = rest[1], rest[2]
  if path == nil then fail("usage: :trace FILE.json [iters] [SYM=N…]  (Chrome trace-event JSON; open it in Perfetto)") end
  local prog = need_program()
  local r = cmd._profile(prog, int_arg(iters, "iters", 5), path, binds)
  return with_note(prog, "wrote ") .. path .. " (" .. r.kernels .. " kernel" .. (r.kernels == 1 and "" or "s") .. ", " .. r.iters ..
         " iterations profiled; open it in https://ui.perfetto.dev)"
end

function cmd.dot(path, level)
  if path == nil then fail("usage: :dot FILE.dot [tensor|primitive|kernel]") end
  if path:match("%.svg$") or path:match("%.png$") or path:match("%.pdf$") then
    fail("the REPL writes DOT text only: use :dot FILE.dot, or `lathe dot GRAPH -o " .. path .. "` (or `:save x.lathe` then `lathe dot x.lathe -o " .. path .. "`)")
  end
  level = level or "tensor"
  local note = ""
  if level == "kernel" then
    cmd._dot(current_graph(), path, level, need_program())
    note = (stale_note(p) or "") .. (stale_note(p) and "\n" or "")
  else cmd._dot(current_graph(), path, level) end
  return note .. "wrote " .. path .. " (" .. level .. " level); for SVG/PNG: `lathe dot FILE -o OUT.svg`, or `dot -Tsvg " .. path .. "`"
end

function cmd.gui(file)
  local target = file or cmd.state.graph_path
  local hint = target and target ~= "" and target or "FILE"
  return "The desktop app cannot be started from inside the REPL (it needs its own process and window).\n" ..
         "Run it from a shell:  lathe gui " .. hint .. "\n" ..
         "To take the current graph along: :save work.lathe, then `lathe gui work.lathe`;" ..
         " :save work.lathe-session keeps the whole session for `lathe repl work.lathe-session`."
end
)LUA";

}  // namespace lathe::script
