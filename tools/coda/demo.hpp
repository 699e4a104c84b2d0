// coda demo's parts: a table of named checks, and the sections that fill it (one per fused
// kernel), for the GPU suite and for the CPU path.
//
//   CheckTable table;
//   SectionChecks swiglu(table, "SwiGLU");
//   swiglu.add("interleaved weight == silu(gate) * up", error, /*limit=*/1e-12);
//   table.print();                       // kernel | check | error | limit | result [| note]
//   return table.failures() == 0 ? 0 : 1;
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace coda::cli {

/// Checks with a measured error and the limit it must stay under; NaN always fails.
class CheckTable {
 public:
  /// `note_heading` titles a last, free-text column (the GPU suite puts its timings there).
  explicit CheckTable(std::string note_heading = "") : note_heading_(std::move(note_heading)) {}

  void add(std::string kernel, std::string check, double error, double limit, std::string note);
  void print() const;
  int size() const { return int(rows_.size()); }
  int failures() const;

 private:
  struct Row {
    std::string kernel, check;
    double error, limit;
    std::string note;
    bool passed() const { return error <= limit; }
  };
  std::string note_heading_;
  std::vector<Row> rows_;
};

/// The table as one section sees it: its rows carry the section's kernel name.
class SectionChecks {
 public:
  SectionChecks(CheckTable& table, std::string kernel) : table_(table), kernel_(std::move(kernel)) {}
  void add(std::string check, double error, double limit, std::string note = "") {
    table_.add(kernel_, std::move(check), error, limit, std::move(note));
  }

 private:
  CheckTable& table_;
  std::string kernel_;
};

/// One fused kernel's part of the demo: it runs its computations and adds its checks.
struct DemoSection {
  const char* kernel;
  void (*run)(SectionChecks& checks);
};

/// The CPU path: each fused kernel's epilogue program on the CPU executor, checked against the fp64
/// reference, then the reference's own identities; in print order.
const std::vector<DemoSection>& cpu_sections();

/// The GPU suite (needs a Hopper GPU): the GEMM and the fused ops, verified against the fp64
/// reference, timed against cuBLAS. Its table's note column holds the timings, titled by gpu_note_heading().
const std::vector<DemoSection>& gpu_sections();
std::string gpu_note_heading();

}  // namespace coda::cli
