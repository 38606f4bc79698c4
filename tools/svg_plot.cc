#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "common/error.h"

namespace gossip::tools {

std::string svg_opening(double width, double height, const std::string& title) {
  std::ostringstream svg;
  svg << std::fixed << std::setprecision(1) << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='"
      << height << "' font-family='sans-serif' font-size='12'>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << width / 2 << "' y='22' text-anchor='middle' font-size='15'>" << title << "</text>\n";
  return svg.str();
}

void save_svg(const std::string& path, const std::string& svg) {
  std::ofstream out(path);
  out << svg;
  if (!out) throw Error(path, "cannot write the plot");
}

void write_consensus_svg(const std::string& path, const std::string& title, const std::vector<PlotPoint>& points) {
  const double W = 860, H = 420, left = 80, right = 70, top = 40, bottom = 50;
  const double pw = W - left - right, ph = H - top - bottom;
  double r0 = 0, r1 = 1, lo = -12, hi = 0, l0 = 0, l1 = 1;
  if (!points.empty()) {
    r0 = points.front().round;
    r1 = std::max(points.back().round, r0 + 1);
    double mn = 1e300, mx = -1e300;
    for (const auto& p : points)
      if (p.xi > 0) mn = std::min(mn, p.xi), mx = std::max(mx, p.xi);
    if (mn <= mx) lo = std::floor(std::log10(mn)), hi = std::ceil(std::log10(mx));
    if (hi <= lo) hi = lo + 1;
    l0 = 1e300, l1 = -1e300;
    for (const auto& p : points) l0 = std::min(l0, p.loss), l1 = std::max(l1, p.loss);
    if (l1 <= l0) l1 = l0 + 1;
  }
  auto x_of = [&](double r) { return left + (r - r0) / (r1 - r0) * pw; };
  // Ξ = 0 (a global-average round) is drawn on the bottom edge of the log axis.
  auto y_xi = [&](double xi) { return top + ph - (xi > 0 ? (std::log10(xi) - lo) / (hi - lo) : 0.0) * ph; };
  auto y_loss = [&](double l) { return top + ph - (l - l0) / (l1 - l0) * ph; };
  std::ostringstream svg;
  svg << std::fixed << std::setprecision(1) << svg_opening(W, H, title)
      << "<rect x='" << left << "' y='" << top << "' width='" << pw << "' height='" << ph << "' fill='none' stroke='#888'/>\n";
  for (double e = lo; e <= hi; e += 1) {
    const double y = top + ph - (e - lo) / (hi - lo) * ph;
    svg << "<line x1='" << left << "' x2='" << left + pw << "' y1='" << y << "' y2='" << y << "' stroke='#eee'/>"
        << "<text x='" << left - 6 << "' y='" << y + 4 << "' text-anchor='end' fill='#1f77b4'>1e" << static_cast<int>(e) << "</text>\n";
  }
  for (int i = 0; i <= 4; ++i) {
    const double l = l0 + (l1 - l0) * i / 4, y = y_loss(l);
    svg << "<text x='" << left + pw + 6 << "' y='" << y + 4 << "' fill='#d62728'>" << std::setprecision(3) << l
        << std::setprecision(1) << "</text>\n";
  }
  // A "nice" tick spacing (1, 2 or 5 × 10^k whole rounds), about six ticks across.
  const double raw = std::max(1.0, (r1 - r0) / 6), mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double tick = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  for (double r = std::ceil(r0 / tick) * tick; r <= r1 + 1e-9; r += tick)
    svg << "<text x='" << x_of(r) << "' y='" << top + ph + 18 << "' text-anchor='middle'>" << std::setprecision(0) << r
        << std::setprecision(1) << "</text>\n";
  svg << "<text x='" << left + pw / 2 << "' y='" << H - 12 << "' text-anchor='middle'>round (steps)</text>\n"
      << "<text x='18' y='" << top + ph / 2 << "' transform='rotate(-90 18 " << top + ph / 2
      << ")' text-anchor='middle' fill='#1f77b4'>consensus distance (log; 0 drawn on the bottom edge)</text>\n"
      << "<text x='" << W - 14 << "' y='" << top + ph / 2 << "' transform='rotate(90 " << W - 14 << " " << top + ph / 2
      << ")' text-anchor='middle' fill='#d62728'>training loss</text>\n";
  auto polyline = [&](const char* colour, auto y_of) {
    svg << "<polyline fill='none' stroke='" << colour << "' stroke-width='1.5' points='";
    for (const auto& p : points) svg << x_of(p.round) << "," << y_of(p) << " ";
    svg << "'/>\n";
  };
  polyline("#1f77b4", [&](const PlotPoint& p) { return y_xi(p.xi); });
  polyline("#d62728", [&](const PlotPoint& p) { return y_loss(p.loss); });
  svg << "</svg>\n";
  save_svg(path, svg.str());
}

}  // namespace gossip::tools
