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

// The opening of every chart here: the <svg> element, a white background and the title.
std::string svg_opening(double width, double height, const std::string& title);
// Writes a finished chart to `path`; throws gossip::Error naming the file if it cannot.
void save_svg(const std::string& path, const std::string& svg);

// Writes the chart to `path`; throws gossip::Error naming the file if it cannot be written.
void write_consensus_svg(const std::string& path, const std::string& title, const std::vector<PlotPoint>& points);

}  // namespace gossip::tools
