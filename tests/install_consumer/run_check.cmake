# The find_package(coda) check, run by CTest as `cmake -P`: install the built project into a scratch
# prefix, configure and build the consumer project against it, and run the consumer.
#   -DCODA_BUILD_DIR=<coda's build>  -DSCRATCH_DIR=<empty-able folder>  -DGENERATOR=<generator>
#   -DCXX_COMPILER=<the compiler coda was built with>  -DEXPECTED_VERSION=<coda's version>
cmake_minimum_required(VERSION 3.25)
set(prefix "${SCRATCH_DIR}/prefix")
set(consumer_build "${SCRATCH_DIR}/consumer")
file(REMOVE_RECURSE "${SCRATCH_DIR}")

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${output}")
  endif()
  set(output "${output}" PARENT_SCOPE)
endfunction()

run("install" "${CMAKE_COMMAND}" --install "${CODA_BUILD_DIR}" --prefix "${prefix}")
run("consumer configure" "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}")
run("consumer build" "${CMAKE_COMMAND}" --build "${consumer_build}")
run("consumer run" "${consumer_build}/consumer")
if(NOT output STREQUAL "coda ${EXPECTED_VERSION}, bf16\n")
  message(FATAL_ERROR "the consumer printed '${output}', expected 'coda ${EXPECTED_VERSION}, bf16'")
endif()
message(STATUS "find_package(coda) from ${prefix}: ${output}")
