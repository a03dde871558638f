// Router-piloted prefetch (issue #31 item 5): before layer l's attention, l's router on the residual so far (its
// input, the output of l-1) guesses l's experts, and their reads start under the attention. Asked for only by a
// streamed layer under `--expert-prefetch pilot` (Moe.prefetch). Stateless: it borrows st.xb, st.z and the routing
// scratch, which the attention and the FFN overwrite before reading, so the forward's results do not change.
import type { Config } from "../model/config.ts";
import type { Layer } from "../model/weights.ts";
import { moeRouteGrouped, rmsnorm } from "../native/hb.ts";
import { mm } from "./mat.ts";
import type { RunState } from "./state.ts";

/** l.moe.prefetch(union over rows of top-K(router · RMS(x [S,D]; l.post_norm))): x is the layer's input */
export function pilot(cfg: Config, st: RunState, l: Layer, x: Float32Array, S: number): void {
  const w = l.moe!, E = cfg.n_routed_experts;
  rmsnorm(x, l.post_norm, st.xb, S, cfg.hidden_size, cfg.rms_norm_eps);
  mm(w.router, st.xb, S, st.z, true); // z [S,E] = router [E,D] · xb [S,D]
  const nu = moeRouteGrouped(S, E, cfg.num_experts_per_tok, st.z, w.bias, cfg.n_group, cfg.topk_group, cfg.norm_topk_prob,
    cfg.routed_scaling_factor, st.mexp, st.mgate, st.moff, st.mrows, st.mgates, st.muni, st.mcnt); // as moe.ts routes
  w.prefetch!(st.muni.subarray(0, nu));
}
