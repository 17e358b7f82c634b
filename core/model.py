"""Decoder-only transformer shapes, from Hugging Face `config.json` fields.

A model spec uses the keys HF configs use (`hidden_size`, `num_hidden_layers`, ...), plus:
- `ffn_gated` (default true): a gated FFN (SwiGLU/GeGLU) has three d x d_ff matrices, a
  plain one two;
- `lm_head` (default true): whether the output projection runs; `vocab_size = 0` is a bare
  stack of layers with no embedding and no head;
- `norms_per_layer` (default 2; Gemma-2 has 4, the seed's reference model 0): RMSNorm
  weight vectors of `hidden_size` each, plus one final norm when there are any;
- `qkv_bias` (Qwen2 has it; HF Llama calls it `attention_bias`);
- sliding windows: `sliding_window` tokens on `sliding_window_layers` layers (HF
  `layer_types` or the model family decides how many when not given).

Parameter counts cover every tensor (norms and biases included) and equal the checked
reference table. Only the matmul weights count as GEMM work: 2 FLOPs per weight per token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from rooftui.core import spec_files
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
}
MODEL_KEYS = {
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim", "intermediate_size", "vocab_size", "tie_word_embeddings",
    "max_position_embeddings", "ffn_gated", "lm_head", "norms_per_layer", "qkv_bias",
    "attention_bias", "sliding_window", "sliding_window_layers", "weight_dtype",
}
# Keys that mean an architecture the step model does not cover yet: refused, never
# silently computed as a dense model.
UNSUPPORTED = {
    "num_local_experts": "mixture-of-experts",
    "n_routed_experts": "mixture-of-experts",
    "num_experts": "mixture-of-experts",
    "kv_lora_rank": "multi-head latent attention (MLA)",
}
TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3_text"}
DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True)
class Model:
    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
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

    # --- shapes ---------------------------------------------------------------------
    @property
    def group_size(self) -> int:
        """Query heads per KV head: 1 for MHA, the head count for MQA."""
        return self.num_attention_heads // self.num_key_value_heads

    @property
    def has_lm_head(self) -> bool:
        return self.lm_head and self.vocab_size > 0

    def attention_params_per_layer(self) -> int:
        d, hd = self.hidden_size, self.head_dim
        return d * hd * (2 * self.num_attention_heads + 2 * self.num_key_value_heads)

    def ffn_params_per_layer(self) -> int:
        return (3 if self.ffn_gated else 2) * self.hidden_size * self.intermediate_size

    def bias_params_per_layer(self) -> int:
        if not self.qkv_bias:
            return 0
        return (self.num_attention_heads + 2 * self.num_key_value_heads) * self.head_dim

    def norm_params(self) -> int:
        if self.norms_per_layer == 0:
            return 0
        return (self.num_hidden_layers * self.norms_per_layer + 1) * self.hidden_size

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    def lm_head_params(self) -> int:
        return self.vocab_size * self.hidden_size if self.has_lm_head else 0

    def gemm_params(self) -> int:
        """Matmul weights one token multiplies by: every layer's projections and the head."""
        per_layer = self.attention_params_per_layer() + self.ffn_params_per_layer()
        return self.num_hidden_layers * per_layer + self.lm_head_params()

    def total_params(self) -> int:
        """Every stored tensor: embedding, layers, norms, biases, an untied head."""
        untied_head = 0 if self.tie_word_embeddings else self.lm_head_params()
        return (
            self.embedding_params()
            + self.num_hidden_layers
            * (self.attention_params_per_layer() + self.ffn_params_per_layer()
               + self.bias_params_per_layer())
            + self.norm_params()
            + untied_head
        )

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", context: int | None = None) -> float:
        """Bytes of K and V cached per token over all layers (windowed layers counted in
        full; pass `context` to average the window cap over a sequence of that length)."""
        per_layer = 2 * self.num_key_value_heads * self.head_dim * bytes_per_element(kv_dtype)
        if context is None or not self.sliding_window_layers:
            return self.num_hidden_layers * per_layer
        full = self.num_hidden_layers - self.sliding_window_layers
        capped = min(context, self.sliding_window) / context if context else 1.0
        return per_layer * (full + self.sliding_window_layers * capped)

    def with_kv_heads(self, kv_heads: int) -> Model:
        """The same model with another number of KV heads (a GQA what-if)."""
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

    `take(index)` broadcasts them onto a grid of configurations.
    """

    hidden: np.ndarray
    layers: np.ndarray
    heads: np.ndarray
    kv_heads: np.ndarray
    head_dim: np.ndarray
    ffn_params_per_layer: np.ndarray
    lm_head_params: np.ndarray
    # params independent of the KV head count and not multiplied in GEMMs:
    # embedding, norms, an untied head counted above only once.
    static_resident_params: np.ndarray
    qkv_bias: np.ndarray  # 0 or 1
    window: np.ndarray  # tokens; inf when no layer is windowed
    windowed_layers: np.ndarray

    @staticmethod
    def stack(models: list[Model]) -> ModelArrays:
        def column(values: list[float]) -> np.ndarray:
            return np.asarray(values, dtype=np.float64)

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
                 + (0 if m.tie_word_embeddings else m.lm_head_params()) for m in models]
            ),
            qkv_bias=column([float(m.qkv_bias) for m in models]),
            window=column([m.sliding_window if m.sliding_window_layers else math.inf
                           for m in models]),
            windowed_layers=column([m.sliding_window_layers for m in models]),
        )

    def take(self, index: np.ndarray | int) -> ModelArrays:
        return ModelArrays(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


def model_from_config(data: dict[str, Any], where: str, key: str = "") -> Model:
    """Build a model from HF `config.json` keys (plus rooftui's own, see the module doc)."""
    for unsupported_key, what in UNSUPPORTED.items():
        if data.get(unsupported_key):
            raise SpecError(
                f"{where}: {what} models ({unsupported_key!r}) are not supported yet; "
                "rooftui refuses rather than computing them as dense"
            )
    text_config = data.get("text_config")
    if isinstance(text_config, dict):  # multimodal wrappers keep the decoder here
        data = {**text_config, **{k: v for k, v in data.items() if k != "text_config"}}
    if not where.endswith(".json"):
        spec_files.check_keys(data, MODEL_KEYS | IGNORED_KEYS, where)

    def whole(name: str, default: float | None = None, minimum: float = 1) -> int:
        return int(spec_files.number(data, name, where, default=default, minimum=minimum,
                                     integer=True))

    model_type = str(data.get("model_type", ""))
    hidden = whole("hidden_size")
    layers = whole("num_hidden_layers")
    heads = whole("num_attention_heads")
    kv_heads = whole("num_key_value_heads", default=heads)
    check_heads(heads, kv_heads, where)
    if hidden % heads and "head_dim" not in data:
        raise SpecError(f"{where}: hidden_size {hidden} is not divisible by "
                        f"{heads} heads; give head_dim")
    head_dim = whole("head_dim", default=hidden // heads)
    vocab = whole("vocab_size", default=0, minimum=0)
    sliding_window, windowed_layers = _sliding_window(data, where, model_type, layers)
    max_positions = data.get("max_position_embeddings")
    weight_dtype = data.get("weight_dtype") or DTYPE_NAMES.get(
        str(data.get("torch_dtype") or data.get("dtype") or ""), "bf16")
    bytes_per_element(weight_dtype)  # validates
    sources = data.get("sources", {})
    return Model(
        name=str(data.get("name") or key or where),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=whole("intermediate_size"),
        vocab_size=vocab,
        tie_word_embeddings=spec_files.flag(
            data, "tie_word_embeddings", where, model_type in TIED_BY_DEFAULT),
        max_position_embeddings=int(max_positions) if max_positions else None,
        ffn_gated=spec_files.flag(data, "ffn_gated", where, True),
        lm_head=spec_files.flag(data, "lm_head", where, True),
        norms_per_layer=whole("norms_per_layer",
                              default=4 if model_type.startswith("gemma2") else 2, minimum=0),
        qkv_bias=spec_files.flag(data, "qkv_bias", where, model_type == "qwen2")
        or spec_files.flag(data, "attention_bias", where, False),
        sliding_window=sliding_window,
        sliding_window_layers=windowed_layers,
        weight_dtype=weight_dtype,
        sources={str(k): str(v) for k, v in sources.items()} if isinstance(sources, dict)
        else {},
        key=key,
    )


def _sliding_window(data: dict, where: str, model_type: str, layers: int) -> tuple[int | None, int]:
    window = data.get("sliding_window")
    if not window or data.get("use_sliding_window") is False:
        return None, 0
    window = int(spec_files.number(data, "sliding_window", where, minimum=1, integer=True))
    if "sliding_window_layers" in data:
        count = int(spec_files.number(data, "sliding_window_layers", where, integer=True))
    elif isinstance(data.get("layer_types"), list):
        count = sum(1 for t in data["layer_types"] if t == "sliding_attention")
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
