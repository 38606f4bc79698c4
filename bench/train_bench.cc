// Local training throughput of one peer (no communication): forward + backward + optimiser step
// of a model on pre-generated random batches, with a fixed number of BLAS threads, as the peer
// trains: rows or text windows gathered in the backend's memory (model::DeviceRows, DeviceText)
// and the loss summed there (read once at the end). Prints one
// line: "gossip <model> batch <b> threads <t> samples/s <x>" (a GPT adds "tokens/s <y>"; a device
// backend adds its host<->device MB per step).
#include <chrono>
#include <cmath>
#include <memory>
#include <cstdio>
#include <random>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/flags.h"
#include "kernels/backend.h"
#include "model/dataset.h"
#include "model/device_data.h"
#include "model/optimizer.h"
#include "model/presets.h"

namespace {

gossip::model::ModelConfig model_config(const gossip::Flags& flags, gossip::model::InputShape* in) {
  using gossip::model::ModelKind;
  gossip::model::ModelConfig c;
  const std::string name = flags.get_string("model");
  *in = {1, 28, 28, 10};
  if (name == "mlp") {
    std::vector<int> dims;
    std::stringstream ss(flags.get_string("dims"));
    for (std::string d; std::getline(ss, d, ',');) dims.push_back(std::stoi(d));
    if (dims.size() < 2) throw gossip::Error("--dims", "needs at least an input and an output size");
    *in = {1, 1, dims.front(), dims.back()};
    c.hidden.assign(dims.begin() + 1, dims.end() - 1);
  } else if (name == "lenet" || name == "resnet") {
    c.kind = ModelKind::kCnn;
    c.net = name == "lenet" ? gossip::model::CnnNet::kLeNet : gossip::model::CnnNet::kResNet;
  } else if (name == "gpt") {
    c.kind = ModelKind::kGpt;
    c.layers = int(flags.get_int("layers"));
    c.heads = int(flags.get_int("heads"));
    c.dim = int(flags.get_int("dim"));
    c.context = int(flags.get_int("context"));
  } else {
    throw gossip::Error("--model", "'" + name + "' is not one of mlp, lenet, resnet, gpt");
  }
  return c;
}

int run(int argc, char** argv) {
  gossip::Flags flags("train_bench");
  flags.add_string("model", "mlp, lenet, resnet or gpt", "mlp");
  flags.add_string("dims", "mlp: layer sizes, comma separated", "784,256,256,10");
  flags.add_string("layers", "gpt: blocks", "4");
  flags.add_string("heads", "gpt: attention heads", "4");
  flags.add_string("dim", "gpt: width", "128");
  flags.add_string("context", "gpt: tokens per window", "128");
  flags.add_string("batch", "batch size", "64");
  flags.add_string("threads", "BLAS threads", "1");
  flags.add_string("steps", "timed steps", "500");
  flags.add_string("device", "cpu or cuda", "cpu");
  flags.add_bool("help", "print this help");
  if (!flags.parse_flags_only(argc, argv)) return 0;
  gossip::model::InputShape in;
  const gossip::model::ModelConfig config = model_config(flags, &in);
  const bool gpt = config.kind == gossip::model::ModelKind::kGpt;
  const int batch = static_cast<int>(flags.get_int("batch"));
  const int steps = static_cast<int>(flags.get_int("steps"));
  gossip::kernels::set_cpu_threads(static_cast<int>(flags.get_int("threads")));
  auto backend = gossip::kernels::make_backend(flags.get_string("device"));
  auto model = gossip::model::make_model(config, *backend, in, batch);
  model->init(1);
  model->set_loss_tally(true);
  gossip::model::OptimizerConfig oc;  // SGD with momentum 0.9; AdamW for the GPT
  if (gpt) oc.kind = gossip::model::OptimizerKind::kAdamW;
  auto optimizer = gossip::model::make_optimizer(*model, oc);
  constexpr int kBatches = 16;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  const size_t features = size_t(in.c) * in.h * in.w, per_row = gpt ? size_t(config.context) : 1;
  // The data in the backend's memory: image and feature rows (batch b is rows b·batch..), or a
  // random text whose consecutive windows make the GPT's batches.
  const int windows = kBatches * batch;
  gossip::model::Dataset rows;
  std::vector<uint8_t> text;
  std::unique_ptr<gossip::model::DeviceRows> row_data;
  std::unique_ptr<gossip::model::DeviceText> text_data;
  std::vector<int32_t> row_ids(windows);
  std::vector<int64_t> starts(windows);
  if (gpt) {
    for (size_t i = 0; i < size_t(windows) * (per_row + 1); ++i) text.push_back(uint8_t(rng() % 256));
    for (int w = 0; w < windows; ++w) starts[w] = int64_t(w) * int64_t(per_row + 1);
    text_data = std::make_unique<gossip::model::DeviceText>(*backend, text);
  } else {
    rows.rows = windows, rows.cols = int(features), rows.classes = in.classes;
    for (size_t i = 0; i < size_t(windows) * features; ++i) rows.floats.push_back(normal(rng));
    for (int r = 0; r < windows; ++r) rows.y.push_back(int32_t(rng() % in.classes));
    for (int r = 0; r < windows; ++r) row_ids[r] = r;
    row_data = std::make_unique<gossip::model::DeviceRows>(*backend, rows);
  }
  auto step = [&](int i) {
    const size_t first = size_t(i % kBatches) * batch;
    if (gpt)
      model->train_batch(text_data->gather(starts.data() + first, batch, config.context));
    else
      model->train_batch(row_data->gather(row_ids.data() + first, batch));
    optimizer->step(gpt ? 1e-4 : 0.01);
  };
  for (int i = 0; i < std::min(20, steps); ++i) step(i);  // warm-up
  backend->synchronize();
  const gossip::kernels::TransferStats before = backend->transfers();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step(i);
  const gossip::kernels::LossTally loss = backend->take_tally();  // (waits for the last step)
  backend->synchronize();
  if (!std::isfinite(loss.loss_sum)) throw gossip::Error("train_bench", "the training loss is not finite");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string name = config.kind == gossip::model::ModelKind::kMlp ? flags.get_string("dims") : flags.get_string("model");
  std::printf("gossip %s batch %d threads %s samples/s %.0f", name.c_str(), batch, flags.get_string("threads").c_str(),
              steps * double(batch) / secs);
  if (gpt) std::printf(" tokens/s %.0f", steps * double(batch) * per_row / secs);
  const gossip::kernels::TransferStats after = backend->transfers();
  if (after.host_to_device != before.host_to_device || after.device_to_host != before.device_to_host)
    std::printf(" h2d_MB_per_step %.3f d2h_MB_per_step %.3f", (after.host_to_device - before.host_to_device) / 1e6 / steps,
                (after.device_to_host - before.device_to_host) / 1e6 / steps);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gossip::guarded_main(argc, argv, run); }
