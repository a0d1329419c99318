# check_op_report.cmake — `lathe test-backend --backend BACKEND --report OUT` must reproduce
# the checked-in docs/ops-BACKEND.md (the op support table stays current), and for the CPU
# backends (NO_FAILED_ROWS) no op row may be ❌ (every dtype failing).
#   cmake -DLATHE=… -DBACKEND=c -DREPORT=docs/ops-c.md -DOUT=build/ops-c.md [-DNO_FAILED_ROWS=1] -P check_op_report.cmake
execute_process(COMMAND ${LATHE} test-backend --backend ${BACKEND} --report ${OUT}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lathe test-backend --backend ${BACKEND} failed (${rc}): ${err}")
endif()
message("${err}")
file(READ ${OUT} got)
file(READ ${REPORT} want)
if(NOT got STREQUAL want)
  execute_process(COMMAND diff -u ${REPORT} ${OUT})
  message(FATAL_ERROR "${REPORT} is not current: regenerate it with\n  lathe test-backend --backend ${BACKEND} --report ${REPORT}")
endif()
if(NO_FAILED_ROWS)
  string(REGEX MATCHALL "\n\\| [^|\n]+ \\| [^|\n]* \\| ❌ \\|[^\n]*" failed "${got}")
  if(failed)
    message(FATAL_ERROR "backend ${BACKEND} fails every dtype of:${failed}")
  endif()
endif()
