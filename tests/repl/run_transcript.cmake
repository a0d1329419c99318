# run_transcript.cmake — pipes IN to `lathe repl [FILE]` (no TTY: no prompts, no colour)
# and compares stdout+stderr with EXPECTED. On a mismatch it prints both and fails.
#   cmake -DLATHE=… -DIN=….in -DEXPECTED=….out [-DFILE=graph] -DWORKDIR=… [-DSCRATCH=dir] -P run_transcript.cmake
# With SCRATCH, the fixtures of WORKDIR (*.lua, *.lathe, *.lathe-session) are copied there
# and the REPL runs in it, so files a transcript writes (:save, :trace, :dot) stay out of
# the source tree.
set(args repl)
if(FILE)
  separate_arguments(file_args UNIX_COMMAND "${FILE}")
  list(APPEND args ${file_args})
endif()
set(dir ${WORKDIR})
if(SCRATCH)
  file(REMOVE_RECURSE ${SCRATCH})
  file(MAKE_DIRECTORY ${SCRATCH})
  file(GLOB fixtures ${WORKDIR}/*.lua ${WORKDIR}/*.lathe ${WORKDIR}/*.lathe-session)
  file(COPY ${fixtures} DESTINATION ${SCRATCH})
  set(dir ${SCRATCH})
endif()
execute_process(COMMAND ${LATHE} ${args}
  INPUT_FILE ${IN}
  OUTPUT_VARIABLE out ERROR_VARIABLE out
  RESULT_VARIABLE rc
  WORKING_DIRECTORY ${dir}
  TIMEOUT 120)
file(READ ${EXPECTED} want)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lathe repl exited with ${rc}\n${out}")
endif()
if(NOT out STREQUAL want)
  get_filename_component(name ${IN} NAME_WE)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${name}.actual ${out})
  message(FATAL_ERROR "transcript differs from ${EXPECTED}\n--- got ---\n${out}\n--- want ---\n${want}")
endif()
