// The transformer's activation sites (six in GPT-2, seven in LLaMA): which tensors they are, how --recompute
// turns some of them into a recomputed slot, and which of them share a transient buffer or live in backward
// scratch. The site mechanism itself (ActSite: fwd / save / restore / weight_grad) is prac/site.h.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "prac/site.h"

// Both models list their sites in this order (model/gpt2.h, model/llama.h): the residual stream, the
// attention norm's output (q/k/v's input), the residual after attention, the MLP norm's output (the MLP's input),
// the MLP's hidden pre-activation (LLaMA: its gate half), and the activation output (the down projection's
// input); LLaMA then has the up half of its hidden pre-activation, a site of its own (SITE_FCH_UP, last so that
// the shared indices stay the same in both models).
enum SiteIndex { SITE_RESID, SITE_LN1, SITE_RESID_MID, SITE_LN2, SITE_FCH, SITE_ACT_OUT, SITE_FCH_UP /* LLaMA */ };

// --recompute: 0 off; 1 the MLP activation output (GeLU / SwiGLU, site `act`) is recomputed in backward from
// the `mlp_in` site; 2 also the norm outputs (ln1, ln2: one shared (N, C) slot) from the resid / resid_mid
// sites. Recomputed sites are not compressed. The norm's recompute also rewrites the layer's saved norm
// statistics (the kernel always writes them); from the exact input these are the same bits, but from a PRAC
// reconstruction they would change the norm backward, so recompute 2 refuses compressed resid / resid_mid
// (recompute 1 is allowed with a compressed mlp_in: the activation backward uses that reconstruction anyway, but the
// recomputed output f(X~) also feeds the down projection's weight gradient, which is then biased, f being nonlinear:
// README says so).
// What backward recomputes instead of saving: --recompute's level (above), and --recompute-attention: the
// attention output O rebuilt from the exact q, k, v and LSE by one more attention forward per layer in backward.
// The arena then holds one layer's O, (N, C), instead of all L; the gradients are the same bits, as the attention
// forward is deterministic (the CPU twin and our kernels are; test Recompute.*AttentionOut*).
struct Recompute {
    int level = 0;
    bool attention_out = false;
    Recompute(int level_ = 0, bool attention_out_ = false) : level(level_), attention_out(attention_out_) {}
};

template <class Backend>
void apply_recompute(std::vector<ActSite<Backend>>& sites, int recompute, int act, int ln1, int ln2, int resid,
                     int resid_mid) {
    CHECK_USER(recompute >= 0 && recompute <= 2, "--recompute must be 0, 1 or 2 (got %d)", recompute);
    auto set = [&](int i, bool borrowed) {
        ActSite<Backend>& s = sites[i];
        s.recompute = true;
        s.borrowed = borrowed;
        s.stack = 1;
        s.dims = SiteDims();
    };
    if (recompute >= 1) set(act, false);
    if (recompute >= 2) {
        if (sites[resid].compressed() || sites[resid_mid].compressed())
            fail("--recompute 2 recomputes the norm outputs from the residual stream, which PRAC compresses here "
                 "(site %s)\n---> HINT: use --recompute 1 (--recompute 2 also recomputes every linear site, so PRAC "
                 "would have nothing left to compress), or --prac none",
                 sites[resid].compressed() ? sites[resid].name.c_str() : sites[resid_mid].name.c_str());
        set(ln1, false);
        set(ln2, true);
    }
}

