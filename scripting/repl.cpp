// repl.cpp — the terminal REPL over the Workbench: libedit line editing with history kept
// in $XDG_STATE_HOME/lathe/history (default ~/.local/state/lathe/history), Ctrl-R search
// (libedit's), tab completion of globals, fields and methods, :commands, help topics after
// :help and paths after :load / :open / :rules / :save, continuation lines for
// incomplete chunks, Ctrl-C to interrupt a running chunk (at the prompt: drop the line).
// When stdin is not a terminal it reads lines without prompts, colour or history, so
// piped transcripts are stable.
#include "scripting/repl.h"

#include <editline/readline.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

namespace lathe::script {

namespace {

Workbench* g_bench = nullptr;
std::vector<std::string> g_matches;

int g_word_start = 0;  // where the word being completed starts in rl_line_buffer

char* completion_generator(const char* text, int state) {
  if (state == 0)  // colon commands, help topics and paths by the line; Lua names otherwise
    g_matches = g_bench ? g_bench->complete_line(rl_line_buffer ? rl_line_buffer : "", g_word_start, text)
                        : std::vector<std::string>{};
  if (state == 0)  // a folder completes without the space, so its files can follow
    rl_completion_append_character = g_matches.size() == 1 && !g_matches[0].empty() && g_matches[0].back() == '/' ? '\0' : ' ';
  if (state < (int)g_matches.size()) return strdup(g_matches[state].c_str());
  return nullptr;
}

char** attempted_completion(const char* text, int start, int) {
  rl_attempted_completion_over = 1;  // no readline filename completion (complete_line does paths)
  g_word_start = start;
  return rl_completion_matches(text, completion_generator);
}

// Ctrl-C at the prompt: drop the line being typed and prompt again (as Python and lua
// do), instead of SIGINT's default of ending the process and losing g, s and p. The
// handler is installed only while readline waits; a running chunk has its own
// (install_interrupt_handler).
volatile std::sig_atomic_t g_prompt_sigint = 0;
struct sigaction g_prev_prompt_sigint;
void on_prompt_sigint(int) { g_prompt_sigint = 1; }
void catch_prompt_sigint(bool on) {
  if (on) {
    struct sigaction sa {};
    sa.sa_handler = on_prompt_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: the terminal read returns, and readline with it
    sigaction(SIGINT, &sa, &g_prev_prompt_sigint);
  } else {
    sigaction(SIGINT, &g_prev_prompt_sigint, nullptr);
  }
}

std::string history_path() {
  namespace fs = std::filesystem;
  fs::path dir;
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) dir = fs::path(x) / "lathe";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = fs::path(h) / ".local" / "state" / "lathe";
  else return "";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "";
  return (dir / "history").string();
}

void print_result(const Workbench::Result& r, const Colors& c) {
  if (!r.ok) {
    std::fflush(stdout);
    std::fprintf(stdout, "%s%s%s\n", c.red(), r.error.c_str(), c.reset());
  } else if (!r.output.empty()) {
    std::fprintf(stdout, "%s\n", r.output.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int run_repl(Workbench& bench, const ReplOptions& opts) {
  bool interactive = opts.force_interactive || (isatty(0) && isatty(1));
  bench.colors.on = interactive && !std::getenv("NO_COLOR");
  std::string hist;
  if (interactive) {
    g_bench = &bench;
    rl_readline_name = const_cast<char*>("lathe");
    rl_attempted_completion_function = attempted_completion;
    rl_basic_word_break_characters = const_cast<char*>(" \t\n\"'`@$><=;|&{(,+-*/%^~#[]");
    hist = history_path();
    if (!hist.empty()) read_history(hist.c_str());
    std::printf("Lathe %s REPL — :help for commands, Lua for everything else, Ctrl-D to leave\n",
                "0.1");
  }
  std::string chunk;
  int status = 0;
  for (;;) {
    std::string line;
    if (interactive) {
      const char* prompt = chunk.empty() ? "lathe> " : "   ... ";
      g_prompt_sigint = 0;
      catch_prompt_sigint(true);
      char* raw = readline(prompt);
      catch_prompt_sigint(false);
      if (g_prompt_sigint) {  // Ctrl-C: the line (and an unfinished chunk) is dropped
        std::free(raw);
        std::printf("^C\n");
        std::fflush(stdout);
        chunk.clear();
        continue;
      }
      if (!raw) { std::printf("\n"); break; }
      line = raw;
      std::free(raw);
    } else {
      if (!std::getline(std::cin, line)) break;
    }
    chunk += chunk.empty() ? line : "\n" + line;
    install_interrupt_handler();
    Engine::clear_interrupt();
    Workbench::Result r = bench.execute(chunk);
    remove_interrupt_handler();
    if (r.incomplete) continue;
    if (interactive && !chunk.empty()) {
      add_history(chunk.c_str());
      if (!hist.empty()) write_history(hist.c_str());
    }
    chunk.clear();
    print_result(r, bench.colors);
    if (!r.ok) status = 1;
    if (r.quit) break;
  }
  if (!chunk.empty()) {  // input ended inside an unfinished chunk
    Workbench::Result r = bench.execute(chunk + "\n");
    if (r.incomplete) {
      std::printf("stdin: unfinished chunk at end of input\n");
      status = 1;
    } else {
      print_result(r, bench.colors);
    }
  }
  if (interactive && !hist.empty()) {
    stifle_history(2000);
    write_history(hist.c_str());
  }
  g_bench = nullptr;
  return opts.exit_status_on_error ? status : 0;
}

}  // namespace lathe::script
