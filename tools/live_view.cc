#include "live_view.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>

#include "run_plot.h"

namespace gossip::tools {
namespace {

bool has(const std::string& line, const char* text) { return line.find(text) != std::string::npos; }

bool finished(const PeerRow& row) {
  return row.state == "done" || row.state == "left" || row.state.rfind("failed", 0) == 0;
}

// "step S/T" after `at` in `line` into the row (left as it was when the text is no such thing).
bool parse_step(const std::string& line, size_t at, PeerRow& row) {
  int64_t step = 0, total = 0;
  if (std::sscanf(line.c_str() + at, "step %" SCNd64 "/%" SCNd64, &step, &total) != 2 || total <= 0) return false;
  row.step = step;
  row.total = total;
  return true;
}

// A step or live line: step, loss, accuracy and rate; the consensus distance (step lines) and
// the byte counters (live lines) when present.
void take_step_line(PeerRow& row, const std::string& line, double t_s) {
  row.loss = number_after(line, " loss ").value_or(row.loss.value_or(NAN));
  row.accuracy = number_after(line, " train_acc ").value_or(row.accuracy.value_or(NAN));
  if (auto r = number_after(line, " samples/s ")) row.rate = r;
  if (auto r = number_after(line, " tokens/s ")) row.rate = r;
  if (auto c = number_after(line, " consensus ")) row.consensus = c;
  if (row.first_t_s < 0) row.first_t_s = t_s, row.first_step = row.step;
  if (row.step > row.first_step && t_s > row.first_t_s)
    row.eta_s = (row.total - row.step) * (t_s - row.first_t_s) / double(row.step - row.first_step);
  row.line_t_s = t_s;
  const auto sent = number_after(line, " sent_MB "), received = number_after(line, " received_MB ");
  if (!sent || !received) return;
  if (row.traffic_t_s >= 0 && t_s > row.traffic_t_s) {
    row.mb_out_per_s = (*sent - row.sent_mb) / (t_s - row.traffic_t_s);
    row.mb_in_per_s = (*received - row.received_mb) / (t_s - row.traffic_t_s);
  }
  row.traffic_t_s = t_s, row.sent_mb = *sent, row.received_mb = *received;
}

std::string number(const std::optional<double>& v, const char* format) {
  if (!v || !std::isfinite(*v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, *v);
  return buf;
}

std::string duration(double s) {
  const long total = std::lround(std::max(0.0, s));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  return buf;
}

std::string cut(std::string text, size_t width) {
  if (text.size() > width) text.resize(width);
  return text;
}

constexpr int kBar = 20;

size_t terminal_width(std::FILE* out) {
  winsize ws{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 200;  // not a terminal (a test's file): nothing to cut
}

}  // namespace

bool update_row(PeerRow& row, const std::string& line, double t_s) {
  const size_t live_at = line.find("] live step "), step_at = line.find("] step ");
  if (live_at != std::string::npos || step_at != std::string::npos) {
    const size_t at = live_at != std::string::npos ? live_at + 7 : step_at + 2;
    if (!parse_step(line, at, row)) return false;
    take_step_line(row, line, t_s);
    if (!finished(row)) row.state = "training";
    return true;
  }
  if (has(line, "] final: ")) row.state = "done";
  else if (has(line, " joining via ")) row.state = "joining";
  else if (has(line, ": view change to epoch ")) row.state = "view change";
  else if (has(line, "(leaving the run)") || has(line, ": leaving the run at round")) row.state = "leaving";
  else if (has(line, ": cut off from the run")) row.state = "cut off";
  return false;
}

std::string header_row(size_t width) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%4s %-*s %4s %-8s %-11s %-7s %-6s %8s %-9s %8s %8s %s", "peer", kBar + 2,
                "progress", "", "ETA", "step", "loss", "acc", "rate/s", "consensus", "in MB/s", "out MB/s", "state");
  return cut(buf, width);
}

std::string format_row(const PeerRow& row, double now_s, size_t width) {
  const double done = row.total > 0 ? std::clamp(double(row.step) / row.total, 0.0, 1.0) : 0;
  const int filled = static_cast<int>(std::lround(done * kBar));
  const std::string bar = "[" + std::string(filled, '#') + std::string(kBar - filled, '.') + "]";
  std::string eta = "-";
  if (finished(row)) eta = "";
  else if (row.eta_s) eta = duration(*row.eta_s - (now_s - row.line_t_s));
  const std::string steps = row.total ? std::to_string(row.step) + "/" + std::to_string(row.total) : "-";
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%4d %s %3d%% %-8s %-11s %-7s %-6s %8s %-9s %8s %8s %s", row.rank, bar.c_str(),
                static_cast<int>(done * 100), eta.c_str(), steps.c_str(), number(row.loss, "%.4f").c_str(),
                number(row.accuracy, "%.4f").c_str(), number(row.rate, "%.0f").c_str(),
                number(row.consensus, "%.2e").c_str(), number(row.mb_in_per_s, "%.1f").c_str(),
                number(row.mb_out_per_s, "%.1f").c_str(), row.state.c_str());
  return cut(buf, width);
}

LiveView::LiveView(int peers, std::FILE* out) : out_(out) {
  rows_.resize(peers);
  for (int r = 0; r < peers; ++r) rows_[r].rank = r;
}

void LiveView::line(int rank, const std::string& text, double t_s) {
  if (rank < 0 || rank >= static_cast<int>(rows_.size()) || !update_row(rows_[rank], text, t_s)) events_.push_back(text);
}

void LiveView::event(const std::string& text) { events_.push_back(text); }

void LiveView::exited(int rank, const std::string& how) {
  if (rank >= 0 && rank < static_cast<int>(rows_.size())) rows_[rank].state = how;
}

void LiveView::render(double t_s) {
  if (events_.empty() && last_draw_s_ >= 0 && t_s - last_draw_s_ < 0.2) return;
  draw(t_s);
}

void LiveView::finish(double t_s) { draw(t_s); }

void LiveView::draw(double t_s) {
  const size_t width = terminal_width(out_) - 1;  // never the last column: no automatic wrap
  std::string frame;
  if (drawn_ > 0) frame += "\x1b[" + std::to_string(drawn_) + "A\r\x1b[J";  // up to the rows, clear below
  for (const std::string& e : events_) frame += e + "\n";
  events_.clear();
  frame += header_row(width) + "\n";
  for (const PeerRow& row : rows_) frame += format_row(row, t_s, width) + "\n";
  std::fputs(frame.c_str(), out_);
  std::fflush(out_);
  drawn_ = static_cast<int>(rows_.size()) + 1;
  last_draw_s_ = t_s;
}

}  // namespace gossip::tools
