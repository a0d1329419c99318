// diag.h — how errors travel.
//
// User errors (a bad file, a shape mismatch, an unsupported op, a failing check) are
// thrown as UserError carrying a Diagnostic: where (file:line:col and/or node id), what
// was found and what was expected. The command layer catches them, prints
// Diagnostic::format() and keeps the REPL/app alive; the CLI exits with code 1.
// Internal bugs use LATHE_CHECK, which throws InternalError (never aborts) so that an
// interactive session survives a compiler bug too.
#pragma once
#include <stdexcept>
#include <string>

namespace lathe {

struct Diagnostic {
  std::string message;   // what went wrong and what was expected
  std::string file;      // source file, if any
  int line = 0, col = 0; // 1-based; 0 = unknown
  int node = -1;         // offending node id, if any
  std::string source_line;  // the text of the line, for the caret display
  std::string note;      // optional extra hint

  // "file:line:col: error: message\n  source\n     ^\n" (parts omitted when unknown)
  std::string format() const;
};

class UserError : public std::runtime_error {
 public:
  explicit UserError(Diagnostic d) : std::runtime_error(d.format()), diag_(std::move(d)) {}
  explicit UserError(const std::string& msg) : UserError(Diagnostic{msg}) {}
  const Diagnostic& diag() const { return diag_; }

 private:
  Diagnostic diag_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void internal_fail(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace lathe

// LATHE_CHECK(cond, msg): an internal invariant; msg says what the caller forgot.
#define LATHE_CHECK(cond, msg)                                              \
  do {                                                                      \
    if (!(cond)) ::lathe::internal_fail(__FILE__, __LINE__, #cond, (msg));  \
  } while (0)
