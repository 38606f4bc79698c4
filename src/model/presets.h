// The models a run names in its YAML (`model:`): the MLP, two CNNs and a byte-level GPT.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/model.h"

namespace gossip::model {

enum class ModelKind { kMlp, kCnn, kGpt };  // YAML kind: mlp | cnn | gpt
enum class CnnNet { kLeNet, kResNet };      // YAML net: lenet | resnet

struct ModelConfig {
  ModelKind kind = ModelKind::kMlp;
  std::vector<int> hidden = {256, 256};  // mlp: hidden layer widths
  CnnNet net = CnnNet::kLeNet;           // cnn: which network
  int width = 32;                        // cnn resnet: channels of the first stage (then 2×, 4×)
  int groups = 8;                        // cnn resnet: GroupNorm groups (must divide width)
  int blocks = 1;                        // cnn resnet: residual blocks per stage
  bool zero_init_residual = false;       // cnn resnet: each block's last GroupNorm starts at γ = 0
  bool weight_standardization = false;   // cnn resnet: every convolution standardises its weights
  int layers = 4;                        // gpt: transformer blocks
  int heads = 4;                         // gpt: attention heads (must divide dim)
  int dim = 128;                         // gpt: model width
  int context = 128;                     // gpt: tokens per window
};

inline constexpr int kByteVocab = 256;  // a language model's tokens are bytes

// What an image/feature model is fed: rows of c·h·w floats with `classes` labels (an MLP
// flattens them; c = h = 1 for plain feature vectors).
struct InputShape {
  int c = 1, h = 1, w = 1;
  int classes = 2;
};

// The configured model on `backend` for batches of up to `max_batch` rows; throws gossip::Error
// (naming the field) when the configuration does not fit the input.
std::unique_ptr<Model> make_model(const ModelConfig& config, kernels::Backend& backend, const InputShape& input,
                                  int max_batch);

// The parameter count of that model, without a backend of the caller's (the CPU builds it at
// batch 1: a joiner announces the size before it loads data or picks a device).
size_t count_model_params(const ModelConfig& config, const InputShape& input);

// "mlp 784-256-256-10", "cnn lenet", "gpt 4x128 (4 heads, context 128)": for the log.
std::string describe(const ModelConfig& config);

}  // namespace gossip::model
