// Local training throughput of one peer (no communication): samples/s of forward + backward +
// SGD-momentum step for an MLP, on pre-generated random batches, with a fixed number of BLAS
// threads. Prints one line: "gossip <dims> batch <b> threads <t> samples/s <x>".
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <vector>

#include "common/flags.h"
#include "kernels/backend.h"
#include "model/mlp.h"
#include "model/optimizer.h"

int main(int argc, char** argv) {
  gossip::Flags flags("train_bench");
  flags.add_string("dims", "layer sizes, comma separated", "784,256,256,10");
  flags.add_string("batch", "batch size", "64");
  flags.add_string("threads", "BLAS threads", "1");
  flags.add_string("steps", "timed steps", "500");
  flags.add_string("device", "cpu or cuda", "cpu");
  flags.parse(argc, argv);
  std::vector<int> dims;
  std::stringstream ss(flags.get_string("dims"));
  for (std::string d; std::getline(ss, d, ',');) dims.push_back(std::stoi(d));
  const int batch = static_cast<int>(flags.get_int("batch"));
  const int steps = static_cast<int>(flags.get_int("steps"));
  gossip::kernels::set_cpu_threads(static_cast<int>(flags.get_int("threads")));
  auto backend = gossip::kernels::make_backend(flags.get_string("device"));
  gossip::model::Mlp model(*backend, dims, batch);
  model.init(1);
  gossip::model::Sgd sgd(model, {0.9, false, 0.0});
  constexpr int kBatches = 16;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> xs(kBatches, std::vector<float>(size_t(batch) * dims[0]));
  std::vector<std::vector<int32_t>> ys(kBatches, std::vector<int32_t>(batch));
  for (int b = 0; b < kBatches; ++b) {
    for (float& v : xs[b]) v = normal(rng);
    for (int32_t& y : ys[b]) y = static_cast<int32_t>(rng() % dims.back());
  }
  auto step = [&](int i) {
    model.train_batch(xs[i % kBatches].data(), ys[i % kBatches].data(), batch);
    sgd.step(0.01);
  };
  for (int i = 0; i < 20; ++i) step(i);  // warm-up
  backend->synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step(i);
  backend->synchronize();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("gossip %s batch %d threads %s samples/s %.0f\n", flags.get_string("dims").c_str(), batch,
              flags.get_string("threads").c_str(), steps * double(batch) / secs);
  return 0;
}
