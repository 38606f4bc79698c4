// gossip-keygen: writes CurveZMQ key pairs. `gossip-keygen DIR --peers N` makes peer-0 .. peer-N-1
// and tool key pairs in DIR (the `security: {keys: DIR}` of a YAML); `--name NAME` makes one more
// pair (say, for a peer joining later). Every *.pub in DIR is on the run's allow-list.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include "common/error.h"
#include "common/flags.h"
#include "transport/zmq/curve_keys.h"

namespace {

int run(int argc, char** argv) {
  gossip::Flags flags("gossip-keygen");
  flags.add_string("peers", "make peer-0 .. peer-N-1 key pairs", "0");
  flags.add_string("name", "make one key pair NAME.key / NAME.pub", std::nullopt);
  flags.add_bool("help", "print this help");
  flags.parse(argc, argv);
  if (flags.get_bool("help") || flags.positional().size() != 1) {
    std::fputs(("usage: gossip-keygen DIR [--peers N] [--name NAME]\n" + flags.usage()).c_str(),
               flags.get_bool("help") ? stdout : stderr);
    return flags.get_bool("help") ? 0 : gossip::kExitUsage;
  }
  const std::string dir = flags.positional()[0];
  std::filesystem::create_directories(dir);
  ::chmod(dir.c_str(), 0700);
  const int peers = static_cast<int>(flags.get_int("peers"));
  if (peers < 0 || peers > 100000) throw gossip::Error("gossip-keygen", "--peers must be in 0..100000");
  std::vector<std::string> names;
  for (int r = 0; r < peers; ++r) names.push_back("peer-" + std::to_string(r));
  if (peers > 0) names.push_back("tool");
  if (flags.has("name")) names.push_back(flags.get_string("name"));
  if (names.empty()) throw gossip::Error("gossip-keygen", "nothing to make: give --peers N or --name NAME");
  for (const auto& n : names) gossip::peer::write_keypair(dir + "/" + n, gossip::peer::generate_keypair());
  std::printf("wrote %zu key pairs to %s\n", names.size(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