// Transient buffers in backward scratch (docs/DESIGN.md section 4.1). A compressed site's full tensor lives in a
// transient buffer only while forward computes and compresses it, and (nonlinear sites) while backward uses its
// reconstruction. Liveness, from the models' forward and backward:
//   t_ln      ln1 / ln2 are linear sites: backward takes their factored dW from X·P and never restores them, so
//             t_ln is live in forward only, where dresid is unused (backward zeroes it before its first use):
//             t_ln lives in dresid (N, C). Recompute 2 recomputes ln1 / ln2 into their own slot (not compressed).
//   t_mlp_out the activation output (fch_gelu / fch_act) is a linear site too: live in forward only, where the
//             backward scratch of the MLP is unused: GPT-2 scratch_wide (N, max(3C, F)), LLaMA scratch_ff (N, F).
//   t_mlp_in  LLaMA's gate | up (two (N, F) blocks): reconstructed in backward just before the SwiGLU backward,
//             which runs in place (dgate over gate, dup over up; kernels/swiglu.h) into scratch_wide
//             (N, max(3C, 2F)), and nothing writes scratch_wide in between (the down projection's gradient goes
//             to scratch_ff): lives in scratch_wide. GPT-2's GeLU input cannot: its backward reads it together
//             with d(GeLU output), which occupies scratch_wide, and no other free scratch is (N, F) wide.
//   t_resid   resid / resid_mid are reconstructed in backward while dresid and scratch_btc hold the gradients
//             being propagated: a buffer of its own.
// Forward writes none of these scratch buffers (the fused classifier leaves dlnf in scratch_btc, not aliased),
// every backward use overwrites before reading, and --recompute-attention's O has its own buffer.
// Model::alias_transients (default on) chooses this; off gives every transient its own buffer (the bitwise tests).

// Hands each site its shared transient buffer, the factored-gradient scratch and the fp8 storage's block scratch
// once the arena is laid out. LLaMA's up site (sites beyond SITE_ACT_OUT) takes t_mlp_up. With fp8 storage a linear
// site's weight_grad dequantizes X·P (N, r) into ActSite::fp8_wgrad, a buffer dead at that point of backward: the
// site's transient, except for the ln1 / ln2 slots, which take `dead_at_norm_wgrad`: in GPT-2 and LLaMA, whose t_ln
// lives in dresid, the norm-branch gradient buffer scratch_btc (N, C) (consumed by the attention / MLP backward just
// before and written by the input gradient just after; r <= C); RoBERTa's t_ln is its own buffer, dead in backward.
template <class Backend>
void wire_sites(std::vector<ActSite<Backend>>& sites, typename Backend::act_t* t_resid, typename Backend::act_t* t_ln,
                typename Backend::act_t* t_mlp_in, typename Backend::act_t* t_mlp_out, float* prac_tmp,
                typename Backend::act_t* fp8_block, typename Backend::act_t* dead_at_norm_wgrad,
                typename Backend::act_t* t_mlp_up = nullptr) {
    sites[SITE_RESID].transient = sites[SITE_RESID_MID].transient = t_resid;
    sites[SITE_LN1].transient = sites[SITE_LN2].transient = t_ln;
    sites[SITE_FCH].transient = t_mlp_in;
    sites[SITE_ACT_OUT].transient = t_mlp_out;
    if ((int)sites.size() > SITE_FCH_UP) sites[SITE_FCH_UP].transient = t_mlp_up;
    for (ActSite<Backend>& s : sites) {
        s.wgrad_tmp = prac_tmp;
        s.fp8_block = fp8_block;  // --prac-storage fp8 (prac/site.h fp8_block_scratch)
        s.fp8_wgrad = s.transient;
    }
    sites[SITE_LN1].fp8_wgrad = sites[SITE_LN2].fp8_wgrad = dead_at_norm_wgrad;
    if (sites[SITE_LN2].borrowed) sites[SITE_LN2].full = sites[SITE_LN1].full;  // recompute 2: one (N, C) slot for both norms
}

// A PRAC mode whose classes and recompute level leave no site to compress would train the baseline under PRAC's
// name (and announce fp8 storage): the trainers, their --plan and finetune_roberta refuse it, naming their flags'
// values. `compressed`: how many sites PRAC compresses.
inline void check_prac_compresses(int compressed, PracMode mode, const std::string& prac, const std::string& classes,
                                  int recompute) {
    if (mode == PracMode::NONE || compressed > 0) return;
    fail("--prac %s compresses nothing here: with --prac-classes %s and --recompute %d every activation site is "
         "recomputed in backward or outside those classes\n---> HINT: add the other class (--prac-classes "
         "linear,nonlinear), lower --recompute, or use --prac none", prac.c_str(), classes.c_str(), recompute);
}
template <class Site>
int compressed_sites(const std::vector<Site>& sites) {
    return (int)std::count_if(sites.begin(), sites.end(), [](const Site& s) { return s.compressed(); });
}
