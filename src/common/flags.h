// A small declarative command-line parser shared by every program of the project, so no program
// hand-writes its own argv loop. Flags are `--name value` or `--name=value`; booleans are `--name`.
// Unknown flags, missing values and badly typed values throw gossip::Error naming the flag.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gossip {

class Flags {
 public:
  explicit Flags(std::string program) : program_(std::move(program)) {}

  // Declare before parse(). `help` is printed by usage().
  void add_string(const std::string& name, const std::string& help, std::optional<std::string> def = {});
  void add_bool(const std::string& name, const std::string& help);

  // Parses argv; positional arguments are kept in positional().
  void parse(int argc, const char* const* argv);
  // For a program that takes flags only (with a "help" bool declared): parse(), then with --help
  // prints usage() to stdout and returns false (the caller exits 0); a positional argument throws
  // gossip::Error naming it, with the usage.
  bool parse_flags_only(int argc, const char* const* argv);

  bool has(const std::string& name) const;
  std::string get_string(const std::string& name) const;  // throws if absent and no default
  int64_t get_int(const std::string& name) const;
  double get_double(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

  std::string usage() const;

 private:
  struct Spec {
    std::string help;
    bool is_bool = false;
    std::optional<std::string> def;
  };
  const Spec& spec(const std::string& name) const;

  std::string program_;
  std::map<std::string, Spec> specs_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace gossip
