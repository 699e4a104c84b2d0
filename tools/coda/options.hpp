// The coda command's option parser: each subcommand names its options and the rule of each value,
// and parse() takes the command line strictly, before anything looks for a GPU: an unknown option,
// a missing or malformed value, a value outside its set or range, or an argument nobody asked for
// is an error (on stderr, exit code 2) that names it. `--help` prints the subcommand's usage.
//
//   std::string json = "bench_ops.json";
//   OptionParser options("coda bench ops", "each fused op against its GEMM, cuBLAS and PyTorch");
//   options.text("--json", &json, "PATH", "where the results are written");
//   if (const auto exit = options.parse(argc, argv)) return *exit;
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace coda::cli {

class OptionParser {
 public:
  OptionParser(std::string command, std::string summary);

  /// A string value, one of `allowed` when it is not empty.
  OptionParser& text(const std::string& name, std::string* out, const std::string& value_name, const std::string& help,
                     std::vector<std::string> allowed = {});
  /// An integer in [min, max].
  OptionParser& integer(const std::string& name, int* out, const std::string& help, int min, int max);
  /// A finite number >= min.
  OptionParser& number(const std::string& name, double* out, const std::string& help, double min);

  /// Parse argv[1..argc) (argv[0] is the subcommand's name). Returns the exit code when the command
  /// should stop now (0 after --help, 2 after an error, both printed), nothing when it goes on.
  std::optional<int> parse(int argc, char** argv) const;

  void print_usage(std::FILE* out) const;

 private:
  struct Option {
    std::string name, value_name, help;
    std::vector<std::string> allowed;
    std::function<bool(const std::string& value, std::string& why)> take;  // false: `why` says what is wrong
  };
  std::string command_, summary_;
  std::vector<Option> options_;
};

}  // namespace coda::cli
