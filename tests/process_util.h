// Helpers for multi-process tests: temporary directories, YAML files and running a command with
// a hard time limit (coreutils timeout), capturing its output.
#pragma once

#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace gossip::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
};

// Whether this machine lets a process read memory with process_vm_readv (single copy; a seccomp
// profile may forbid the call).
inline bool process_vm_readv_works() {
  uint64_t from = 0x5eed, to = 0;
  iovec local{&to, sizeof(to)}, remote{&from, sizeof(from)};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == sizeof(to) && to == from;
}

inline std::string bin(const std::string& name) { return std::string(GOSSIP_BINARY_DIR) + "/bin/" + name; }

// Runs `command` through /bin/sh with stderr merged into stdout, killed after `limit_s`.
inline CommandResult run_command(const std::string& command, int limit_s = 120) {
  CommandResult r;
  const auto start = std::chrono::steady_clock::now();
  const std::string full = "timeout -s TERM -k 5 " + std::to_string(limit_s) + " " + command + " 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gossip-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// gossip-launch on `yaml` in the background (output to `log`) for tests that act on a live run.
class BackgroundRun {
 public:
  // `flags` go to gossip-launch after the YAML (e.g. "--slowdown 3").
  BackgroundRun(std::string yaml, std::string log, const std::string& flags = "")
      : yaml_(std::move(yaml)), log_(std::move(log)) {
    started_ = std::system((bin("gossip-launch") + " " + yaml_ + " " + flags + " > " + log_ + " 2>&1 &").c_str()) == 0;
  }
  ~BackgroundRun() { stop(); }
  // Peer 0's data endpoint from its "bound" line ("" if it does not come within 10 s).
  std::string peer0_endpoint() const {
    for (int i = 0; started_ && i < 200; ++i) {
      std::smatch m;
      const std::string text = read_file(log_);
      if (std::regex_search(text, m, std::regex(R"(\[peer 0\] bound (tcp://[0-9.:]+))"))) return m[1];
      ::usleep(50000);
    }
    return "";
  }
  std::string log() const { return read_file(log_); }
  // Ctrl-C to the launcher, then wait until none of its peers is left.
  void stop() {
    if (!started_) return;
    started_ = false;
    run_command("pkill -INT -f '[g]ossip-launch " + yaml_ + "'", 10);
    for (int i = 0; i < 100 && !run_command("pgrep -f '[g]ossip-peer --config " + yaml_ + "'", 10).output.empty(); ++i)
      ::usleep(100000);
  }

 private:
  std::string yaml_, log_;
  bool started_ = false;
};

// The text of `path` once it holds `text` (or after `limit_s`, whatever it holds then).
inline std::string wait_for_text(const std::string& path, const std::string& text, int limit_s) {
  for (int i = 0; i < limit_s * 10; ++i) {
    const std::string t = read_file(path);
    if (t.find(text) != std::string::npos) return t;
    ::usleep(100000);
  }
  return read_file(path);
}

// How many times `needle` occurs in `text`.
inline size_t count_of(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// All numbers captured by `pattern`'s first group, in order of appearance.
inline std::vector<double> capture_all(const std::string& text, const std::string& pattern) {
  std::vector<double> out;
  std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1].str()));
  return out;
}

// The distinct params_crc values in `text` (the final lines of peers): one model when size 1.
inline std::set<std::string> crcs_in(const std::string& text) {
  std::set<std::string> crcs;
  const std::regex crc(R"(params_crc ([0-9a-f]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), crc); it != std::sregex_iterator(); ++it)
    crcs.insert((*it)[1]);
  return crcs;
}

}  // namespace gossip::testing
