# The find_package(coda) check, run by CTest as `cmake -P`: install the built project into a scratch
# prefix, run the installed `coda info` (it must find libcoda from there: the install RPATH), then
# configure, build and run the consumer project against the prefix.
#   -DCODA_BUILD_DIR=<coda's build>  -DSCRATCH_DIR=<empty-able folder>  -DGENERATOR=<generator>
#   -DCXX_COMPILER=<the compiler coda was built with>  -DCUDA_COMPILER=<nvcc>  -DEXPECTED_VERSION=<coda's version>
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
run("the installed coda info" "${prefix}/bin/coda" info)
if(NOT output MATCHES "^coda ${EXPECTED_VERSION} ")
  message(FATAL_ERROR "the installed coda info printed '${output}'")
endif()
run("consumer configure" "${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}"
    "-DCMAKE_CUDA_HOST_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}")
run("consumer build" "${CMAKE_COMMAND}" --build "${consumer_build}")
run("consumer run" "${consumer_build}/consumer")
if(NOT output MATCHES "^coda ${EXPECTED_VERSION}, bf16\nScaledSquare on the CPU executor: largest difference 0\n")
  message(FATAL_ERROR "the consumer printed '${output}'")
endif()
message(STATUS "find_package(coda) from ${prefix}: ${output}")
