// CurveZMQ key files. A key pair file (NAME.key, mode 0600) holds "public: <Z85>" and
// "secret: <Z85>" lines; a public key file (NAME.pub) holds the "public:" line only. A run's key
// directory has peer-R.key / peer-R.pub for every rank, and every *.pub in it is allowed in.
#pragma once

#include <string>
#include <vector>

namespace gossip::peer {

struct KeyPair {
  std::string public_key;  // 40 Z85 characters
  std::string secret_key;
};

KeyPair generate_keypair();
// Writes base + ".key" (0600) and base + ".pub"; throws gossip::Error naming the file.
void write_keypair(const std::string& base, const KeyPair& keys);
KeyPair read_keypair(const std::string& path);
std::string read_public_key(const std::string& path);
// Public keys of every *.pub file in `dir`.
std::vector<std::string> read_allowed_keys(const std::string& dir);

}  // namespace gossip::peer
