// The data:, model: and optimizer: sections of a run's YAML, and one peer's overrides of them.
#include <cstdlib>

#include "common/error.h"
#include "common/log.h"

#include "peer/map_reader.h"
#include "model/text_corpus.h"

namespace gossip::peer::config_detail {

void parse_data(MapReader& top, RunConfig& cfg) {
  if (!top.has("data")) return;
  MapReader d(top.get("data"), top.file(), "data");
  DataConfig& c = cfg.data;
  d.read_choice("dataset", c.dataset,
                {{"fashion-mnist", Dataset::kFashionMnist}, {"synthetic", Dataset::kSynthetic}, {"text", Dataset::kText}});
  if (c.dataset == Dataset::kText) c.dir = model::kFortunesDir;
  d.read_string("dir", c.dir);
  if (d.has("files")) {
    const YAML::Node f = d.get("files");
    if (c.dataset != Dataset::kText) d.fail(f, "is for dataset text", "files");
    if (d.has("dir")) d.fail(f, "give either dir or files, not both", "files");
    if (!f.IsSequence() || f.size() == 0) d.fail(f, "expected a non-empty list of text files", "files");
    for (size_t i = 0; i < f.size(); ++i) {
      if (!f[i].IsScalar()) d.fail(f[i], "expected a file name", "files");
      c.text_files.push_back(f[i].Scalar());
    }
  }
  d.read_choice("sharding", c.sharding, {{"iid", Sharding::kIid}, {"dirichlet", Sharding::kDirichlet}});
  d.read_number("dirichlet_alpha", c.dirichlet_alpha, 1e-6, 1e6);
  d.read_number("limit_train", c.limit_train, 0, 1e12);
  d.read_string("cache_dir", c.cache_dir);
  if (c.cache_dir == "none") c.cache_dir.clear();
  if (const char* home = std::getenv("HOME"); home && c.cache_dir.rfind("~/", 0) == 0)
    c.cache_dir = home + c.cache_dir.substr(1);
  if (d.has("synthetic")) {
    MapReader s(d.get("synthetic"), top.file(), "data.synthetic");
    s.read_number("train", c.synthetic_train, 1, 1e8);
    s.read_number("test", c.synthetic_test, 1, 1e8);
    s.read_number("dims", c.synthetic_dims, 1, 1e6);
    s.read_number("classes", c.synthetic_classes, 2, 1e5);
    s.read_number("noise", c.synthetic_noise, 0, 1e6);
    s.finish();
  }
  d.finish();
}

namespace {

void read_widths(MapReader& m, std::vector<int>& out) {
  YAML::Node h = m.get("hidden");
  if (!h.IsSequence()) m.fail(h, "expected a list of layer widths", "hidden");
  out.clear();
  for (size_t i = 0; i < h.size(); ++i) {
    int w = 0;
    try {
      w = h[i].as<int>();
    } catch (const YAML::Exception&) {
      m.fail(h[i], "layer widths must be integers", "hidden");
    }
    if (w <= 0 || w > (1 << 20)) m.fail(h[i], "layer width " + std::to_string(w) + " out of range", "hidden");
    out.push_back(w);
  }
}

// model: {kind: mlp, hidden: [..]}
//      | {kind: cnn, net: lenet | resnet, width, groups, blocks, zero_init_residual, weight_standardization}
//      | {kind: gpt, layers, heads, dim, context}; a field of another kind is an error.
void parse_model(MapReader& top, model::ModelConfig& c) {
  MapReader m(top.get("model"), top.file(), "model");
  m.read_choice("kind", c.kind, {{"mlp", model::ModelKind::kMlp}, {"cnn", model::ModelKind::kCnn},
                                 {"gpt", model::ModelKind::kGpt}});
  const auto only = [&](const char* key, model::ModelKind kind, const char* kind_name) {
    if (m.has(key) && c.kind != kind)
      m.fail(m.get(key), std::string("is for kind ") + kind_name + " models", key);
    return m.has(key);
  };
  if (only("hidden", model::ModelKind::kMlp, "mlp")) read_widths(m, c.hidden);
  if (only("net", model::ModelKind::kCnn, "cnn"))
    m.read_choice("net", c.net, {{"lenet", model::CnnNet::kLeNet}, {"resnet", model::CnnNet::kResNet}});
  if (only("width", model::ModelKind::kCnn, "cnn")) m.read_number("width", c.width, 1, 4096);
  if (only("groups", model::ModelKind::kCnn, "cnn")) m.read_number("groups", c.groups, 1, 4096);
  if (only("blocks", model::ModelKind::kCnn, "cnn")) m.read_number("blocks", c.blocks, 1, 64);
  if (only("zero_init_residual", model::ModelKind::kCnn, "cnn"))
    m.read("zero_init_residual", c.zero_init_residual, "true or false");
  if (only("weight_standardization", model::ModelKind::kCnn, "cnn"))
    m.read("weight_standardization", c.weight_standardization, "true or false");
  if (c.net == model::CnnNet::kResNet && c.width % c.groups)
    m.fail(m.has("groups") ? m.get("groups") : m.get("net"), "groups (" + std::to_string(c.groups) +
                                                                 ") must divide width (" + std::to_string(c.width) + ")",
           "groups");
  if (only("layers", model::ModelKind::kGpt, "gpt")) m.read_number("layers", c.layers, 1, 1024);
  if (only("heads", model::ModelKind::kGpt, "gpt")) m.read_number("heads", c.heads, 1, 1024);
  if (only("dim", model::ModelKind::kGpt, "gpt")) m.read_number("dim", c.dim, 1, 1 << 16);
  if (only("context", model::ModelKind::kGpt, "gpt")) m.read_number("context", c.context, 1, 1 << 16);
  if (c.dim % c.heads)
    m.fail(m.has("heads") ? m.get("heads") : m.get("dim"),
           std::to_string(c.heads) + " heads do not divide dim " + std::to_string(c.dim), "heads");
  m.finish();
}

}  // namespace

void parse_train(MapReader& top, RunConfig& cfg) {
  TrainConfig& t = cfg.train;
  if (top.has("model")) parse_model(top, t.model);
  if (!top.has("optimizer")) return;
  MapReader o(top.get("optimizer"), top.file(), "optimizer");
  o.read_number("lr", t.schedule.base_lr, 0, 1e3);
  o.read_choice("kind", t.optimizer.kind, {{"sgd", model::OptimizerKind::kSgd}, {"adamw", model::OptimizerKind::kAdamW}});
  o.read_number("momentum", t.optimizer.momentum, 0, 0.9999);
  o.read("nesterov", t.optimizer.nesterov, "true or false");
  o.read("quasi_global_momentum", t.optimizer.quasi_global, "true or false");
  o.read_number("weight_decay", t.optimizer.weight_decay, 0, 1);
  o.read_number("beta1", t.optimizer.beta1, 0, 0.9999999);
  o.read_number("beta2", t.optimizer.beta2, 0, 0.9999999);
  o.read_number("eps", t.optimizer.eps, 1e-30, 1);
  o.read_number("clip_norm", t.optimizer.clip_norm, 0, 1e30);
  o.read_number("label_smoothing", t.optimizer.label_smoothing, 0, 0.999);
  o.read_number("batch", t.batch, 1, 1 << 16);
  o.read_number("epochs", t.epochs, 0, 1e6);
  o.read_number("steps", t.steps, 0, 1e12);
  if (o.has("schedule")) {
    YAML::Node s = o.get("schedule");
    std::string kind = "constant";
    if (s.IsScalar()) {
      kind = s.Scalar();
    } else {
      MapReader sr(s, top.file(), "optimizer.schedule");
      sr.read_string("kind", kind);
      sr.read_number("warmup_steps", t.schedule.warmup_steps, 0, 1e12);
      sr.read_number("step_every", t.schedule.step_every, 0, 1e12);
      sr.read_number("gamma", t.schedule.gamma, 0, 1);
      sr.read_number("min_lr", t.schedule.min_lr, 0, 1e3);
      sr.finish();
    }
    const std::optional<model::ScheduleKind> parsed = model::parse_schedule_kind(kind);
    if (!parsed) o.fail(s, "'" + kind + "' is not one of constant, step, cosine", "schedule");
    t.schedule.kind = *parsed;
  }
  if (t.optimizer.quasi_global && t.optimizer.kind != model::OptimizerKind::kSgd)
    o.fail(o.get("quasi_global_momentum"), "is for kind: sgd (AdamW has no heavy-ball momentum to rebuild)",
           "quasi_global_momentum");
  if (t.optimizer.quasi_global && t.optimizer.momentum <= 0)
    o.fail(o.get("quasi_global_momentum"), "needs momentum > 0", "quasi_global_momentum");
  o.finish();
}

}  // namespace gossip::peer::config_detail

namespace gossip::peer {

void apply_overrides(RunConfig& cfg, const ConfigOverrides& o, const std::string& who) {
  if (!o.device.empty()) {
    const std::optional<kernels::Device> device = kernels::parse_device(o.device);
    if (!device) throw Error(who, "device must be auto, cpu or cuda, not '" + escape_for_log(o.device) + "'");
    cfg.device = *device;
  }
  if (o.epochs) {
    if (!(*o.epochs >= 0 && *o.epochs <= 1e6))  // optimizer.epochs' own range
      throw Error(who, "epochs must be between 0 and 1000000, not " + number_text(*o.epochs));
    cfg.train.epochs = *o.epochs;
  }
  if (!(o.slowdown >= 1 && o.slowdown <= 1000))
    throw Error(who, "slowdown must be between 1 and 1000, not " + number_text(o.slowdown));
  cfg.slowdown = o.slowdown;
  if (!(o.min_step_ms >= 0 && o.min_step_ms <= 60000))
    throw Error(who, "min_step_ms must be between 0 and 60000 (milliseconds), not " + number_text(o.min_step_ms));
  cfg.min_step_ms = o.min_step_ms;
}

}  // namespace gossip::peer
