// The transformer's six activation sites (GPT-2 and LLaMA alike): which tensors they are, how --recompute turns
// some of them into a recomputed slot, and which of them share a transient buffer. The site mechanism itself
// (ActSite: fwd / save / restore / weight_grad) is prac/site.h.
#pragma once
#include <vector>

#include "common/error.h"
#include "prac/site.h"

// Both models list their six sites in this order (model/gpt2.h, model/llama.h): the residual stream, the
// attention norm's output (q/k/v's input), the residual after attention, the MLP norm's output (the MLP's input),
// the MLP's hidden pre-activation, and the activation output (the down projection's input).
enum SiteIndex { SITE_RESID, SITE_LN1, SITE_RESID_MID, SITE_LN2, SITE_FCH, SITE_ACT_OUT };

// --recompute: 0 off; 1 the MLP activation output (GeLU / SwiGLU, site `act`) is recomputed in backward from
// the `mlp_in` site; 2 also the norm outputs (ln1, ln2: one shared (N, C) slot) from the resid / resid_mid
// sites. Recomputed sites are not compressed. The norm's recompute also rewrites the layer's saved norm
// statistics (the kernel always writes them); from the exact input these are the same bits, but from a PRAC
// reconstruction they would change the norm backward, so recompute 2 refuses compressed resid / resid_mid
// (recompute 1 is fine with a compressed mlp_in: the activation backward uses that reconstruction anyway).
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
                 "(site %s)\n---> HINT: use --recompute 1, or compress only the linear sites (--prac-classes linear)",
                 sites[resid].compressed() ? sites[resid].name.c_str() : sites[resid_mid].name.c_str());
        set(ln1, false);
        set(ln2, true);
    }
}

// Hands each site its shared transient buffer, the factored-gradient scratch and the fp8 storage's block scratch
// once the arena is laid out.
template <class Backend>
void wire_sites(std::vector<ActSite<Backend>>& sites, typename Backend::act_t* t_resid, typename Backend::act_t* t_ln,
                typename Backend::act_t* t_mlp_in, typename Backend::act_t* t_mlp_out, float* prac_tmp,
                typename Backend::act_t* fp8_block) {
    sites[SITE_RESID].transient = sites[SITE_RESID_MID].transient = t_resid;
    sites[SITE_LN1].transient = sites[SITE_LN2].transient = t_ln;
    sites[SITE_FCH].transient = t_mlp_in;
    sites[SITE_ACT_OUT].transient = t_mlp_out;
    for (ActSite<Backend>& s : sites) {
        s.wgrad_tmp = prac_tmp;
        s.fp8_block = fp8_block;  // --prac-storage fp8 (prac/site.h fp8_block_scratch)
    }
    if (sites[SITE_LN2].borrowed) sites[SITE_LN2].full = sites[SITE_LN1].full;  // recompute 2: one (N, C) slot for both norms
}
