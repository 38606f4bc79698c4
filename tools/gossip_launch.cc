// gossip-launch: starts every peer of a YAML on this machine (gossip-peer, or any command given
// after "--", once per rank), prefixes their output, forwards Ctrl-C / SIGTERM, stops the others
// when one fails, and exits non-zero if any peer failed. On a terminal it shows a live view (one
// updating row per peer, live_view.h); elsewhere, or with --plain, the peers' lines as they come.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/flags.h"
#include "peer/config.h"
#include "live_view.h"
#include "run_plot.h"

namespace {

namespace fs = std::filesystem;
volatile sig_atomic_t g_signal = 0;

void on_signal(int sig) { g_signal = sig; }

// --plot: every peer's step lines, timed from the launch.
gossip::tools::RunRecorder g_recorder;
const auto g_started = std::chrono::steady_clock::now();
// The live view when the output is a terminal (null: plain lines).
std::unique_ptr<gossip::tools::LiveView> g_view;

double seconds_since_start() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_started).count();
}

// A line of the launcher's own: above the live view's rows, or printed.
void say(const std::string& text) {
  if (g_view) return g_view->event(text);
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int fd = -1;  // read end of its stdout+stderr
  std::string partial;
  bool running = true;
  int status = 0;
  std::string params_crc;  // from its "final:" line: identifies its final model
  bool left = false;       // it left the run on its own (its model is its own by design)
};

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return fs::path(buf).parent_path().string();
}

void emit(Child& c, const char* data, size_t n) {
  c.partial.append(data, n);
  size_t pos;
  while ((pos = c.partial.find('\n')) != std::string::npos) {
    std::string line = c.partial.substr(0, pos);
    c.partial.erase(0, pos + 1);
    // The peer already prefixes its log lines; add the prefix only to lines that lack it.
    const std::string prefix = "[peer " + std::to_string(c.rank) + "] ";
    if (line.rfind(prefix, 0) != 0) line = prefix + line;
    const size_t final_at = line.find("] final: ");
    const size_t crc_at = line.find(" params_crc ");
    if (final_at != std::string::npos && crc_at != std::string::npos)
      c.params_crc = line.substr(crc_at + 12, line.find(' ', crc_at + 12) - crc_at - 12);
    if (line.find(" (leaving the run)") != std::string::npos) c.left = true;
    g_recorder.note(c.rank, line, seconds_since_start());
    if (g_view) g_view->line(c.rank, line, seconds_since_start());
    else std::fprintf(stdout, "%s\n", line.c_str());
  }
  std::fflush(stdout);
}

// A temporary rendezvous directory when a peer binds port 0 ("" when none does).
std::string make_rendezvous(const gossip::peer::RunConfig& cfg) {
  bool any_port = false;
  for (const auto& p : cfg.peers.list) any_port |= gossip::binds_any_port(p.endpoint);
  if (!any_port) return "";
  char tmpl[] = "/tmp/gossip-rendezvous-XXXXXX";
  if (!::mkdtemp(tmpl)) throw gossip::Error("gossip-launch", std::string("mkdtemp: ") + std::strerror(errno));
  return tmpl;
}

// One id for this run's peers: their rendezvous files name it, so files an earlier run left in
// a reused directory are never taken for this run's (see transport/rendezvous.h).
void set_run_id() {
  if (std::getenv("GOSSIP_RUN_ID")) return;
  std::random_device rd;
  char id[32];
  std::snprintf(id, sizeof(id), "launch-%08x%08x", rd(), rd());
  ::setenv("GOSSIP_RUN_ID", id, 1);
}

// Starts `args` (args[0]: the binary, looked up in PATH when it has no '/') with its stdout and
// stderr on a pipe and `env` (NAME=value) added to its environment.
Child spawn(int rank, std::vector<std::string> args, const std::vector<std::string>& env = {}) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw gossip::Error("gossip-launch", "pipe failed");
  // Between fork and exec the child still runs the launcher's signal handlers, which only set a
  // flag: a SIGTERM landing there would be lost. Block the signals across fork, reset them to
  // the default in the child, and unblock (pending ones then act) on both sides.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    ::setpgid(0, 0);  // own process group: the launcher decides who gets which signal
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));  // lives until exec
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    ::execvp(args[0].c_str(), cargs.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0].c_str(), std::strerror(errno));
    ::_exit(127);
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  ::close(pipefd[1]);
  Child c;
  c.rank = rank;
  c.pid = pid;
  c.fd = pipefd[0];
  return c;
}

