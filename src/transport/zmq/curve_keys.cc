#include "transport/zmq/curve_keys.h"

#include <sys/stat.h>
#include <zmq.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "common/error.h"

namespace gossip::peer {
namespace {

std::map<std::string, std::string> read_fields(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path, "cannot open key file (make keys with gossip-keygen)");
  std::map<std::string, std::string> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) throw Error(path + ":" + std::to_string(n), "expected 'public: KEY' or 'secret: KEY'");
    std::string key = line.substr(colon + 1);
    key.erase(0, key.find_first_not_of(' '));
    if (key.size() != 40) throw Error(path + ":" + std::to_string(n), "a Z85 key has 40 characters, got " + std::to_string(key.size()));
    uint8_t raw[32];
    if (!zmq_z85_decode(raw, key.c_str())) throw Error(path + ":" + std::to_string(n), "not a Z85 key");
    out[line.substr(0, colon)] = key;
  }
  return out;
}

}  // namespace

KeyPair generate_keypair() {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) throw Error("gossip-keygen", "this libzmq has no CURVE support");
  return {pub, sec};
}

void write_keypair(const std::string& base, const KeyPair& keys) {
  const std::string key_file = base + ".key", pub_file = base + ".pub";
  {
    std::ofstream out(key_file, std::ios::trunc);
    out << "# gossip CurveZMQ key pair: keep secret\npublic: " << keys.public_key << "\nsecret: " << keys.secret_key << "\n";
    if (!out) throw Error(key_file, "cannot write");
  }
  ::chmod(key_file.c_str(), 0600);
  std::ofstream out(pub_file, std::ios::trunc);
  out << "public: " << keys.public_key << "\n";
  if (!out) throw Error(pub_file, "cannot write");
}

KeyPair read_keypair(const std::string& path) {
  auto f = read_fields(path);
  if (!f.count("public") || !f.count("secret")) throw Error(path, "needs both 'public:' and 'secret:' lines");
  return {f["public"], f["secret"]};
}

std::string read_public_key(const std::string& path) {
  auto f = read_fields(path);
  if (!f.count("public")) throw Error(path, "needs a 'public:' line");
  return f["public"];
}

std::vector<std::string> read_allowed_keys(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> keys;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".pub") keys.push_back(read_public_key(e.path().string()));
  if (ec) throw Error(dir, "cannot read the key directory: " + ec.message());
  return keys;
}

}  // namespace gossip::peer
