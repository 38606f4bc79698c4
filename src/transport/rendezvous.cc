#include "transport/rendezvous.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/endpoint.h"
#include "common/error.h"
#include "common/log.h"

namespace gossip::peer {
namespace {

namespace fs = std::filesystem;

struct Published {
  std::string endpoint, run, host;
  long pid = 0;
};

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

std::optional<Published> parse(const std::string& path) {
  std::ifstream in(path);
  Published p;
  if (!(in >> p.endpoint)) return std::nullopt;
  // An endpoint is all that files of older versions hold: then there is nothing more to check.
  for (std::string word; in >> word;) {
    if (word == "run") in >> p.run;
    else if (word == "pid") in >> p.pid;
    else if (word == "host") in >> p.host;
    else return std::nullopt;
  }
  static const std::regex kEndpoint(R"(tcp://[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5})");
  if (!std::regex_match(p.endpoint, kEndpoint)) return std::nullopt;
  return p;
}

bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// Why `p` (read from `path`) cannot be this run's, or "" when it may be.
std::string staleness(const Published& p, const std::string& path, const std::string& run_id) {
  if (!run_id.empty() && !p.run.empty() && p.run != "-" && p.run != run_id)
    return path + " is of run " + escape_for_log(p.run) + ", not this run's " + run_id;
  if (p.host == this_host() && p.pid > 0 && !process_alive(p.pid))
    return path + " was written by process " + std::to_string(p.pid) + ", which is gone (an earlier run?)";
  return "";
}

}  // namespace

std::string rendezvous_path(const std::string& dir, int id) { return peer_path(dir, id); }

void publish_endpoint(const std::string& dir, int id, const std::string& endpoint, const std::string& run_id) {
  const std::string path = rendezvous_path(dir, id), tmp = path + ".tmp." + std::to_string(::getpid());
  if (std::optional<Published> old = parse(path)) {
    if (old->host == this_host() && old->pid != ::getpid() && process_alive(old->pid) &&
        (run_id.empty() || old->run == run_id || old->run.empty() || old->run == "-"))
      throw Error(path, "belongs to process " + std::to_string(old->pid) + " on this host, which is still running (run " +
                            escape_for_log(old->run) + "): another run of peer " + std::to_string(id) +
                            " uses this rendezvous directory; give each run its own, or stop that one");
  }
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << endpoint << "\nrun " << (run_id.empty() ? "-" : run_id) << "\npid " << ::getpid() << "\nhost " << this_host()
        << "\n";
    if (!out) throw Error(tmp, "cannot write the rendezvous file");
  }
  fs::rename(tmp, path);  // atomic: readers see the whole file or the old one
}

std::optional<std::string> read_published(const std::string& dir, int id, const std::string& run_id,
                                          std::string* stale) {
  const std::string path = rendezvous_path(dir, id);
  std::optional<Published> p = parse(path);
  if (!p) return std::nullopt;
  const std::string why = staleness(*p, path, run_id);
  if (!why.empty()) {
    if (stale) *stale = why;
    return std::nullopt;
  }
  return p->endpoint;
}

std::string run_id_from_environment() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v && *v ? v : "";
  };
  std::string id = env("GOSSIP_RUN_ID");
  if (id.empty() && !env("SLURM_JOB_ID").empty())
    id = "slurm-" + env("SLURM_JOB_ID") + "." + (env("SLURM_STEP_ID").empty() ? "0" : env("SLURM_STEP_ID"));
  if (id.empty() && !env("PMIX_NAMESPACE").empty()) id = "pmix-" + env("PMIX_NAMESPACE");
  if (id.empty() && !env("OMPI_MCA_ess_base_jobid").empty()) id = "ompi-" + env("OMPI_MCA_ess_base_jobid");
  // One token, printable: it is written into a file and compared as a word.
  for (char& c : id)
    if (c <= ' ' || c > '~') c = '_';
  return id;
}

}  // namespace gossip::peer
