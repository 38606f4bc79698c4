#include "run_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <sstream>

#include "svg_plot.h"

namespace gossip::tools {
namespace {

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct Panel {
  std::string label;
  std::function<std::optional<double>(const RunSample&)> value;
  bool log = false;
};

}  // namespace

std::optional<double> number_after(const std::string& line, const std::string& key) {
  const size_t at = line.find(key);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = line.c_str() + at + key.size();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<RunSample> parse_step_line(const std::string& line, double t_s) {
  if (line.find("] step ") == std::string::npos && line.rfind("step ", 0) != 0) return std::nullopt;
  const std::optional<double> loss = number_after(line, " loss "), acc = number_after(line, " train_acc ");
  if (!loss || !acc) return std::nullopt;
  RunSample s;
  s.t_s = t_s;
  s.loss = *loss;
  s.accuracy = *acc;
  s.consensus = number_after(line, " consensus ");
  return s;
}

void RunRecorder::note(int rank, const std::string& line, double t_s) {
  if (std::optional<RunSample> s = parse_step_line(line, t_s)) peers_[rank].push_back(*s);
}

size_t RunRecorder::samples() const {
  size_t n = 0;
  for (const auto& [rank, series] : peers_) n += series.size();
  return n;
}

void RunRecorder::write_svg(const std::string& path, const std::string& title) const {
  const double W = 900, left = 80, right = 130, top = 40, panel_h = 170, gap = 40;
  const std::vector<Panel> panels = {
      {"training loss", [](const RunSample& s) { return std::optional<double>(s.loss); }, false},
      {"training accuracy", [](const RunSample& s) { return std::optional<double>(s.accuracy); }, false},
      {"consensus distance (log)",
       [](const RunSample& s) { return s.consensus && *s.consensus > 0 ? s.consensus : std::nullopt; }, true}};
  const double H = top + panels.size() * (panel_h + gap) + 10, pw = W - left - right;
  double t1 = 1;
  for (const auto& [rank, series] : peers_)
    for (const RunSample& s : series) t1 = std::max(t1, s.t_s);
  std::ostringstream svg;
  svg << std::fixed << std::setprecision(1) << svg_opening(W, H, title);
  for (size_t p = 0; p < panels.size(); ++p) {
    const Panel& panel = panels[p];
    const double y0 = top + p * (panel_h + gap);
    double lo = 1e300, hi = -1e300;
    for (const auto& [rank, series] : peers_)
      for (const RunSample& s : series)
        if (auto v = panel.value(s)) {
          const double y = panel.log ? std::log10(*v) : *v;
          lo = std::min(lo, y), hi = std::max(hi, y);
        }
    if (lo > hi) lo = 0, hi = 1;
    if (panel.log) lo = std::floor(lo), hi = std::ceil(hi);
    if (hi <= lo) hi = lo + 1;
    svg << "<rect x='" << left << "' y='" << y0 << "' width='" << pw << "' height='" << panel_h
        << "' fill='none' stroke='#888'/>\n<text x='" << left + 6 << "' y='" << y0 + 16 << "'>" << panel.label
        << "</text>\n" << std::setprecision(3);
    for (int i = 0; i <= 2; ++i) {
      const double v = lo + (hi - lo) * i / 2, y = y0 + panel_h - (v - lo) / (hi - lo) * panel_h;
      svg << "<text x='" << left - 6 << "' y='" << y + 4 << "' text-anchor='end'>"
          << (panel.log ? "1e" + std::to_string(static_cast<int>(std::lround(v))) : std::to_string(v).substr(0, 5))
          << "</text>\n";
    }
    svg << std::setprecision(1);
    for (const auto& [rank, series] : peers_) {
      svg << "<polyline class='peer" << rank << "' fill='none' stroke-width='1.2' stroke='"
          << kColours[rank % std::size(kColours)] << "' points='";
      for (const RunSample& s : series)
        if (auto v = panel.value(s)) {
          const double y = panel.log ? std::log10(*v) : *v;
          svg << left + s.t_s / t1 * pw << "," << y0 + panel_h - (y - lo) / (hi - lo) * panel_h << " ";
        }
      svg << "'/>\n";
    }
  }
  const double bottom = top + panels.size() * (panel_h + gap) - gap;
  svg << "<text x='" << left << "' y='" << bottom + 18 << "'>0 s</text><text x='" << left + pw << "' y='" << bottom + 18
      << "' text-anchor='end'>" << t1 << " s since the launch</text>\n";
  int shown = 0;
  for (const auto& [rank, series] : peers_) {
    if (shown == 24) {
      svg << "<text x='" << left + pw + 12 << "' y='" << top + 14 * shown + 12 << "'>+" << peers_.size() - 24
          << " more</text>\n";
      break;
    }
    svg << "<text x='" << left + pw + 12 << "' y='" << top + 14 * shown++ + 12 << "' fill='"
        << kColours[rank % std::size(kColours)] << "'>peer " << rank << "</text>\n";
  }
  svg << "</svg>\n";
  save_svg(path, svg.str());
}

}  // namespace gossip::tools
