-- qdq-sat16.lua — after `qdq`: the int8 sums of u8 × i8 over one axis (MatMul, Gemm, 1×1 Conv) as
-- ONNX Runtime computes them on x86 without VNNI (MLAS's AVX2 U8S8 kernels, vpmaddubsw): each pair
-- of neighbouring k summed in an i16 that saturates, Σ_j sat16(a_2j·w_2j + a_2j+1·w_2j+1).
-- Off by default; LATHE_QDQ_SAT16=1 applies it at load, after `qdq` (in a script:
-- lathe.rewrite(lathe.rewrite(g, lathe.rules.builtin('qdq')), lathe.rules.builtin('qdq-sat16'))). The saturating sums run as plain reductions (no int8 GEMM kernel for them).
return lathe.rules.native("qdq-sat16")
