// The one exception type of the project. It is thrown at boundaries (config, IO, start-up) and
// carries where the problem is: a YAML file and line, a data file, a peer's endpoint.
#pragma once

#include <stdexcept>
#include <string>

namespace gossip {

// Exit code for bad user input (config, flags), as in sysexits' spirit: 2 = usage error.
inline constexpr int kExitUsage = 2;
// Exit code of a peer cut off from its run (its side of a partition lost, or the others removed
// it while it was stalled, and no member took it back): gossip-launch counts it as failed but,
// as for a crash, lets the others go on.
inline constexpr int kExitCutOff = 75;  // sysexits EX_TEMPFAIL: try again (the run may take it back)
// Exit code of a peer whose neighbour went silent where it could not be left out (a receive or
// a view change that timed out): sysexits EX_UNAVAILABLE, not a usage error.
inline constexpr int kExitPeerLost = 69;

class Error : public std::runtime_error {
 public:
  // `where` names the place (e.g. "configs/ring4.yaml:12 field 'topology'"), `what` the problem.
  Error(const std::string& where, const std::string& what);
  explicit Error(const std::string& what);

  const std::string& where() const { return where_; }
  int exit_code() const { return exit_code_; }  // what guarded_main exits with

 protected:
  Error(const std::string& where, const std::string& what, int exit_code);

 private:
  std::string where_;
  int exit_code_ = kExitUsage;
};

// A neighbour that did not answer in time (see kExitPeerLost).
struct PeerLost : Error {
  PeerLost(const std::string& where, const std::string& what) : Error(where, what, kExitPeerLost) {}
};

}  // namespace gossip

namespace gossip {

// main() of every program: runs body and turns escaping exceptions into one "error: ..." line on
// stderr, exit code Error::exit_code() for gossip::Error (kExitUsage unless it says otherwise)
// and 1 for anything else.
int guarded_main(int argc, char** argv, int (*body)(int, char**));

}  // namespace gossip
