// gossip-launch --plot: what every peer's step lines said over the run, drawn as one SVG with
// three panels against wall time — training loss, training accuracy and consensus distance (log
// axis) — one line per peer.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gossip::tools {

struct RunSample {
  double t_s = 0;  // since the launch
  double loss = 0;
  double accuracy = 0;
  std::optional<double> consensus;  // Ξ, when the line has it (decentralized runs)
};

// The number after `key` (e.g. " loss ") in `line`, or nullopt when none or not finite.
std::optional<double> number_after(const std::string& line, const std::string& key);

// A peer's step line ("... step 20/42 epoch 1.43 loss 1.05 train_acc 0.65 ... consensus 5.6e-02
// ..."), or nullopt for any other line or one whose numbers are not finite.
std::optional<RunSample> parse_step_line(const std::string& line, double t_s);

class RunRecorder {
 public:
  void note(int rank, const std::string& line, double t_s);
  size_t samples() const;
  // Throws gossip::Error naming the file when it cannot be written.
  void write_svg(const std::string& path, const std::string& title) const;

 private:
  std::map<int, std::vector<RunSample>> peers_;
};

}  // namespace gossip::tools
