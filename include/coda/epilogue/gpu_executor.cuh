// coda/epilogue/gpu_executor.cuh: the GPU executor of epilogue programs: an Epilogue for the
// mainloop's seam (mainloop/epilogue_seam.cuh) that runs a program on each consumer warpgroup's part
// of a tile, straight on the accumulator registers.
//
//   // bf16 operands (and tile inputs), e4m3 tile outputs:
//   using Epilogue = coda::epilogue::ProgramEpilogue<MyProgram, /*staging buffers=*/2, DType::bf16, DType::e4m3>;
//   gemm_kernel<Config, Element, Major::k, Major::k, Epilogue><<<...>>>(params);  // params.epilogue: MyProgram
//
// Split by primitive class, as program.hpp lists them:
//   gpu/tile.cuh              the Tile a program sees (GpuTile): the part and the maps
//   gpu/loads.cuh             tile, vector and table loads (a staged input from shared memory)
//   gpu/stores.cuh            tile stores through staging buffers and TMA
//   gpu/reductions.cuh        row, column and whole-part reductions (and stateful transforms)
//   gpu/program_epilogue.cuh  ProgramEpilogue: the seam, the staged input's buffer, edge parts
#pragma once

#include "coda/epilogue/gpu/loads.cuh"
#include "coda/epilogue/gpu/program_epilogue.cuh"
#include "coda/epilogue/gpu/reductions.cuh"
#include "coda/epilogue/gpu/stores.cuh"
#include "coda/epilogue/gpu/tile.cuh"