// Copies what the peers print until every pipe is closed.
void forward_output(std::vector<Child>& children) {
  std::vector<pollfd> fds;
  std::vector<Child*> who;
  for (auto& c : children)
    if (c.fd >= 0) fds.push_back({c.fd, POLLIN, 0}), who.push_back(&c);
  const int ready = ::poll(fds.data(), fds.size(), g_view ? 200 : 500);
  if (ready <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buf[65536];
    ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
    if (got > 0) {
      emit(*who[i], buf, static_cast<size_t>(got));
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      if (!who[i]->partial.empty()) emit(*who[i], "\n", 1);
      ::close(who[i]->fd);
      who[i]->fd = -1;
    }
  }
}

// Forwards the peers' output and the launcher's signals until all have exited; the number failed.
int supervise(std::vector<Child>& children) {
  int failed = 0, forwarded = 0;
  bool stopping = false;
  // A started peer takes SIGTERM as "leave at the next step"; one waiting for a failed peer's
  // messages never gets there (it would wait out timeout_s), so after a failure the peers still
  // running when the grace period ends are killed.
  constexpr double kStopGraceS = 10;
  double kill_at = -1;
  auto stop_all = [&](int sig) {
    for (auto& c : children)
      if (c.running) ::kill(c.pid, sig);
  };
  auto any_open = [&] {
    for (const auto& c : children)
      if (c.fd >= 0) return true;
    return false;
  };
  // Records an exited child; true when it failed.
  auto exited = [&](Child& c) {
    c.running = false;
    if (WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0) {
      if (g_view) g_view->exited(c.rank, c.left ? "left" : "done");
      return false;
    }
    ++failed;
    const std::string how = std::string("failed (") + (WIFEXITED(c.status) ? "exit code " : "signal ") +
                            std::to_string(WIFEXITED(c.status) ? WEXITSTATUS(c.status) : WTERMSIG(c.status)) + ")";
    if (g_view) g_view->exited(c.rank, how);
    say("gossip-launch: peer " + std::to_string(c.rank) + " " + how);
    return true;
  };
  while (any_open()) {
    if (g_signal && forwarded != g_signal) {
      forwarded = g_signal;
      say("gossip-launch: forwarding signal " + std::to_string(g_signal) + " to the peers");
      stop_all(g_signal);
      stopping = true;
    }
    if (kill_at >= 0 && seconds_since_start() > kill_at) {
      say("gossip-launch: peers still running " + std::to_string(static_cast<int>(kStopGraceS)) +
          " s after the stop: killing them");
      stop_all(SIGKILL);
      kill_at = -1;
    }
    forward_output(children);
    if (g_view) g_view->render(seconds_since_start());
    // Reap whoever exited. A peer that fails with an error code (a bad config, a bind failure)
    // stops the rest; one killed by a signal is a crash the others survive (elastic membership),
    // so they carry on and the launcher only reports it.
    for (auto& c : children) {
      if (!c.running || ::waitpid(c.pid, &c.status, WNOHANG) != c.pid || !exited(c)) continue;
      // Cut off from the run (kExitCutOff): like a crash, the others carry on without it.
      if (!stopping && WIFEXITED(c.status) && WEXITSTATUS(c.status) != gossip::kExitCutOff) {
        say("gossip-launch: stopping the other peers");
        stop_all(SIGTERM);
        stopping = true;
        kill_at = seconds_since_start() + kStopGraceS;
      }
    }
  }
  for (auto& c : children)
    if (c.running) {
      ::waitpid(c.pid, &c.status, 0);
      exited(c);
    }
  if (g_view) {
    g_view->finish(seconds_since_start());
    g_view.reset();  // what follows (the summary) prints below the rows
  }
  return failed;
}

