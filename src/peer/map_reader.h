// The YAML reader behind parse_config (config.cc, config_train.cc): one mapping at a time, every
// error naming the file, line and dotted field; keys never asked for are reported as unknown.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "common/error.h"
#include "peer/config.h"

namespace gossip::peer::config_detail {

// Reads one YAML mapping, remembering which keys were consumed so that leftovers (typos) are
// reported. `path` is the dotted field name used in messages.
class MapReader {
 public:
  MapReader(const YAML::Node& node, std::string file, std::string path)
      : node_(node), file_(std::move(file)), path_(std::move(path)) {
    if (!node_.IsMap()) fail(node_, "expected a mapping");
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& what, const std::string& key = "") const {
    std::string field = key.empty() ? path_ : (path_.empty() ? key : path_ + "." + key);
    std::string where = file_;
    if (at.Mark().line >= 0) where += ":" + std::to_string(at.Mark().line + 1);
    throw Error(where, (field.empty() ? "" : "field '" + field + "': ") + what);
  }

  bool has(const std::string& key) {
    used_.insert(key);
    return node_[key].IsDefined() && !node_[key].IsNull();
  }
  YAML::Node get(const std::string& key) {
    used_.insert(key);
    return node_[key];
  }
  std::string child_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& file() const { return file_; }

  template <typename T>
  void read(const std::string& key, T& out, const char* type_name) {
    if (!has(key)) return;
    YAML::Node v = get(key);
    if (!v.IsScalar()) fail(v, std::string("expected ") + type_name, key);
    try {
      out = v.as<T>();
    } catch (const YAML::Exception&) {
      fail(v, std::string("expected ") + type_name + ", got '" + v.Scalar() + "'", key);
    }
  }
  void read_string(const std::string& key, std::string& out) { read(key, out, "a string"); }
  // A string that must be one of `choices` (YAML name, value): the value goes to `out`.
  template <typename E>
  void read_choice(const std::string& key, E& out, std::initializer_list<std::pair<const char*, E>> choices) {
    if (!has(key)) return;
    std::string name;
    read(key, name, "a string");
    std::string list;
    for (const auto& [choice, value] : choices) {
      if (name == choice) {
        out = value;
        return;
      }
      list += (list.empty() ? "" : ", ") + std::string(choice);
    }
    fail(get(key), "'" + name + "' is not one of " + list, key);
  }
  template <typename T>
  void read_number(const std::string& key, T& out, double min, double max) {
    read(key, out, "a number");
    if (has(key) && !std::isfinite(static_cast<double>(out))) fail(get(key), "'" + get(key).Scalar() + "' is not a finite number", key);
    if (has(key) && (static_cast<double>(out) < min || static_cast<double>(out) > max)) {
      std::ostringstream msg;
      msg << "value " << out << " is outside [" << min << ", " << max << "]";
      fail(get(key), msg.str(), key);
    }
  }

  // Every key present but never asked for is an error (catches typos like 'learning_rte').
  void finish() {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string key = it->first.as<std::string>();
      if (!used_.count(key)) fail(it->first, "unknown field", key);
    }
  }

 private:
  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::set<std::string> used_;
};

// The data: and model:/optimizer: sections (config_train.cc).
void parse_data(MapReader& top, RunConfig& cfg);
void parse_train(MapReader& top, RunConfig& cfg);

}  // namespace gossip::peer::config_detail
