# One run of the coda command, checked: its exit code and what it printed. Run by CTest as `cmake -P`:
#   -DCOMMAND=<coda> -DARGS=<arguments, |-separated> -DEXIT=<expected code>
#   [-DSTDOUT=<regex stdout must match>] [-DSTDERR=<regex stderr must match>]
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" ARGS "${ARGS}")
execute_process(COMMAND ${COMMAND} ${ARGS} RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(shown "coda ${ARGS}: exit ${code}\n--- stdout:\n${out}--- stderr:\n${err}")
if(NOT code STREQUAL EXIT)
  message(FATAL_ERROR "expected exit code ${EXIT}\n${shown}")
endif()
if(DEFINED STDOUT AND NOT out MATCHES "${STDOUT}")
  message(FATAL_ERROR "stdout does not match '${STDOUT}'\n${shown}")
endif()
if(DEFINED STDERR AND NOT err MATCHES "${STDERR}")
  message(FATAL_ERROR "stderr does not match '${STDERR}'\n${shown}")
endif()
if(NOT EXIT STREQUAL "0" AND NOT out STREQUAL "")
  message(FATAL_ERROR "a refused command printed to stdout (errors go to stderr)\n${shown}")
endif()
