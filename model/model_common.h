// Small pieces both models share around their forward pass.
#pragma once
#include <cstdint>
#include <vector>

#include "common/error.h"

// Every input id must index the embedding table.
inline void check_tokens(const int32_t* tokens, int N, int V) {
    for (int i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            fail("input token %d at position %d is outside the vocabulary [0, %d)\n"
                 "---> HINT: were the shards made with this model's tokenizer?", tokens[i], i, V);
}

// Mean of the per-token losses over non-ignored targets (0 when all are ignored).
template <class Backend>
float mean_loss(Backend& be, const float* dev_losses, const int32_t* host_targets, int N) {
    std::vector<float> losses(N);
    be.download(losses.data(), dev_losses, (size_t)N * sizeof(float));
    double sum = 0;
    int count = 0;
    for (int i = 0; i < N; i++)
        if (host_targets[i] >= 0) {
            sum += losses[i];
            count++;
        }
    return count ? (float)(sum / count) : 0.0f;
}

// host_out (N, V) = inp (N, C) @ head[:V]^T, for tests and sampling (training never forms all logits).
template <class Backend>
void head_logits(Backend& be, float* host_out, const typename Backend::act_t* inp,
                 const typename Backend::act_t* head, int N, int C, int V) {
    using act_t = typename Backend::act_t;
    size_t bytes = (size_t)N * V * sizeof(act_t);
    act_t* dev = (act_t*)be.alloc(bytes);
    be.matmul_forward(dev, inp, head, nullptr, N, C, V);
    be.download_f32(host_out, dev, (size_t)N * V);
    be.free(dev, bytes);
}
