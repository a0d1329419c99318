// loop_print.h — the text form of loop IR (`lathe kernels --show loop`, p:loop(i)).
#pragma once
#include <string>

#include "core/loop/loop_ir.h"

namespace lathe::loop {

std::string print_expr(const ExprRef& e, const LoopFunc* f = nullptr);
std::string print_loop(const LoopFunc& f);

}  // namespace lathe::loop
