// The one exception type of the project. It is thrown at boundaries (config, IO, start-up) and
// carries where the problem is: a YAML file and line, a data file, a peer's endpoint.
#pragma once

#include <stdexcept>
#include <string>

namespace gossip {

class Error : public std::runtime_error {
 public:
  // `where` names the place (e.g. "configs/ring4.yaml:12 field 'topology'"), `what` the problem.
  Error(const std::string& where, const std::string& what);
  explicit Error(const std::string& what);

  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// Exit code for bad user input (config, flags), as in sysexits' spirit: 2 = usage error.
inline constexpr int kExitUsage = 2;

}  // namespace gossip

namespace gossip {

// main() of every program: runs body and turns escaping exceptions into one "error: ..." line on
// stderr, exit code kExitUsage for gossip::Error (bad input) and 1 for anything else.
int guarded_main(int argc, char** argv, int (*body)(int, char**));

}  // namespace gossip
