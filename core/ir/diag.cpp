// diag.cpp — formatting of diagnostics.
#include "core/ir/diag.h"

#include <sstream>

namespace lathe {

std::string Diagnostic::format() const {
  std::ostringstream os;
  if (!file.empty()) {
    os << file;
    if (line > 0) os << ':' << line;
    if (line > 0 && col > 0) os << ':' << col;
    os << ": ";
  }
  os << "error: ";
  if (node >= 0) os << "node %" << node << ": ";
  os << message;
  if (!source_line.empty()) {
    os << "\n  " << source_line << "\n  ";
    for (int i = 1; i < col; ++i) os << (source_line.size() >= (size_t)i && source_line[i - 1] == '\t' ? '\t' : ' ');
    os << '^';
  }
  if (!note.empty()) os << "\n  note: " << note;
  return os.str();
}

void internal_fail(const char* file, int line, const char* cond, const std::string& msg) {
  std::ostringstream os;
  os << "internal error at " << file << ':' << line << ": " << msg << " (check failed: " << cond << ')';
  throw InternalError(os.str());
}

}  // namespace lathe
