// gossip-peer: one peer of a decentralized training run.
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>

#include "common/error.h"
#include "common/flags.h"
#include "common/log.h"
#include "peer/config.h"
#include "peer/trainer.h"

namespace {

int run(int argc, char** argv) {
  gossip::Flags flags("gossip-peer");
  flags.add_string("config", "topology/run YAML (see configs/)");
  flags.add_string("rank", "this peer's rank; else SLURM_PROCID / OMPI_COMM_WORLD_RANK / 0", std::nullopt);
  flags.add_string("device", "override the YAML's device: auto, cpu or cuda", std::nullopt);
  flags.add_string("epochs", "override optimizer.epochs", std::nullopt);
  flags.add_bool("help", "print this help");
  flags.parse(argc, argv);
  if (flags.get_bool("help")) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  if (!flags.positional().empty()) throw gossip::Error("gossip-peer", "unexpected argument '" + flags.positional()[0] + "'");
  gossip::peer::RunConfig cfg = gossip::peer::load_config(flags.get_string("config"));
  if (flags.has("device")) cfg.device = flags.get_string("device");
  if (flags.has("epochs")) cfg.train.epochs = flags.get_double("epochs");
  int rank = 0;
  if (flags.has("rank")) {
    rank = static_cast<int>(flags.get_int("rank"));
  } else if (const char* r = std::getenv("SLURM_PROCID")) {
    rank = std::atoi(r);
  } else if (const char* r2 = std::getenv("OMPI_COMM_WORLD_RANK")) {
    rank = std::atoi(r2);
  }
  const int n = cfg.peers.count();
  if (rank < 0 || rank >= n)
    throw gossip::Error("gossip-peer", "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(n - 1) +
                                           " (" + cfg.file + " lists " + std::to_string(n) + " peers)");
  if (n > 1 && cfg.algorithm.kind == gossip::peer::Algorithm::kNone)
    gossip::log("note: ", n, " peers but algorithm none: each peer trains alone");
  gossip::peer::Trainer trainer(cfg, rank, n, nullptr);
  gossip::peer::TrainResult r = trainer.run();
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << "final: peer " << rank << " test_acc " << r.test.accuracy
      << " test_loss " << r.test.loss << " samples/s " << std::setprecision(0) << r.samples_per_s;
  gossip::log(out.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const gossip::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return gossip::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
