// gossip-launch's live view, used when its output is a terminal (and not --plain): one row per
// peer, redrawn in place with ANSI cursor moves — a progress bar with ETA, step, loss, accuracy,
// samples/s, consensus distance, MB/s in and out, and the peer's state (starting, joining,
// training, view change, leaving, cut off, done, left, failed). Every other line (membership
// events, warnings, final results, the launcher's own) scrolls above the rows.
//
// The rows are fed by the peers' own output: their "step ..." lines (every log_every steps, with
// the consensus distance) and "live step ..." lines, which a peer prints at most every
// GOSSIP_LIVE_S seconds when the launcher sets it (src/peer/live_ticker.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace gossip::tools {

struct PeerRow {
  int rank = 0;
  std::string state = "starting";
  int64_t step = 0, total = 0;
  std::optional<double> loss, accuracy, rate, consensus;  // rate: samples (tokens) per second
  std::optional<double> mb_in_per_s, mb_out_per_s;
  std::optional<double> eta_s;  // at line_t_s
  double line_t_s = 0;          // when the last step line came
  // For the rates: the first step seen (ETA) and the previous byte counters (MB/s).
  double first_t_s = -1;
  int64_t first_step = 0;
  double traffic_t_s = -1, sent_mb = 0, received_mb = 0;
};

// Folds one of a peer's lines (as gossip-launch prints it, "[peer R] ...") that arrived at `t_s`
// into its row. True when the line is a step or live line, which the row replaces; false for a
// line to show as it is (it may still have changed the state, e.g. "view change to epoch").
bool update_row(PeerRow& row, const std::string& line, double t_s);

// The column titles and a row at `now_s`, both cut to `width` characters.
std::string header_row(size_t width);
std::string format_row(const PeerRow& row, double now_s, size_t width);

class LiveView {
 public:
  LiveView(int peers, std::FILE* out);
  // A peer's line; the launcher's own line.
  void line(int rank, const std::string& text, double t_s);
  void event(const std::string& text);
  // A peer exited: `how` is its final state ("done", "left", "failed (exit code 1)", ...).
  void exited(int rank, const std::string& how);
  // Redraws when events wait or a fifth of a second passed since the last draw.
  void render(double t_s);
  // The last draw; the rows stay on the screen and later output goes below them.
  void finish(double t_s);

 private:
  void draw(double t_s);

  std::vector<PeerRow> rows_;
  std::vector<std::string> events_;  // to print above the rows at the next draw
  std::FILE* out_;
  int drawn_ = 0;  // lines of the rows block on the screen now
  double last_draw_s_ = -1;
};

}  // namespace gossip::tools
