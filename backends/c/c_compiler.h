// c_compiler.h — compiling C source into a loaded shared object, through the kernel cache.
//
// compile_c_shared() hashes (source, compiler identity, flags, CPU model); on a cache hit it
// dlopens the cached .so (a corrupt or unloadable entry is deleted and rebuilt); otherwise
// it runs `$CC <flags> -shared -o tmp.so src.c`, renames the result into the cache and
// loads it. Errors (no compiler, compile failure with the compiler's first lines, dlopen
// failure) are UserErrors.
#pragma once
#include <memory>
#include <string>

namespace lathe {

struct SharedObject {
  void* handle = nullptr;
  std::string path;
  ~SharedObject();
  void* symbol(const std::string& name) const;  // UserError when missing
};

struct CCompileResult {
  std::shared_ptr<SharedObject> so;
  bool from_cache = false;
  double ms = 0;
  std::string command;
};

std::string c_compiler();          // $CC or "cc"
std::string c_compiler_identity(); // first line of `cc --version`; UserError when missing
std::string c_default_flags();     // "-O3 -march=native -fPIC -shared -fopenmp …"

CCompileResult compile_c_shared(const std::string& source, const std::string& extra_flags, bool use_cache);
// `cc -S` of the source with the same flags; the assembly text (UserError on failure).
std::string compile_c_asm(const std::string& source, const std::string& extra_flags);

}  // namespace lathe
