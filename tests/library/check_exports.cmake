# libcoda exports its API only and links the C++ runtime shared (src/libcoda.map,
# cmake/CodaCxxRuntime.cmake). Run by CTest as `cmake -P`:
#   -DLIBRARY=<libcoda.so> -DNM=<nm> -DREADELF=<readelf>
cmake_minimum_required(VERSION 3.25)

function(run out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE error)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${result}): ${error}")
  endif()
  set(${out} "${output}" PARENT_SCOPE)
endfunction()

# The C++ runtime is a shared library the process shares, not a private static copy.
run(dynamic ${READELF} -d ${LIBRARY})
if(NOT dynamic MATCHES "NEEDED[^\n]*libstdc\\+\\+\\.so")
  message(FATAL_ERROR "libcoda does not link libstdc++.so (a static C++ runtime?):\n${dynamic}")
endif()

# Every exported symbol is coda's: the C ABI (coda_*) or the C++ API (coda::, its typeinfo and
# vtables). Nothing of std:: or of the C++ runtime.
run(symbols ${NM} -D -C --defined-only ${LIBRARY})
string(REPLACE "\n" ";" lines "${symbols}")
set(foreign "")
set(count 0)
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  math(EXPR count "${count} + 1")
  string(REGEX REPLACE "^[0-9a-fA-F]+ [A-Za-z] " "" name "${line}")
  if(NOT name MATCHES "^(coda_|coda::|typeinfo for coda::|typeinfo name for coda::|vtable for coda::)")
    string(APPEND foreign "  ${name}\n")
  endif()
endforeach()
if(NOT foreign STREQUAL "")
  message(FATAL_ERROR "libcoda exports symbols that are not its API:\n${foreign}")
endif()
if(count LESS 20)
  message(FATAL_ERROR "libcoda exports only ${count} symbols: nm read nothing useful?\n${symbols}")
endif()
message(STATUS "libcoda: ${count} exported symbols, all coda's; NEEDED libstdc++.so")
