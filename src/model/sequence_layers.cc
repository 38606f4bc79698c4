// The language-model layers: embeddings, causal attention and the tied output projection.
#include "model/layers.h"

namespace gossip::model {

void Embedding::forward(const Pass& p) {
  p.k.embedding_forward(p.tokens, p.params + wte_, p.params + wpe_, p.value(y_), p.batch, context_, dim_);
}

void Embedding::backward(const Pass& p) {
  p.k.embedding_backward(p.tokens, p.grad(y_), p.grads + wte_, p.grads + wpe_, p.batch, context_, dim_);
}

void Embedding::init(float* host, std::mt19937_64& rng) const {
  init_params(host + wte_, size_t(vocab_) * dim_, {InitRule::kNormal, std_}, dim_, rng);
  init_params(host + wpe_, size_t(context_) * dim_, {InitRule::kNormal, std_}, dim_, rng);
}

void Attention::forward(const Pass& p) {
  const auto s = at_batch(shape_, p.batch);
  p.k.attention_forward(s, p.value(qkv_), p.value(y_), att_.get());
}

void Attention::backward(const Pass& p) {
  const auto s = at_batch(shape_, p.batch);
  if (float* dqkv = p.grad(qkv_)) p.k.attention_backward(s, p.value(qkv_), att_.get(), p.grad(y_), dqkv);
}

int TiedLogits::rows(const Pass& p) const { return p.batch * int(p.tensor(x_).per_sample / dim_); }

void TiedLogits::forward(const Pass& p) {
  p.backend.gemm(false, true, rows(p), vocab_, dim_, 1.0f, p.value(x_), p.params + wte_, 0.0f, p.value(y_));
}

void TiedLogits::backward(const Pass& p) {
  const int r = rows(p);
  const float* dy = p.grad(y_);
  // d wte [vocab][dim] += dyᵀ · x;  dx += dy · wte
  p.backend.gemm(true, false, vocab_, dim_, r, 1.0f, dy, p.value(x_), 1.0f, p.grads + wte_);
  if (float* dx = p.grad(x_)) p.backend.gemm(false, false, r, dim_, vocab_, 1.0f, dy, p.params + wte_, 1.0f, dx);
}

}  // namespace gossip::model
