#include "common/flags.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/error.h"

namespace gossip {

void Flags::add_string(const std::string& name, const std::string& help,
                       std::optional<std::string> def) {
  specs_[name] = Spec{help, false, std::move(def)};
}

void Flags::add_bool(const std::string& name, const std::string& help) {
  specs_[name] = Spec{help, true, std::nullopt};
}

const Flags::Spec& Flags::spec(const std::string& name) const {
  auto it = specs_.find(name);
  if (it == specs_.end()) throw Error(program_, "internal: flag --" + name + " was never declared");
  return it->second;
}

void Flags::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = specs_.find(name);
    if (it == specs_.end()) throw Error(program_, "unknown flag --" + name + "\n" + usage());
    if (it->second.is_bool) {
      if (value && *value != "true" && *value != "false")
        throw Error(program_, "flag --" + name + " takes no value (got '" + *value + "')");
      values_[name] = value.value_or("true");
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) throw Error(program_, "flag --" + name + " needs a value");
      value = argv[++i];
    }
    values_[name] = *value;
  }
}

bool Flags::has(const std::string& name) const {
  spec(name);
  return values_.count(name) > 0;
}

std::string Flags::get_string(const std::string& name) const {
  const Spec& s = spec(name);
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (s.def) return *s.def;
  throw Error(program_, "missing required flag --" + name);
}

int64_t Flags::get_int(const std::string& name) const {
  std::string v = get_string(name);
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') throw Error(program_, "flag --" + name + " wants an integer, got '" + v + "'");
  return x;
}

double Flags::get_double(const std::string& name) const {
  std::string v = get_string(name);
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') throw Error(program_, "flag --" + name + " wants a number, got '" + v + "'");
  return x;
}

bool Flags::get_bool(const std::string& name) const {
  if (!spec(name).is_bool) throw Error(program_, "internal: --" + name + " is not a boolean flag");
  auto it = values_.find(name);
  return it != values_.end() && it->second == "true";
}

std::string Flags::usage() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags]\n";
  for (const auto& [name, s] : specs_) {
    out << "  --" << name << (s.is_bool ? "" : " VALUE") << "  " << s.help;
    if (s.def) out << " (default " << *s.def << ")";
    out << "\n";
  }
  return out.str();
}

bool Flags::parse_flags_only(int argc, const char* const* argv) {
  parse(argc, argv);
  if (get_bool("help")) {
    std::fputs(usage().c_str(), stdout);
    return false;
  }
  if (!positional_.empty()) throw Error(program_, "unexpected argument '" + positional_[0] + "'\n" + usage());
  return true;
}

}  // namespace gossip