// One run, one model: the peers that finished (not those that left on their own) must all hold
// the same final model, whatever the algorithm that mixes them. Prints the last line; the exit code.
int report(const std::vector<Child>& children, int failed, bool one_model_expected) {
  std::set<std::string> models;
  int cut_off = 0, left = 0;
  for (const auto& c : children) {
    const bool ok = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
    cut_off += WIFEXITED(c.status) && WEXITSTATUS(c.status) == gossip::kExitCutOff;
    left += ok && c.left;
    if (ok && !c.left && !c.params_crc.empty()) models.insert(c.params_crc);
  }
  std::string tail = ", " + std::to_string(models.size()) + " distinct final model" + (models.size() == 1 ? "" : "s");
  if (cut_off) tail += " (" + std::to_string(cut_off) + " cut off from the run)";
  if (left) tail += " (" + std::to_string(left) + " left the run before its end: not compared)";
  if (models.size() > 1 && one_model_expected) tail += ": the run split";
  const int n = static_cast<int>(children.size());
  std::printf("gossip-launch: %d of %d peers succeeded%s\n", n - failed, n, tail.c_str());
  return failed || (models.size() > 1 && one_model_expected) ? 1 : 0;
}

// The peers of a launch share this host: LOCAL_RANK = rank spreads them over its GPUs (a peer
// with `device_index: -1` uses local rank modulo the visible devices).
std::string local_rank_env(int rank) { return "LOCAL_RANK=" + std::to_string(rank); }

// `gossip-launch CONFIG -- CMD ARGS...`: CMD (e.g. a Python peer) starts once per rank and finds
// its place in the run in the environment.
std::vector<std::string> command_env(const std::string& config, int rank, int size, const std::string& rendezvous,
                                     const gossip::Flags& flags) {
  std::vector<std::string> env{"GOSSIP_CONFIG=" + config, "GOSSIP_RANK=" + std::to_string(rank),
                               "GOSSIP_SIZE=" + std::to_string(size), local_rank_env(rank)};
  if (!rendezvous.empty()) env.push_back("GOSSIP_RENDEZVOUS=" + rendezvous);
  if (flags.get_bool("resume")) env.push_back("GOSSIP_RESUME=1");
  for (const auto& [flag, name] : {std::pair{"epochs", "GOSSIP_EPOCHS"}, std::pair{"device", "GOSSIP_DEVICE"}})
    if (flags.has(flag)) env.push_back(std::string(name) + "=" + flags.get_string(flag));
  return env;
}

// The flags passed on to every gossip-peer, checked once here as each peer would check them (else
// every peer starts and prints the same error).
void check_passed_on_flags(const gossip::Flags& flags, gossip::peer::RunConfig cfg) {
  gossip::peer::ConfigOverrides o;
  if (flags.has("device")) o.device = flags.get_string("device");
  if (flags.has("epochs")) o.epochs = flags.get_double("epochs");
  if (flags.has("slowdown")) o.slowdown = flags.get_double("slowdown");
  if (flags.has("min-step-ms")) o.min_step_ms = flags.get_double("min-step-ms");
  gossip::peer::apply_overrides(cfg, o, "gossip-launch");
}

// Starts the live view when the output is a terminal (not with --plain or TERM=dumb). Returns the
// environment entry that asks the peers for live lines — twice a second, or as often as
// GOSSIP_LIVE_S in the launcher's environment says (src/peer/live_ticker.h) — or "" without it.
std::string start_live_view(int peers, bool plain) {
  const char* term = std::getenv("TERM");
  if (!::isatty(STDOUT_FILENO) || plain || (term && std::string(term) == "dumb")) {
    ::unsetenv("GOSSIP_LIVE_S");  // plain lines: no live lines among them
    return "";
  }
  g_view = std::make_unique<gossip::tools::LiveView>(peers, stdout);
  const char* live_s = std::getenv("GOSSIP_LIVE_S");
  return std::string("GOSSIP_LIVE_S=") + (live_s && *live_s ? live_s : "0.5");
}

