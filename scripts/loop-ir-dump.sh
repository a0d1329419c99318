#!/bin/bash
# loop-ir-dump.sh LATHE OUTDIR — the loop IR (`lathe kernels --tuned none`) of the models in
# /work/models (small, full, QDQ with the int8 variants), the bench samples and
# scripts/loop-ir-shapes.lua (also under the matmul lowering's A/B switches), and the c and
# cuda sources of two of them, one file each. For refactors that must not change the
# emitted code: dump with the old and the new binary and `diff -r` the two folders (the
# matmul lowering's split was checked this way). Copy the old binary aside first.
# MODELS=DIR overrides /work/models. Not a timing run (no lock needed); ~5 min on 2 cores.
set -u
L=$1; O=$2; M=${MODELS:-/work/models}; S=$(cd "$(dirname "$0")" && pwd)/loop-ir-shapes.lua
mkdir -p "$O"
K() { local name=$1; shift; "$L" kernels --tuned none "$@" > "$O/$name.txt" 2>&1; echo "rc=$?" >> "$O/$name.txt"; }
for m in bert_base gpt2_small lstm mobilenet_v2 resnet50 unet_small; do
  [ -f "$M/small/$m/model.onnx" ] && K small_$m "$M/small/$m/model.onnx"
  [ -f "$M/full/$m/model.onnx" ] && K full_$m "$M/full/$m/model.onnx"
done
for m in resnet50_qdq bert_base_qdq; do
  [ -f "$M/qdq/$m/model.onnx" ] || continue
  K qdq_$m "$M/qdq/$m/model.onnx"
  LATHE_QDQ_SAT16=1 K qdq16_$m "$M/qdq/$m/model.onnx"
  LATHE_INT8_DOT=vnni K qdqvnni_$m "$M/qdq/$m/model.onnx"
done
for s in conv2d matmul matmul-int8 mlp gpt2-block attention-long 02-convnet 01-mlp 05-attention; do K sample_$s --sample $s; done
K shapes "$S"
for e in LATHE_CONV_IN_PLACE=0 LATHE_CONV_IN_PLACE=guarded LATHE_MATMUL_SHARED_PACK=0 LATHE_MATMUL_B_IN_PLACE=0 \
         LATHE_MATMUL_TILE_SUMS=0 LATHE_MATMUL_RAGGED_ROWS=0 LATHE_MATMUL_TILE=8x32x16 LATHE_MATMUL_FIT_ROWS=0; do
  env $e "$L" kernels --tuned none "$S" > "$O/shapes_$e.txt" 2>&1
  for m in unet_small resnet50; do
    [ -f "$M/full/$m/model.onnx" ] && env $e "$L" kernels --tuned none "$M/full/$m/model.onnx" > "$O/${m}_$e.txt" 2>&1
  done
done
K c_shapes --backend c --show source "$S"
K cuda_shapes --backend cuda --show source "$S"
[ -f "$M/small/resnet50/model.onnx" ] && K c_resnet --backend c --show source "$M/small/resnet50/model.onnx"
[ -f "$M/small/unet_small/model.onnx" ] && K cuda_unet --backend cuda --show source "$M/small/unet_small/model.onnx"
exit 0
