# coda_target_cuda_options(<target>): what nvcc needs to compile coda's kernels into <target>:
# C++20, sm_90a machine code (wgmma and setmaxnreg exist on the "a" target only) and constexpr
# functions usable in device code. coda's own targets use it; an installed coda brings it with
# find_package(coda), for projects that write their own epilogue programs:
#
#   find_package(coda REQUIRED)
#   add_executable(my_op my_op.cu)
#   target_link_libraries(my_op PRIVATE coda::coda)
#   coda_target_cuda_options(my_op)

# CMake 3.25 predates nvcc's C++20 support; tell it the flag.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()

function(coda_target_cuda_options target)
  set(gencode "${CODA_CUDA_GENCODE}")
  if(NOT gencode)
    set(gencode "-gencode=arch=compute_90a,code=sm_90a")
  endif()
  set_target_properties(${target} PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:${gencode} --expt-relaxed-constexpr>")
endfunction()
