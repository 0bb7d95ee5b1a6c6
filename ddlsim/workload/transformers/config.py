"""A transformer described the way a user would: :class:`TransformerConfig` and its parts.

Every field is validated on construction (:class:`~ddlsim.errors.ConfigError` naming the field
and the value). The parts that only some models have are optional members:
:class:`SpeechFrontEnd` (wav2vec2's 7-layer convolutional feature encoder, its convolutional
position embedding and its quantizer), :class:`PatchEmbedding` (ViT), :class:`AdaptiveSoftmax`
(Transformer-XL's adaptive input and output) and :class:`Generator` (ELECTRA's small generator,
trained with the discriminator and sharing its embeddings).

Conventions: ``layers`` is the encoder (or the only) stack; ``decoder_layers`` > 0 makes an
encoder-decoder whose decoder blocks add cross-attention. ``ffn`` is the FFN width; a gated
FFN (``swiglu`` / ``geglu``) of width ``ffn`` has three matrices. ``bias`` switches the
biases of every linear layer and of the LayerNorms; ``attn_bias`` overrides it for the
attention projections (Transformer-XL has none there).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ddlsim.errors import ConfigError, shown

FFN_KINDS = ("gelu", "relu", "swiglu", "geglu")
GATED_FFN_KINDS = ("swiglu", "geglu")
#: relative = Transformer-XL; disentangled = DeBERTa; conv = wav2vec2's convolutional embedding
POSITION_KINDS = ("learned", "sinusoidal", "rope", "alibi", "relative", "disentangled", "conv")
NORM_KINDS = ("layernorm", "rmsnorm")
NORM_PLACEMENTS = ("pre", "post")
#: lm: vocabulary projection; mlm: BERT's transform + LayerNorm + tied decoder with bias;
#: discriminator: ELECTRA's dense + 1-logit head; contrastive: wav2vec2's quantizer and
#: projections; classifier: ViT's linear head; span: a 2-logit linear on every token
#: (SQuAD's start and end; token classification has the same shape); sequence: a classifier
#: on the first token's pooled state (GLUE); none: the backbone only
HEAD_KINDS = (
    "lm", "mlm", "discriminator", "contrastive", "classifier", "span", "sequence", "none",
)  # fmt: skip
#: labels of a sequence classifier (MNLI's three; the head's cost is negligible at any count)
SEQUENCE_LABELS = 3
#: the share of positions BERT's pre-training masks and predicts (Devlin et al. 2019, sec.
#: 3.1: 15%); google-research/bert's ``run_pretraining.py`` gathers them
#: (``get_masked_lm_output``: ``max_predictions_per_seq``, 20 of 128 and 80 of 512 in its
#: scripts; ``ceil(0.15 s)`` here) before the transform and the vocabulary projection
MLM_MASKED_SHARE = 0.15
#: the head each ``--task`` puts on the model (auto: the model's own)
TASK_HEADS = {"mlm": "mlm", "span": "span", "classify": "sequence"}


def _positive(owner: str, name: str, value: object, *, zero_ok: bool = False) -> None:
    """Raise ConfigError unless ``value`` is an int > 0 (>= 0 with ``zero_ok``)."""
    low = 0 if zero_ok else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        what = "a non-negative" if zero_ok else "a positive"
        raise ConfigError(f"{owner}: {name} must be {what} integer, got {shown(value)}")


def _positives(owner: str, obj: object, names: tuple[str, ...], *, zero_ok: bool = False) -> None:
    """:func:`_positive` for each attribute ``names`` of ``obj``."""
    for name in names:
        _positive(owner, name, getattr(obj, name), zero_ok=zero_ok)


def _choice(owner: str, name: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ConfigError(f"{owner}: unknown {name} {shown(value)}; valid: {', '.join(valid)}")


def _flag(owner: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{owner}: {name} must be true or false, got {shown(value)}")


@dataclass(frozen=True)
class ConvLayer:
    """One 1-d convolution of a speech front end: output channels, kernel, stride."""

    channels: int
    kernel: int
    stride: int

    def __post_init__(self) -> None:
        _positives("conv layer", self, ("channels", "kernel", "stride"))


#: wav2vec 2.0's feature encoder (Baevski et al. 2020 §4.2; fairseq ``conv_feature_layers``
#: default ``[(512, 10, 5)] + [(512, 3, 2)] * 4 + [(512, 2, 2)] * 2``): 20 ms frames at 16 kHz
WAV2VEC2_CONVS = (
    (ConvLayer(512, 10, 5),) + (ConvLayer(512, 3, 2),) * 4 + (ConvLayer(512, 2, 2),) * 2
)


@dataclass(frozen=True)
class SpeechFrontEnd:
    """wav2vec2's convolutional feature encoder, convolutional positions and quantizer.

    ``conv_norm``: ``group`` = GroupNorm on the first convolution only (base), ``layer`` = a
    LayerNorm after every convolution (large). ``codevector_groups`` = 0 drops the quantizer
    and the contrastive projections (a fine-tuned model).
    """

    convs: tuple[ConvLayer, ...] = WAV2VEC2_CONVS
    conv_bias: bool = False
    conv_norm: str = "group"
    pos_conv_kernel: int = 128
    pos_conv_groups: int = 16
    codevector_groups: int = 2
    codevectors_per_group: int = 320
    codevector_dim: int = 256
    final_dim: int = 256

    def __post_init__(self) -> None:
        if not self.convs:
            raise ConfigError("speech front end: convs must name at least one convolution")
        _flag("speech front end", "conv_bias", self.conv_bias)
        _choice("speech front end", "conv_norm", self.conv_norm, ("group", "layer"))
        _positives("speech front end", self, ("pos_conv_kernel", "pos_conv_groups", "final_dim"))
        _positives(
            "speech front end",
            self,
            ("codevector_groups", "codevectors_per_group", "codevector_dim"),
            zero_ok=True,
        )
        if self.codevector_groups and self.codevector_dim % self.codevector_groups:
            raise ConfigError(
                f"speech front end: codevector_dim {self.codevector_dim} is not divisible by "
                f"codevector_groups {self.codevector_groups}"
            )

    def frames(self, samples: int) -> int:
        """Frames the convolutions make of ``samples`` audio samples (no padding)."""
        n = samples
        for conv in self.convs:
            n = (n - conv.kernel) // conv.stride + 1
        return max(n, 0)


@dataclass(frozen=True)
class PatchEmbedding:
    """ViT's patch embedding: a ``patch`` x ``patch`` convolution of stride ``patch``."""

    patch: int
    image: int
    channels: int = 3
    classes: int = 1000
    cls_token: bool = True

    def __post_init__(self) -> None:
        _positives("patch embedding", self, ("patch", "image", "channels", "classes"))
        _flag("patch embedding", "cls_token", self.cls_token)
        if self.image % self.patch:
            raise ConfigError(
                f"patch embedding: image {self.image} is not divisible by patch {self.patch}"
            )

    @property
    def tokens(self) -> int:
        """Sequence length: one token per patch, plus the class token."""
        return (self.image // self.patch) ** 2 + int(self.cls_token)


@dataclass(frozen=True)
class AdaptiveSoftmax:
    """Adaptive input and softmax (Baevski & Auli 2019; Grave et al. 2017) as Transformer-XL.

    Cluster i covers ``[cutoffs[i-1], cutoffs[i])`` of the vocabulary (the last one runs to the
    end) with embedding width ``hidden // div**i``. ``tie_projections[i]``: the output
    projection of cluster i shares the input one (the PyTorch code's ``tie_projs``).
    """

    cutoffs: tuple[int, ...]
    div: int = 1
    tie_projections: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if not self.cutoffs or list(self.cutoffs) != sorted(set(self.cutoffs)):
            raise ConfigError(f"adaptive softmax: cutoffs must rise, got {shown(self.cutoffs)}")
        for c in self.cutoffs:
            _positive("adaptive softmax", "cutoff", c)
        _positive("adaptive softmax", "div", self.div)
        if self.tie_projections and len(self.tie_projections) != len(self.cutoffs) + 1:
            raise ConfigError(
                f"adaptive softmax: tie_projections needs {len(self.cutoffs) + 1} entries "
                f"(one per cluster), got {shown(self.tie_projections)}"
            )


@dataclass(frozen=True)
class Generator:
    """ELECTRA's generator: a smaller encoder sharing the discriminator's embeddings."""

    layers: int
    hidden: int
    heads: int
    ffn: int

    def __post_init__(self) -> None:
        _positives("generator", self, ("layers", "hidden", "heads", "ffn"))
        if self.hidden % self.heads:
            raise ConfigError(f"generator: heads {self.heads} does not divide hidden {self.hidden}")


@dataclass(frozen=True)
class TransformerConfig:
    """A transformer: sizes, kinds and the optional parts of one model (see module doc)."""

    name: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    kv_heads: int | None = None
    ffn_kind: str = "gelu"
    max_positions: int = 512
    seq_len: int | None = None
    position: str = "learned"
    position_offset: int = 0  # BART's learned positions start at 2
    token_types: int = 0
    norm: str = "layernorm"
    norm_placement: str = "post"
    bias: bool = True
    attn_bias: bool | None = None
    fused_qkv: bool = False
    embedding_norm: bool = False
    final_norm: bool = False
    tie_embeddings: bool = True
    head: str = "lm"
    #: the share of a sequence's positions the LM / MLM head computes logits for (1: all;
    #: BERT pre-training gathers its masked positions first)
    head_share: float = 1.0
    pooler: bool = False
    causal: bool = False
    decoder_layers: int = 0
    mem_len: int = 0
    untie_relative_bias: bool = False
    relative_buckets: int = 0
    deberta_conv_kernel: int = 0
    adaptive: AdaptiveSoftmax | None = None
    generator: Generator | None = None
    speech: SpeechFrontEnd | None = None
    patch: PatchEmbedding | None = None
    dropout: float = 0.1
    #: the learned position table is sized to the run's sequence length (llm-foundry's
    #: ``max_seq_len``), so a given ``seq_len`` resizes it instead of exceeding it
    positions_follow_seq: bool = False
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        self._check_sizes()
        self._check_kinds()
        self._check_parts()

    # -- derived ----------------------------------------------------------------------------
    @property
    def n_kv_heads(self) -> int:
        """Key/value heads: ``kv_heads``, or ``heads`` (plain multi-head attention)."""
        return self.heads if self.kv_heads is None else self.kv_heads

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def seq(self) -> int:
        """Default sequence length: ``seq_len``, else ``max_positions``."""
        return self.max_positions if self.seq_len is None else self.seq_len

    @property
    def has_attn_bias(self) -> bool:
        """Whether the attention projections have biases."""
        return self.bias if self.attn_bias is None else self.attn_bias

    @property
    def gated(self) -> bool:
        """Whether the FFN is gated (three matrices)."""
        return self.ffn_kind in GATED_FFN_KINDS

    @property
    def encoder_decoder(self) -> bool:
        """Whether the model has a decoder stack with cross-attention."""
        return self.decoder_layers > 0

    # -- validation -------------------------------------------------------------------------
    def _owner(self) -> str:
        return f"model {shown(self.name)}"

    def _check_sizes(self) -> None:
        who = self._owner()
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"model name must be a non-empty string, got {shown(self.name)}")
        _positives(who, self, ("layers", "hidden", "heads", "ffn", "max_positions"))
        _positives(
            who,
            self,
            ("vocab", "position_offset", "token_types", "decoder_layers", "mem_len"),
            zero_ok=True,
        )
        _positives(who, self, ("relative_buckets", "deberta_conv_kernel"), zero_ok=True)
        if self.kv_heads is not None:
            _positive(who, "kv_heads", self.kv_heads)
        if self.seq_len is not None:
            _positive(who, "seq_len", self.seq_len)
        if self.hidden % self.heads:
            raise ConfigError(f"{who}: heads {self.heads} does not divide hidden {self.hidden}")
        if self.heads % self.n_kv_heads:
            raise ConfigError(f"{who}: kv_heads {self.kv_heads} does not divide heads {self.heads}")
        if self.position == "learned" and self.seq > self.max_positions:
            raise ConfigError(
                f"{who}: seq_len {self.seq_len} exceeds max_positions {self.max_positions} "
                "of the learned position embedding"
            )
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float)):
            raise ConfigError(
                f"{who}: dropout must be a number in [0, 1), got {shown(self.dropout)}"
            )
        if not 0 <= self.dropout < 1:
            raise ConfigError(f"{who}: dropout must be in [0, 1), got {shown(self.dropout)}")

    def _check_kinds(self) -> None:
        who = self._owner()
        _choice(who, "ffn_kind", self.ffn_kind, FFN_KINDS)
        _choice(who, "position", self.position, POSITION_KINDS)
        _choice(who, "norm", self.norm, NORM_KINDS)
        _choice(who, "norm_placement", self.norm_placement, NORM_PLACEMENTS)
        _choice(who, "head", self.head, HEAD_KINDS)
        for name in ("bias", "fused_qkv", "embedding_norm", "final_norm", "tie_embeddings"):
            _flag(who, name, getattr(self, name))
        for name in ("pooler", "causal", "untie_relative_bias"):
            _flag(who, name, getattr(self, name))
        if self.attn_bias is not None:
            _flag(who, "attn_bias", self.attn_bias)

    def _check_parts(self) -> None:
        who = self._owner()
        if self.position == "disentangled" and not self.relative_buckets:
            raise ConfigError(f"{who}: position 'disentangled' needs relative_buckets > 0")
        if self.position == "conv" and self.speech is None:
            raise ConfigError(f"{who}: position 'conv' needs a speech front end")
        if self.vocab == 0 and self.speech is None and self.patch is None:
            raise ConfigError(f"{who}: vocab must be positive for a text model, got 0")
        if self.head in ("lm", "mlm") and self.vocab == 0:
            raise ConfigError(f"{who}: head {self.head!r} needs a vocabulary, got vocab 0")
        if self.head == "contrastive" and (
            self.speech is None or not self.speech.codevector_groups
        ):
            raise ConfigError(
                f"{who}: head 'contrastive' needs a speech front end with a quantizer"
            )
        if self.head == "classifier" and self.patch is None:
            raise ConfigError(f"{who}: head 'classifier' needs a patch embedding")
        share = self.head_share
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise ConfigError(f"{who}: head_share must be in (0, 1], got {shown(share)}")
        if self.patch is not None and self.seq != self.patch.tokens:
            raise ConfigError(
                f"{who}: seq_len {self.seq} differs from the {self.patch.tokens} patch tokens"
            )
        if self.adaptive is not None and self.adaptive.cutoffs[-1] >= self.vocab:
            raise ConfigError(
                f"{who}: adaptive cutoff {self.adaptive.cutoffs[-1]} is not below vocab "
                f"{self.vocab}"
            )
        if self.generator is not None and self.head != "discriminator":
            raise ConfigError(f"{who}: a generator needs head 'discriminator', got {self.head!r}")


def with_task(cfg: TransformerConfig, task: str) -> TransformerConfig:
    """``cfg`` trained for ``task`` (:data:`TASK_HEADS`; ``auto`` keeps the model's head)."""
    if task == "auto":
        return cfg
    if task not in TASK_HEADS:
        raise ConfigError(f"unknown task {task!r}; valid: auto, {', '.join(TASK_HEADS)}")
    if cfg.patch is not None or cfg.speech is not None:
        raise ConfigError(
            f"--task {task} applies to text models; {cfg.name} keeps its own head (--task auto)"
        )
    if task == "mlm":
        if cfg.head != "mlm":
            raise ConfigError(
                f"--task mlm needs a masked-LM encoder (BERT-style); {cfg.name}'s head is "
                f"{cfg.head!r}"
            )
        return replace(cfg, head_share=MLM_MASKED_SHARE)
    return replace(cfg, head=TASK_HEADS[task])
