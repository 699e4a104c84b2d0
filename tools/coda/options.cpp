#include "options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace coda::cli {

OptionParser::OptionParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

OptionParser& OptionParser::text(const std::string& name, std::string* out, const std::string& value_name,
                                 const std::string& help, std::vector<std::string> allowed) {
  Option o{name, value_name, help, allowed, nullptr};
  o.take = [out, allowed](const std::string& value, std::string& why) {
    if (!allowed.empty()) {
      bool known = false;
      for (const std::string& a : allowed) known = known || a == value;
      if (!known) {
        why = "must be one of:";
        for (const std::string& a : allowed) why += " " + a;
        return false;
      }
    }
    *out = value;
    return true;
  };
  options_.push_back(std::move(o));
  return *this;
}

OptionParser& OptionParser::integer(const std::string& name, int* out, const std::string& help, int min, int max) {
  Option o{name, "N", help, {}, nullptr};
  o.take = [out, min, max](const std::string& value, std::string& why) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno == ERANGE || v < min || v > max) {
      why = "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
      return false;
    }
    *out = int(v);
    return true;
  };
  options_.push_back(std::move(o));
  return *this;
}

OptionParser& OptionParser::number(const std::string& name, double* out, const std::string& help, double min) {
  Option o{name, "X", help, {}, nullptr};
  o.take = [out, min](const std::string& value, std::string& why) {
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(v) || v < min) {
      why = "must be a number >= " + std::to_string(min);
      return false;
    }
    *out = v;
    return true;
  };
  options_.push_back(std::move(o));
  return *this;
}

std::optional<int> OptionParser::parse(int argc, char** argv) const {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      print_usage(stdout);
      return 0;
    }
    const Option* option = nullptr;
    for (const Option& o : options_)
      if (o.name == arg) option = &o;
    if (option == nullptr) {
      std::fprintf(stderr, "%s: %s '%s' (see --help)\n", command_.c_str(),
                   arg.starts_with("-") ? "unknown option" : "unexpected argument", argv[i]);
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: option %s needs a value (%s)\n", command_.c_str(), argv[i], option->value_name.c_str());
      return 2;
    }
    std::string why;
    if (!option->take(argv[i + 1], why)) {
      std::fprintf(stderr, "%s: option %s: '%s' %s\n", command_.c_str(), argv[i], argv[i + 1], why.c_str());
      return 2;
    }
    ++i;
  }
  return std::nullopt;
}

void OptionParser::print_usage(std::FILE* out) const {
  std::fprintf(out, "usage: %s%s\n\n%s\n", command_.c_str(), options_.empty() ? "" : " [options]", summary_.c_str());
  if (options_.empty()) return;
  std::fprintf(out, "\noptions:\n");
  for (const Option& o : options_) {
    const std::string left = o.name + " " + o.value_name;
    std::fprintf(out, "  %-22s %s", left.c_str(), o.help.c_str());
    if (!o.allowed.empty()) {
      std::fprintf(out, " (");
      for (std::size_t k = 0; k < o.allowed.size(); ++k) std::fprintf(out, "%s%s", k ? ", " : "", o.allowed[k].c_str());
      std::fprintf(out, ")");
    }
    std::fprintf(out, "\n");
  }
}

}  // namespace coda::cli
