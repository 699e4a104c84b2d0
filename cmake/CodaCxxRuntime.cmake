# The C++ runtime, linked shared. A library that carries its own static copy of libstdc++ exports
# that copy's symbols, and loaded into a process with another copy (a Python process that imported
# torch) the two interpose: coda's calls then ran on the other copy's data and crashed.
#
# A GCC linking `-lstdc++` finds libstdc++.a instead of libstdc++.so when its library search path
# holds the archive alone: a toolchain packaged without the shared library (such as a wrapper
# around g++ whose -B directories carry libstdc++.a), which then links every program statically
# without a word. With such a compiler, link the system's libstdc++.so.6 by its path ahead of the
# compiler's own `-lstdc++`: every symbol resolves there, and the archive contributes nothing.
#
# CODA_CXX_RUNTIME names what is linked (empty: the compiler links the shared runtime itself).
function(coda_find_shared_cxx_runtime)
  set(CODA_CXX_RUNTIME "" PARENT_SCOPE)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE found OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(IS_ABSOLUTE "${found}" AND EXISTS "${found}")
    return()
  endif()
  find_library(CODA_LIBSTDCXX_SHARED NAMES libstdc++.so.6
               PATHS ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES} /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu
                     /usr/lib64 /usr/lib NO_DEFAULT_PATH)
  if(NOT CODA_LIBSTDCXX_SHARED)
    message(FATAL_ERROR "${CMAKE_CXX_COMPILER} links the C++ runtime statically (it finds no libstdc++.so), and no "
                        "libstdc++.so.6 was found to link instead: libcoda would carry a private copy of the runtime "
                        "and crash inside processes that have their own (Python with torch). Use a compiler that "
                        "finds libstdc++.so, or set CODA_LIBSTDCXX_SHARED to the path of libstdc++.so.6.")
  endif()
  message(STATUS "coda: ${CMAKE_CXX_COMPILER} finds no libstdc++.so (it would link the C++ runtime statically); "
                 "linking ${CODA_LIBSTDCXX_SHARED} instead")
  set(CODA_CXX_RUNTIME "${CODA_LIBSTDCXX_SHARED}" PARENT_SCOPE)
endfunction()
