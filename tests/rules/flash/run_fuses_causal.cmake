# `lathe run` fuses an imported model's attention when it is causal (app/load_model.h,
# LATHE_FLASH_ATTENTION=causal by default): the small GPT-2 export (causal Where mask) runs
# with fewer kernels than with LATHE_FLASH_ATTENTION=0 (`lathe kernels` lists the same kernels,
# the two fused attention kernels among them) and still matches PyTorch on llvm and c
# (`lathe bench --models`: error <= 1e-3); the small BERT (padding mask, not causal) keeps
# its kernels. usage: cmake -DLATHE=... -DMODELS=... -P run_fuses_causal.cmake
function(kernels_of model flash out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LATHE_FLASH_ATTENTION=${flash} ${LATHE} run ${MODELS}/${model}/model.onnx --stats
                  OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "lathe run ${model} (LATHE_FLASH_ATTENTION=${flash}) exited ${rc}: ${e}")
  endif()
  if(NOT o MATCHES "\"kernels\":([0-9]+)")
    message(FATAL_ERROR "no kernel count in the stats of ${model}: ${o}")
  endif()
  set(ran ${CMAKE_MATCH_1})
  # `lathe kernels` loads the model as `lathe run` does (app/load_model.h): the same kernels
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LATHE_FLASH_ATTENTION=${flash} ${LATHE} kernels ${MODELS}/${model}/model.onnx --show none
                  OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT o MATCHES "^# ([0-9]+) kernels")
    message(FATAL_ERROR "lathe kernels ${model} (LATHE_FLASH_ATTENTION=${flash}) exited ${rc}: ${o}${e}")
  endif()
  if(NOT CMAKE_MATCH_1 EQUAL ran)
    message(FATAL_ERROR "${model} (LATHE_FLASH_ATTENTION=${flash}): lathe kernels lists ${CMAKE_MATCH_1} kernels, lathe run ran ${ran}")
  endif()
  string(REGEX MATCHALL "\\(attention, " att "${o}")
  list(LENGTH att n_att)
  set(${out} ${ran} PARENT_SCOPE)
  set(${out}_attention ${n_att} PARENT_SCOPE)
endfunction()

kernels_of(gpt2_small 0 g_off)
kernels_of(gpt2_small causal g_on)
if(NOT g_on LESS g_off)
  message(FATAL_ERROR "gpt2_small: ${g_on} kernels fused vs ${g_off} unfused: the causal attention was not fused")
endif()
if(NOT g_on_attention EQUAL 2 OR NOT g_off_attention EQUAL 0)
  message(FATAL_ERROR "gpt2_small: lathe kernels lists ${g_on_attention} attention kernels fused, ${g_off_attention} unfused (want 2, 0)")
endif()
kernels_of(bert_base 0 b_off)
kernels_of(bert_base causal b_on)
if(NOT b_on EQUAL b_off)
  message(FATAL_ERROR "bert_base: ${b_on} kernels by default vs ${b_off} unfused: a padding mask must stay unfused")
endif()
foreach(backend llvm c)
  execute_process(COMMAND ${LATHE} bench --models ${MODELS} --only gpt2_small --backend ${backend} --iters 1
                  OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR o MATCHES "WRONG" OR NOT o MATCHES "gpt2_small +${backend}")
    message(FATAL_ERROR "gpt2_small on ${backend} with its attention fused: exit ${rc}\n${o}\n${e}")
  endif()
endforeach()
message("ok: gpt2_small ${g_off} -> ${g_on} kernels, bert_base ${b_on}")
