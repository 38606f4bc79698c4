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
