// commands.h — the command layer shared by the REPL and (later) the GUI console: one Lua
// engine plus the workbench state it holds as Lua globals (`g` the graph, `s` the rewrite
// session, `rules`, `p` the compiled program), colon commands (`:load FILE`, `:step 3`,
// …) and evaluation of Lua input with pretty-printed results.
//
// Colon commands are written in Lua (lathe.cmd.NAME, commands_lua.cpp), so every one is
// also callable from Lua: `:step 3` is `lathe.cmd.step("3")`. Errors come back as one
// located message; the state stays as it was before the failing command.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "scripting/engine.h"
#include "scripting/pretty.h"

namespace lathe {
class Executable;
}

namespace lathe::script {

class Workbench {
 public:
  explicit Workbench(Limits limits = {});
  Engine& engine() { return engine_; }

  struct Result {
    bool ok = true;
    bool quit = false;        // :quit
    bool incomplete = false;  // Lua input ends mid-statement: read another line
    std::string output;       // what to print (already formatted; ends without newline)
    std::string error;        // the located message when !ok
  };
  // One chunk of user input: a colon command or Lua (an expression's values are printed).
  Result execute(const std::string& input);
  // Runs a colon command given its words (name without ':').
  Result command(const std::vector<std::string>& words);
  // `:help [topic]`: "" the commands, "lua" every Lua function, else one function or command.
  Result help(const std::string& topic);
  // Lua source only; `chunkname` as in Engine::load ("=stdin").
  Result eval_lua(const std::string& code, const std::string& chunkname = "=stdin");

  const std::string& last_traceback() const { return last_traceback_; }
  // Pretty-prints the value at stack index idx (graph summary, tensor, step line, table).
  std::string describe(int idx, int depth = 0);
  // Names of colon commands and the one-line help of each.
  static const std::vector<std::pair<std::string, std::string>>& command_help();
  // Completion candidates for `text` (the word before the cursor: "lathe.in", "s:st").
  std::vector<std::string> complete(const std::string& text);
  // Completion of `word` (which starts at `word_start` in `line`): a colon command's name
  // (":lo" → ":load"), help topics after :help, files after :load / :open / :rules / :save /
  // :trace / :dot (and built-in rule sets after :rules), else complete(word).
  std::vector<std::string> complete_line(const std::string& line, int word_start, const std::string& word);

  Colors colors;

 private:
  Engine engine_;
  std::string last_traceback_;
};

// The Executable behind a lathe.Program value at idx (raises a located error otherwise).
std::shared_ptr<Executable> check_program_exe(lua_State* L, int idx);

// Every name `:help` / `lathe help` opens (topics, listed names, :commands, guides), sorted:
// for completion and for the test that each one opens.
std::vector<std::string> help_topic_names();

// Splits a command line into words; "double quotes" group, backslash escapes.
std::vector<std::string> split_words(const std::string& line);

}  // namespace lathe::script
