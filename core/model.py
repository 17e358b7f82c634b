"""Decoder-only transformer shapes, from Hugging Face `config.json` fields.

A model spec uses the keys HF configs use (`hidden_size`, `num_hidden_layers`, ...), plus:
- `ffn_gated` (default true): a gated FFN (SwiGLU/GeGLU) has three d x d_ff matrices, a
  plain one two;
- `lm_head` (default true): whether the output projection runs; `vocab_size = 0` is a bare
  stack of layers with no embedding and no head;
- `norms_per_layer` (default 2; Gemma-2 has 4, the seed's reference model 0): RMSNorm
  weight vectors of `hidden_size` each, plus one final norm when there are any;
- `qkv_bias` (Qwen2 has it); HF's `attention_bias` biases q, k, v and o;
- `qk_norm` (Qwen3: RMSNorms of head_dim on q and k), `attention_sinks` (gpt-oss: one
  learned logit per head);
- sliding windows: `sliding_window` tokens on `sliding_window_layers` layers (HF
  `layer_types` or the model family decides how many when not given);
- mixture of experts: `num_local_experts` / `num_experts` / `n_routed_experts` routed
  experts, `num_experts_per_tok` of them per token, `n_shared_experts` always active,
  `moe_intermediate_size` per expert (else `intermediate_size`), the first
  `first_k_dense_replace` layers dense (and `moe_layer_freq`, `decoder_sparse_step`,
  `mlp_only_layers` as DeepSeek and Qwen name them); `router_bias`, `expert_bias`
  (gpt-oss has both; DeepSeek-V3's `e_score_correction_bias` is a router bias);
- multi-head latent attention (MLA, DeepSeek-V3): `kv_lora_rank`, `q_lora_rank`,
  `qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`;
- weight formats: `weight_dtype` (else `torch_dtype`; fp32 checkpoints are served in
  bf16, as serving engines load them) and `expert_weight_dtype` for the routed experts;
  an HF `quantization_config` gives them: fp8 -> fp8 weights, mxfp4 -> mxfp4 experts
  (gpt-oss keeps attention, router, embedding and head in 16 bits), GPTQ/AWQ 4- or 8-bit
  with groups of 128 -> int4-g128 / int8-g128.

Parameter counts cover every tensor (norms, biases, router and sinks included) and equal
the checked reference table; DeepSeek-V3's multi-token-prediction module is not part of
the served model and is not counted. Only the matmul weights count as GEMM work: 2 FLOPs
per weight per token, for the experts a token is routed to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from rooftui.core import limits, spec_files
from rooftui.core.dtypes import bytes_per_element
from rooftui.core.errors import SpecError

# Keys a spec may carry that the model does not use (HF configs carry many of them).
IGNORED_KEYS = {
    "architectures", "model_type", "torch_dtype", "transformers_version", "hidden_act",
    "hidden_activation", "rms_norm_eps", "layer_norm_eps", "rope_theta", "rope_scaling",
    "initializer_range", "use_cache", "bos_token_id", "eos_token_id", "pad_token_id",
    "attention_dropout", "pretraining_tp", "mlp_bias", "use_sliding_window",
    "max_window_layers", "query_pre_attn_scalar", "attn_logit_softcapping",
    "final_logit_softcapping", "cache_implementation", "layer_types", "notes", "sources",
    "name", "embd_pdrop", "resid_pdrop", "original_max_position_embeddings",
    "partial_rotary_factor", "tokenizer_class", "dtype", "use_qk_norm",
    "sliding_window_size", "norm_topk_prob", "router_aux_loss_coef", "output_router_logits",
    "router_jitter_noise", "n_group", "topk_group", "routed_scaling_factor", "scoring_func",
    "topk_method", "num_nextn_predict_layers", "swiglu_limit", "initial_context_length",
    "ep_size", "aux_loss_alpha", "seq_aux",
}
MODEL_KEYS = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings",
    "max_position_embeddings", "ffn_gated", "lm_head", "norms_per_layer", "qkv_bias",
    "attention_bias", "sliding_window", "sliding_window_layers", "weight_dtype",
    "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
    "experts_per_token", "n_shared_experts", "moe_intermediate_size",
    "first_k_dense_replace", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers",
    "router_bias", "expert_bias", "expert_weight_dtype", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "qk_norm", "attention_sinks",
    "quantization_config",
}
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
# Keys that mean an architecture the step model does not cover: refused, never silently
# computed as something else.
UNSUPPORTED = {
    "shared_expert_intermediate_size": "gated shared experts of their own size (Qwen2-MoE)",
    "interleave_moe_layer_step": "interleaved MoE layers of another size (Llama-4)",
    "intermediate_size_mlp": "MoE layers beside dense ones of another size (Llama-4)",
}
LAYER_TYPES = {"full_attention", "sliding_attention"}
TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text"}
QK_NORM_BY_DEFAULT = {"qwen3", "qwen3_moe", "gemma3_text"}
# Serving engines load fp32 checkpoints (the Gemma-2 base models ship so) in 16 bits.
DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "float32": "bf16"}


@dataclass(frozen=True)
class Model:
    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int  # MLA: qk_nope_head_dim + qk_rope_head_dim
    intermediate_size: int  # the dense FFN's (in MoE models only the dense layers use it)
    vocab_size: int = 0
    tie_word_embeddings: bool = False
    max_position_embeddings: int | None = None
    ffn_gated: bool = True
    lm_head: bool = True
    norms_per_layer: int = 2
    qkv_bias: bool = False
    sliding_window: int | None = None
    sliding_window_layers: int = 0
    weight_dtype: str = "bf16"
    sources: dict[str, str] = field(default_factory=dict)
    key: str = ""
    o_bias: bool = False
    qk_norm: bool = False
    attention_sinks: bool = False
    # mixture of experts: no routed experts is a dense model
    num_experts: int = 0
    num_experts_per_tok: int = 0
    num_shared_experts: int = 0
    moe_intermediate_size: int = 0
    moe_layers: int = 0
    router_bias: bool = False
    expert_bias: bool = False
    expert_weight_dtype: str | None = None  # None: the weights' format
    # multi-head latent attention: kv_lora_rank 0 is standard attention
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    # --- shapes ---------------------------------------------------------------------
    @property
    def group_size(self) -> int:
        """Query heads per KV head: 1 for MHA, the head count for MQA."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def has_lm_head(self) -> bool:
        return self.lm_head and self.vocab_size > 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.moe_layers > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def dense_layers(self) -> int:
        return self.num_hidden_layers - self.moe_layers

    def attention_params_per_layer(self) -> int:
        """Matmul weights of one attention block: q, k, v, o (MLA: the q and kv LoRA
        down- and up-projections and o)."""
        d, h = self.hidden_size, self.num_attention_heads
        if not self.is_mla:
            return d * self.head_dim * (2 * h + 2 * self.num_key_value_heads)
        rope, latent = self.qk_rope_head_dim, self.kv_lora_rank
        query_width = h * (self.qk_nope_head_dim + rope)
        query = (d * self.q_lora_rank + self.q_lora_rank * query_width if self.q_lora_rank
                 else d * query_width)
        key_value = d * (latent + rope) + latent * h * (self.qk_nope_head_dim + self.v_head_dim)
        return query + key_value + h * self.v_head_dim * d

    def attention_extra_params_per_layer(self) -> int:
        """Attention tensors that are not matmuls and do not depend on the KV head count:
        the o bias, sinks, q/k norms, MLA's LoRA norms. (The q/k/v biases are in
        `bias_params_per_layer`.)"""
        extra = self.hidden_size * self.o_bias + self.num_attention_heads * self.attention_sinks
        extra += 2 * self.head_dim * self.qk_norm
        return extra + self.q_lora_rank + self.kv_lora_rank  # MLA norms (0 otherwise)

    def bias_params_per_layer(self) -> int:
        if not self.qkv_bias:
            return 0
        return (self.num_attention_heads + 2 * self.num_key_value_heads) * self.head_dim

    def ffn_params_per_layer(self) -> int:
        """Matmul weights of one dense FFN (the dense layers of an MoE model too)."""
        return (3 if self.ffn_gated else 2) * self.hidden_size * self.intermediate_size

    def expert_params(self) -> int:
        """Matmul weights of one expert."""
        return (3 if self.ffn_gated else 2) * self.hidden_size * self.moe_intermediate_size

    def expert_bias_params(self) -> int:
        """Biases of one expert (gpt-oss): gate and up (or the one input matrix), down."""
        if not self.expert_bias:
            return 0
        return (2 if self.ffn_gated else 1) * self.moe_intermediate_size + self.hidden_size

    def moe_extra_params_per_layer(self) -> int:
        """An MoE layer's tensors that are not matmuls: router and expert biases."""
        return (self.num_experts * self.router_bias
                + (self.num_experts + self.num_shared_experts) * self.expert_bias_params())

    def router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts

    def ffn_active_params(self) -> int:
        """FFN matmul weights one token multiplies by, over all layers: the dense FFNs,
        and in each MoE layer the router, the shared experts and its k routed experts."""
        per_moe_layer = self.router_params_per_layer() + (
            self.num_shared_experts + self.num_experts_per_tok) * self.expert_params()
        return self.dense_layers * self.ffn_params_per_layer() + self.moe_layers * per_moe_layer

    def ffn_always_read_params(self) -> int:
        """FFN matmul weights every step reads whatever the routing: the dense FFNs and
        each MoE layer's router and shared experts."""
        per_moe_layer = (self.router_params_per_layer()
                         + self.num_shared_experts * self.expert_params())
        return self.dense_layers * self.ffn_params_per_layer() + self.moe_layers * per_moe_layer

    def routed_expert_params(self) -> int:
        """Matmul weights of all routed experts, over all MoE layers."""
        return self.moe_layers * self.num_experts * self.expert_params()

    def norm_params(self) -> int:
        if self.norms_per_layer == 0:
            return 0
        return (self.num_hidden_layers * self.norms_per_layer + 1) * self.hidden_size

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size if self.has_lm_head else 0

    def gemm_params(self) -> int:
        """Matmul weights one token multiplies by: every layer's projections, the dense
        FFNs, the router, shared and routed experts a token uses, and the head."""
        return (self.num_hidden_layers * self.attention_params_per_layer()
                + self.ffn_active_params() + self.lm_head_params())

    def total_params(self) -> int:
        """Every stored tensor: embedding, layers, norms, biases, experts, an untied head."""
        untied_head = 0 if self.tie_word_embeddings else self.lm_head_params()
        return (
            self.embedding_params()
            + self.num_hidden_layers
            * (self.attention_params_per_layer() + self.attention_extra_params_per_layer()
               + self.bias_params_per_layer())
            + self.ffn_always_read_params() + self.routed_expert_params()
            + self.moe_layers * self.moe_extra_params_per_layer()
            + self.norm_params()
            + untied_head
        )

    def active_params(self, include_embedding: bool = True) -> int:
        """Parameters one token uses: all but the routed experts it is not sent to (with
        their biases). OpenAI's gpt-oss counts leave the input embedding out."""
        unused_experts = self.moe_layers * (self.num_experts - self.num_experts_per_tok)
        active = self.total_params() - unused_experts * (
            self.expert_params() + self.expert_bias_params())
        return active - (0 if include_embedding else self.embedding_params())

    def kv_elements_per_token_layer(self) -> int:
        """Cached elements per token per layer: K and V of every KV head, or MLA's latent
        (kv_lora_rank + qk_rope_head_dim) shared by all heads."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_key_value_heads * self.head_dim

    def attention_flops_per_key(self) -> int:
        """FLOPs of one query attending to one key in one layer: scores and weighted sum,
        4 * heads * head_dim; MLA in its absorbed form (queries projected into the latent)
        scores over kv_lora_rank + qk_rope_head_dim and sums kv_lora_rank values per head:
        heads * (4 * kv_lora_rank + 2 * qk_rope_head_dim)."""
        if self.is_mla:
            return self.num_attention_heads * (4 * self.kv_lora_rank + 2 * self.qk_rope_head_dim)
        return 4 * self.num_attention_heads * self.head_dim

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", context: int | None = None) -> float:
        """Bytes cached per token over all layers (windowed layers counted in full; pass
        `context` to average the window cap over a sequence of that length)."""
        per_layer = self.kv_elements_per_token_layer() * bytes_per_element(kv_dtype)
        if context is None or not self.sliding_window_layers:
            return self.num_hidden_layers * per_layer
        full = self.num_hidden_layers - self.sliding_window_layers
        capped = min(context, self.sliding_window) / context if context else 1.0
        return per_layer * (full + self.sliding_window_layers * capped)

    def expected_experts_touched(self, tokens: float) -> float:
        """Distinct routed experts per MoE layer that `tokens` tokens routed uniformly at
        random use: E * (1 - (1 - k/E)^T)."""
        if not self.is_moe:
            return 0.0
        return self.num_experts * (1 - (1 - self.num_experts_per_tok / self.num_experts) ** tokens)

    def with_kv_heads(self, kv_heads: int) -> Model:
        """The same model with another number of KV heads (a GQA what-if)."""
        if self.is_mla:
            raise SpecError(f"{self.name} uses multi-head latent attention: it caches one "
                            "latent for all heads, so a KV-head count does not apply")
        check_heads(self.num_attention_heads, kv_heads, self.name)
        return replace(self, num_key_value_heads=int(kv_heads))

    def as_arrays(self) -> ModelArrays:
        return ModelArrays.stack([self])


def check_heads(heads: int, kv_heads: int, where: str) -> None:
    if kv_heads <= 0:
        raise SpecError(f"{where}: num_key_value_heads must be > 0, got {kv_heads}")
    if heads % kv_heads:
        raise SpecError(
            f"{where}: {heads} attention heads are not divisible by {kv_heads} KV heads; "
            "choose KV heads that divide the head count"
        )


@dataclass(frozen=True)
class ModelArrays:
    """Model fields as parallel arrays, one entry per model, for vectorised steps.

    `take(index)` broadcasts them onto a grid of configurations. Per-layer counts are of
    one layer; "summed" ones are over all layers. The columns only MoE and MLA models set
    (`SPARSE_COLUMNS`) stay scalars when every model in the table shares their value, so a
    grid of dense models pays nothing for them.
    """

    hidden: np.ndarray
    layers: np.ndarray
    heads: np.ndarray
    kv_heads: np.ndarray
    head_dim: np.ndarray
    ffn_params_per_layer: np.ndarray  # a dense layer's FFN matmuls
    lm_head_params: np.ndarray
    # params independent of the KV head count and not multiplied in GEMMs: embedding,
    # norms, an untied head counted above only once, attention extras, MoE biases.
    static_resident_params: np.ndarray
    qkv_bias: np.ndarray  # 0 or 1
    window: np.ndarray  # tokens; inf when no layer is windowed
    windowed_layers: np.ndarray
    # attention matmuls per layer: fixed part (q and o; all of MLA's) + per KV head (k, v)
    attention_fixed_params: np.ndarray
    kv_proj_params_per_kv_head: np.ndarray
    # cached elements per token per layer: latent (MLA) + per KV head (2 * head_dim)
    kv_latent: np.ndarray
    kv_elements_per_kv_head: np.ndarray
    attention_flops_per_key: np.ndarray  # per layer per (query, key)
    ffn_active_params: np.ndarray  # summed: FFN matmuls one token uses
    ffn_always_read_params: np.ndarray  # summed: dense FFNs, routers, shared experts
    routed_expert_params: np.ndarray  # summed: every routed expert's matmuls
    expert_miss: np.ndarray  # 1 - k/E: a token's routing misses a given expert (dense: 1)
    experts: np.ndarray  # E routed experts per MoE layer (dense: 0)
    experts_per_token: np.ndarray  # k (dense: 0)
    moe_layers: np.ndarray

    @staticmethod
    def stack(models: list[Model]) -> ModelArrays:
        def column(values: list[float]) -> np.ndarray:
            return np.asarray(values, dtype=np.float64)

        def attention_fixed(m: Model) -> int:
            if m.is_mla:
                return m.attention_params_per_layer()
            return 2 * m.hidden_size * m.head_dim * m.num_attention_heads

        return ModelArrays(
            hidden=column([m.hidden_size for m in models]),
            layers=column([m.num_hidden_layers for m in models]),
            heads=column([m.num_attention_heads for m in models]),
            kv_heads=column([m.num_key_value_heads for m in models]),
            head_dim=column([m.head_dim for m in models]),
            ffn_params_per_layer=column([m.ffn_params_per_layer() for m in models]),
            lm_head_params=column([m.lm_head_params() for m in models]),
            static_resident_params=column(
                [m.embedding_params() + m.norm_params()
                 + (0 if m.tie_word_embeddings else m.lm_head_params())
                 + m.num_hidden_layers * m.attention_extra_params_per_layer()
                 + m.moe_layers * m.moe_extra_params_per_layer() for m in models]
            ),
            qkv_bias=column([float(m.qkv_bias) for m in models]),
            window=column([m.sliding_window if m.sliding_window_layers else math.inf
                           for m in models]),
            windowed_layers=column([m.sliding_window_layers for m in models]),
            attention_fixed_params=column([attention_fixed(m) for m in models]),
            kv_proj_params_per_kv_head=column(
                [0 if m.is_mla else 2 * m.hidden_size * m.head_dim for m in models]),
            kv_latent=column([m.kv_elements_per_token_layer() if m.is_mla else 0
                              for m in models]),
            kv_elements_per_kv_head=column([0 if m.is_mla else 2 * m.head_dim for m in models]),
            attention_flops_per_key=column([m.attention_flops_per_key() for m in models]),
            ffn_active_params=column([m.ffn_active_params() for m in models]),
            ffn_always_read_params=column([m.ffn_always_read_params() for m in models]),
            routed_expert_params=column([m.routed_expert_params() for m in models]),
            expert_miss=column([1 - m.num_experts_per_tok / m.num_experts if m.is_moe else 1.0
                                for m in models]),
            experts=column([m.num_experts if m.is_moe else 0 for m in models]),
            experts_per_token=column([m.num_experts_per_tok if m.is_moe else 0
                                      for m in models]),
            moe_layers=column([m.moe_layers if m.is_moe else 0 for m in models]),
        )

    def take(self, index: np.ndarray | int) -> ModelArrays:
        def column(name: str) -> np.ndarray:
            values = getattr(self, name)
            if name in SPARSE_COLUMNS and values.size and np.all(values == values.flat[0]):
                return values.flat[0]
            return values[index]

        return ModelArrays(**{f.name: column(f.name) for f in fields(self)})


SPARSE_COLUMNS = ("kv_latent", "routed_expert_params", "expert_miss", "experts",
                  "experts_per_token", "moe_layers")


def model_from_config(data: dict[str, Any], where: str, key: str = "") -> Model:
    """Build a model from HF `config.json` keys (plus rooftui's own, see the module doc)."""
    text_config = data.get("text_config")
    if isinstance(text_config, dict):  # multimodal wrappers keep the decoder here
        data = {**text_config, **{k: v for k, v in data.items() if k != "text_config"}}
    for unsupported_key, what in UNSUPPORTED.items():
        if data.get(unsupported_key):
            raise SpecError(
                f"{where}: {what} ({unsupported_key!r}) is not modelled; "
                "rooftui refuses rather than computing it as something else"
            )
    if not where.endswith(".json"):
        spec_files.check_keys(data, MODEL_KEYS | IGNORED_KEYS, where)

    def whole(name: str, default: float | None = None, minimum: float | None = None) -> int:
        return _whole(data, name, where, default=default, minimum=minimum)

    def flag(name: str, default: bool) -> bool:
        return spec_files.flag(data, name, where, default)

    model_type = str(data.get("model_type", ""))
    hidden = whole("hidden_size")
    layers = whole("num_hidden_layers")
    heads = whole("num_attention_heads")
    kv_heads = whole("num_key_value_heads", default=heads)
    check_heads(heads, kv_heads, where)
    mla = _latent_attention(data, where)
    if hidden % heads and "head_dim" not in data and not mla:
        raise SpecError(f"{where}: hidden_size {hidden} is not divisible by "
                        f"{heads} heads; give head_dim")
    head_dim = (mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"] if mla
                else whole("head_dim", default=hidden // heads))
    sliding_window, windowed_layers = _sliding_window(data, where, model_type, layers)
    max_positions = whole("max_position_embeddings", default=0, minimum=0) or None
    weight_dtype, expert_dtype = _weight_formats(data, where)
    attention_bias = flag("attention_bias", False)
    sources = data.get("sources", {})
    return Model(
        name=str(data.get("name") or key or where),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=whole("intermediate_size"),
        vocab_size=whole("vocab_size", default=0, minimum=0),
        tie_word_embeddings=flag("tie_word_embeddings", model_type in TIED_BY_DEFAULT),
        max_position_embeddings=max_positions,
        ffn_gated=flag("ffn_gated", True),
        lm_head=flag("lm_head", True),
        norms_per_layer=whole("norms_per_layer",
                              default=4 if model_type.startswith("gemma2") else 2, minimum=0),
        qkv_bias=flag("qkv_bias", model_type == "qwen2") or attention_bias,
        o_bias=attention_bias,
        qk_norm=flag("qk_norm", model_type in QK_NORM_BY_DEFAULT
                     or bool(data.get("use_qk_norm"))),
        attention_sinks=flag("attention_sinks", model_type == "gpt_oss"),
        sliding_window=sliding_window,
        sliding_window_layers=windowed_layers,
        weight_dtype=weight_dtype,
        expert_weight_dtype=expert_dtype,
        sources={str(k): str(v) for k, v in sources.items()} if isinstance(sources, dict)
        else {},
        key=key,
        **_experts(data, where, model_type, layers),
        **mla,
    )


def _whole(data: dict, key: str, where: str, *, default: float | None = None,
           minimum: float | None = None) -> int:
    """A whole-number key within its `limits.BOUNDS` range (a shape's own entry, else the
    range of counts: experts, ranks, layers, windows)."""
    bound = key if key in limits.BOUNDS else "model_count"
    return int(spec_files.number(data, key, where, default=default, bound=bound,
                                 minimum=minimum, integer=True))


def _latent_attention(data: dict, where: str) -> dict[str, int]:
    """MLA's fields, or {} for standard attention (no `kv_lora_rank`)."""
    if not data.get("kv_lora_rank"):
        return {}
    fields_ = {name: _whole(data, name, where, minimum=1)
               for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")}
    # no q_lora_rank: the query is one d x heads * head_dim projection (DeepSeek-V2-Lite)
    fields_["q_lora_rank"] = _whole(data, "q_lora_rank", where, default=0)
    return fields_


def _experts(data: dict, where: str, model_type: str, layers: int) -> dict[str, Any]:
    """The MoE fields, or {} for a dense model."""
    names = [name for name in EXPERT_COUNT_KEYS if data.get(name)]
    if not names:
        return {}
    if len(names) > 1:
        raise SpecError(f"{where}: give the routed expert count once, not as {names}")
    experts = _whole(data, names[0], where, minimum=1)
    # gpt-oss configs carry both names; the HF one is asked for when neither is there
    per_token_key = ("experts_per_token" if "experts_per_token" in data
                     and "num_experts_per_tok" not in data else "num_experts_per_tok")
    per_token = _whole(data, per_token_key, where, minimum=1)
    if per_token > experts:
        raise SpecError(f"{where}: {per_token} experts per token but only {experts} experts")
    first_dense = _whole(data, "first_k_dense_replace", where, default=0)
    every = _whole(data, "moe_layer_freq", where, default=1, minimum=1)
    sparse_step = _whole(data, "decoder_sparse_step", where, default=1, minimum=1)
    dense_only = data.get("mlp_only_layers") or []
    if not isinstance(dense_only, list):
        raise SpecError(f"{where}: key 'mlp_only_layers' must be a list of layer indices")
    moe_layers = sum(1 for i in range(layers) if i >= first_dense and i % every == 0
                     and (i + 1) % sparse_step == 0 and i not in dense_only)
    intermediate = data.get("moe_intermediate_size") or data.get("intermediate_size")
    return {
        "num_experts": experts,
        "num_experts_per_tok": per_token,
        "num_shared_experts": _whole(data, "n_shared_experts", where, default=0),
        "moe_intermediate_size": _whole({"moe_intermediate_size": intermediate},
                                        "moe_intermediate_size", where),
        "moe_layers": moe_layers,
        "router_bias": spec_files.flag(data, "router_bias", where, model_type == "gpt_oss"
                                       or data.get("topk_method") == "noaux_tc"),
        "expert_bias": spec_files.flag(data, "expert_bias", where, model_type == "gpt_oss"),
    }


def _weight_formats(data: dict, where: str) -> tuple[str, str | None]:
    """(weight dtype, routed experts' dtype or None for the same)."""
    weight = data.get("weight_dtype") or DTYPE_NAMES.get(
        str(data.get("torch_dtype") or data.get("dtype") or ""), "bf16")
    expert = data.get("expert_weight_dtype")
    quantization = data.get("quantization_config")
    if isinstance(quantization, dict) and not data.get("weight_dtype"):
        method = str(quantization.get("quant_method", ""))
        bits, group = quantization.get("bits"), quantization.get("group_size")
        if method == "fp8":
            weight = "fp8"
        elif method == "mxfp4":
            expert = expert or "mxfp4"
        elif method in ("gptq", "awq") and bits in (4, 8) and group == 128:
            weight = f"int{bits}-g128"
        else:
            raise SpecError(f"{where}: quantization {method!r} (bits {bits}, group {group}) "
                            "is not modelled; give weight_dtype instead")
    for key, name in (("weight_dtype", weight), ("expert_weight_dtype", expert)):
        if name is not None and not isinstance(name, str):
            raise SpecError(f"{where}: key {key!r} must be a format name, got {name!r}")
        if name is not None:
            bytes_per_element(name)  # validates
    return weight, expert


def _sliding_window(data: dict, where: str, model_type: str, layers: int) -> tuple[int | None, int]:
    layer_types = data.get("layer_types")
    if isinstance(layer_types, list):
        unknown = sorted({str(kind) for kind in layer_types} - LAYER_TYPES)
        if unknown:
            raise SpecError(f"{where}: layer types {unknown} are not modelled (only full and "
                            "sliding attention)")
    window = data.get("sliding_window")
    if not window or data.get("use_sliding_window") is False:
        return None, 0
    window = _whole(data, "sliding_window", where, minimum=1)
    if "sliding_window_layers" in data:
        count = _whole(data, "sliding_window_layers", where)
    elif isinstance(layer_types, list):
        count = sum(1 for t in layer_types if t == "sliding_attention")
    elif model_type.startswith("gemma2"):
        count = (layers + 1) // 2  # even-indexed layers slide, odd ones attend globally
    else:
        count = layers
    if not 0 <= count <= layers:
        raise SpecError(f"{where}: sliding_window_layers must be 0..{layers}, got {count}")
    return window, count


def load_model(name_or_path: str) -> Model:
    """A shipped model by name (`llama-3-8b`), a model TOML, or a HF `config.json`."""
    path = spec_files.resolve("models", name_or_path)
    return model_from_config(spec_files.read_document(path), str(path), key=str(name_or_path))
