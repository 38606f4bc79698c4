// A small SVG line chart (no dependencies): consensus distance on a log axis (left) and loss on a
// linear axis (right) against rounds.
#pragma once

#include <string>
#include <vector>

namespace gossip::tools {

struct PlotPoint {
  double round;
  double xi;
  double loss;
};

// Writes the chart to `path`; throws gossip::Error naming the file if it cannot be written.
void write_consensus_svg(const std::string& path, const std::string& title, const std::vector<PlotPoint>& points);

}  // namespace gossip::tools
