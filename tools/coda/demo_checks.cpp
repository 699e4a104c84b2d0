// The check table both demo paths print.
#include <algorithm>
#include <cstdio>
#include <string_view>

#include "demo.hpp"

namespace coda::cli {

void CheckTable::add(std::string kernel, std::string check, double error, double limit, std::string note) {
  rows_.push_back({std::move(kernel), std::move(check), error, limit, std::move(note)});
}

int CheckTable::failures() const {
  return int(std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return !r.passed(); }));
}

void CheckTable::print() const {
  int kernel_width = int(std::string_view("kernel").size()), check_width = int(std::string_view("check").size());
  for (const Row& r : rows_) {
    kernel_width = std::max(kernel_width, int(r.kernel.size()));
    check_width = std::max(check_width, int(r.check.size()));
  }
  // The result column is padded only when a note follows it, so no line ends in spaces.
  const auto print_row = [&](const char* kernel, const char* check, const char* error, const char* limit,
                             const char* result, const std::string& note) {
    std::printf("%-*s  %-*s  %8s  %7s  %-*s%s%s\n", kernel_width, kernel, check_width, check, error, limit,
                note.empty() ? 0 : 6, result, note.empty() ? "" : "  ", note.c_str());
  };
  print_row("kernel", "check", "error", "limit", "result", note_heading_);
  for (const Row& r : rows_) {
    char error[32], limit[32];
    std::snprintf(error, sizeof(error), "%.1e", r.error);
    std::snprintf(limit, sizeof(limit), "%.0e", r.limit);
    print_row(r.kernel.c_str(), r.check.c_str(), error, limit, r.passed() ? "pass" : "FAIL", r.note);
  }
}

}  // namespace coda::cli