int run(int argc, char** argv) {
  // Everything after "--" is the command to start per rank instead of gossip-peer.
  std::vector<std::string> command;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      command.assign(argv + i + 1, argv + argc);
      if (command.empty()) throw gossip::Error("gossip-launch", "nothing after '--' (give the command to start per rank)");
      argc = i;
      break;
    }
  gossip::Flags flags("gossip-launch");
  flags.add_string("peer", "path of the gossip-peer binary", self_dir() + "/gossip-peer");
  flags.add_string("epochs", "passed on to every peer", std::nullopt);
  flags.add_string("device", "passed on to every peer", std::nullopt);
  flags.add_string("slowdown", "passed on to every peer (tests, benchmarks: each step takes this many times longer)",
                   std::nullopt);
  flags.add_string("min-step-ms", "passed on to every peer (tests, benchmarks: each step takes at least this many ms)",
                   std::nullopt);
  flags.add_bool("resume", "passed on: every peer continues from its newest common checkpoint");
  flags.add_string("plot", "at the end, draw every peer's loss, accuracy and consensus distance against time "
                   "into this SVG file", std::nullopt);
  flags.add_bool("plain", "print the peers' lines as they come even on a terminal (no live view)");
  flags.add_bool("help", "print this help");
  flags.parse(argc, argv);
  if (flags.get_bool("help") || flags.positional().size() != 1) {
    std::fputs(("usage: gossip-launch CONFIG.yaml [flags] [-- COMMAND ARGS...]\n"
                "  with a COMMAND, it starts once per rank instead of gossip-peer, with GOSSIP_CONFIG,\n"
                "  GOSSIP_RANK, GOSSIP_SIZE (and GOSSIP_RENDEZVOUS, GOSSIP_RESUME, GOSSIP_EPOCHS, GOSSIP_DEVICE when\n"
                "  they apply) in its environment; every peer gets LOCAL_RANK = its rank (GPUs: see device_index)\n" +
                flags.usage())
                   .c_str(),
               flags.get_bool("help") ? stdout : stderr);
    return flags.get_bool("help") ? 0 : gossip::kExitUsage;
  }
  const std::string config = flags.positional()[0];
  gossip::peer::RunConfig cfg = gossip::peer::load_config(config);  // fails early on a bad YAML
  check_passed_on_flags(flags, cfg);
  const int n = cfg.peers.count();
  const std::string peer_bin = flags.get_string("peer");
  if (command.empty() && ::access(peer_bin.c_str(), X_OK) != 0) throw gossip::Error("gossip-launch", "peer binary " + peer_bin + " is not executable");
  if (flags.has("plot") && !std::ofstream(flags.get_string("plot")))  // rather now than after the run
    throw gossip::Error(flags.get_string("plot"), "cannot write the plot");
  const std::string rendezvous = make_rendezvous(cfg);
  set_run_id();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  const std::string live_env = start_live_view(n, flags.get_bool("plain"));
  std::vector<Child> children;
  for (int r = 0; r < n; ++r) {
    if (!command.empty()) {
      std::vector<std::string> env = command_env(config, r, n, rendezvous, flags);
      if (!live_env.empty()) env.push_back(live_env);
      children.push_back(spawn(r, command, env));
      continue;
    }
    std::vector<std::string> args{peer_bin, "--config", config, "--rank", std::to_string(r)};
    if (!rendezvous.empty()) args.insert(args.end(), {"--rendezvous", rendezvous});
    for (const char* f : {"epochs", "device", "slowdown", "min-step-ms"})
      if (flags.has(f)) args.insert(args.end(), {std::string("--") + f, flags.get_string(f)});
    if (flags.get_bool("resume")) args.push_back("--resume");
    std::vector<std::string> env{local_rank_env(r)};
    if (!live_env.empty()) env.push_back(live_env);
    children.push_back(spawn(r, std::move(args), env));
  }
  say("gossip-launch: started " + std::to_string(n) + " peers of " + config);
  const int failed = supervise(children);
  if (!rendezvous.empty()) fs::remove_all(rendezvous);
  if (flags.has("plot")) {
    g_recorder.write_svg(flags.get_string("plot"), config + ": " + std::to_string(n) + " peers");
    std::printf("gossip-launch: plot of %zu step lines written to %s\n", g_recorder.samples(),
                flags.get_string("plot").c_str());
  }
  return report(children, failed, cfg.algorithm.kind != gossip::peer::Algorithm::kNone);
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
