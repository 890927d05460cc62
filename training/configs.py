"""Named model and run configurations.

Each model is a plain function returning a frozen `ModelConfig`, so a config is greppable and
can be diffed in review. Shapes follow the published Llama 3 configs (RMSNorm, RoPE, GQA, SwiGLU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

ACTIVATION_CHECKPOINT_MODES = ("none", "full", "selective", "ops")


@dataclass(frozen=True)
class ModelConfig:
    name: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    rope_theta: float = 500000.0
    rms_norm_eps: float = 1e-5
    max_seq_len: int = 8192
    tie_embeddings: bool = False
    init_std: float = 0.02
    # Llama 3.1/3.3 "llama3" RoPE scaling: (factor, low_freq_factor, high_freq_factor,
    # original_max_position_embeddings); None = plain RoPE.
    rope_scaling: tuple[float, float, float, int] | None = None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def layer_params(self) -> int:
        h, f = self.hidden_size, self.intermediate_size
        attn = h * h * 2 + h * self.kv_dim * 2  # q, o, k, v
        mlp = 3 * h * f
        norms = 2 * h
        return attn + mlp + norms

    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)

    def num_params(self) -> int:
        return self.num_layers * self.layer_params() + self.embedding_params() + self.hidden_size

    def input_embedding_params(self) -> int:
        """The input embedding's parameters: a table lookup, no matmul. With tied embeddings the
        same matrix is the output head, which does a matmul, so nothing is subtracted."""
        return 0 if self.tie_embeddings else self.vocab_size * self.hidden_size

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token, counted as torchtitan does: 6 x (parameters minus the input
        embedding) for the matmuls of forward and backward, plus 12 x layers x hidden x sequence for
        the attention scores and values (full causal square, as torchtitan). Recomputation
        (activation checkpointing, chunked-loss head) earns no credit: this is the model's work."""
        dense = self.num_params() - self.input_embedding_params()
        return 6.0 * dense + 12.0 * self.num_layers * self.hidden_size * seq_len

    def with_layers(self, num_layers: int) -> ModelConfig:
        """A slice of this model: same width and heads, fewer decoder layers."""
        return replace(self, name=f"{self.name}-slice{num_layers}", num_layers=num_layers)


def llama3_70b() -> ModelConfig:
    return ModelConfig("llama3_70b", vocab_size=128256, hidden_size=8192, intermediate_size=28672,
                       num_layers=80, num_heads=64, num_kv_heads=8)


def llama3_8b() -> ModelConfig:
    return ModelConfig("llama3_8b", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                       num_layers=32, num_heads=32, num_kv_heads=8)


def llama3_1b() -> ModelConfig:
    """The 1B-class proxy: Llama 3.2 1B's shape with untied embeddings (1.50B parameters)."""
    return ModelConfig("llama3_1b", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                       num_layers=16, num_heads=32, num_kv_heads=8)


def tiny() -> ModelConfig:
    """CI model: a few hundred thousand parameters, same architecture."""
    return ModelConfig("tiny", vocab_size=512, hidden_size=64, intermediate_size=176, num_layers=2,
                       num_heads=4, num_kv_heads=2, rope_theta=10000.0, max_seq_len=512)


MODELS: dict[str, Callable[[], ModelConfig]] = {
    "llama3_70b": llama3_70b,
    "llama3_8b": llama3_8b,
    "llama3_1b": llama3_1b,
    "tiny": tiny,
}


def model_config(name: str) -> ModelConfig:
    """Look a model up by name; `NAME-sliceK` keeps the first K decoder layers of NAME."""
    base, _, sliced = name.partition("-slice")
    if base not in MODELS:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(sorted(MODELS))}")
    cfg = MODELS[base]()
    return cfg.with_layers(int(sliced)) if sliced else cfg


@dataclass(frozen=True)
class TrainConfig:
    """What a run does, apart from the model's shape. Defaults are the production ones."""

    seq_len: int = 4096
    micro_batch: int = 2
    grad_accum: int = 1
    steps: int = 1000
    lr: float = 3e-4
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    seed: int = 1234
    activation_checkpoint: str = "none"  # none | full | selective (every k-th layer) | ops (save matmuls)
    ac_every: int = 2
    ac_layers: int = 0  # selective: checkpoint the first K decoder layers (0: every ac_every-th)
    compile: bool = False
    # FSDP2: free each layer's gathered weights after forward (True) or keep them for backward
    # (False: no second all-gather, costs one bf16 copy of the model; pays on few GPUs).
    reshard_after_forward: bool = True
    cpu_offload: bool = False  # FSDP2: parameters, gradients and optimizer state in host memory
    # DeepSpeed: "torch" = PyTorch's AdamW (no compiler needed); "fused" = DeepSpeed's FusedAdam,
    # JIT-built with nvcc at first use.
    deepspeed_optimizer: str = "torch"
    # DeepSpeed bucket sizes: "hidden" = Hugging Face's "auto" rules (reduce h², prefetch 0.9·h²);
    # "layer" = one decoder layer's parameters, so the next layer is fetched whole while this one computes.
    zero3_buckets: str = "layer"
    # FSDP2 on CUDA: "compute" = gradient buffers from the compute stream's pool (training/engines/fsdp.py);
    # "reduce-scatter" = FSDP2's own, for comparison.
    grad_pool: str = "compute"
    document_mask: bool = False  # True: attention within each document; False: positions reset only
    document_mask_kernel: str = "flex"  # flex: flex_attention block mask (no S x S tensor); dense: SDPA + [B,1,S,S]
    loss_chunk_tokens: int = 4096
    checkpoint_every: int = 200
    keep_checkpoints: int = 2
    log_every: int = 1
    gc_every: int = 50
    slow_step_factor: float = 3.0
    slow_step_window: int = 20
    slow_step_dumps_first: int = 3  # stack dumps for the first slow steps, then rate-limited
    slow_step_dump_interval_s: float = 600.0  # at most one stack dump per this many seconds after those

    def __post_init__(self) -> None:
        if self.activation_checkpoint not in ACTIVATION_CHECKPOINT_MODES:
            raise ValueError(f"activation_checkpoint must be one of {ACTIVATION_CHECKPOINT_MODES}")
        if self.zero3_buckets not in ("hidden", "layer"):
            raise ValueError("zero3_buckets is hidden or layer")
        if self.grad_pool not in ("compute", "reduce-scatter"):
            raise ValueError("grad_pool is compute or reduce-scatter")
        if self.deepspeed_optimizer not in ("torch", "fused"):
            raise ValueError("deepspeed_optimizer is torch or fused")
        if self.document_mask_kernel not in ("flex", "dense"):
            raise ValueError("document_mask_kernel is flex or dense")
        if self.ac_layers < 0:
            raise ValueError("ac_layers must be >= 0")
        if self.micro_batch < 1 or self.grad_accum < 1 or self.seq_len < 2:
            raise ValueError("micro_batch, grad_accum >= 1 and seq_len >= 2 are required")


def recommended_train(model: str) -> TrainConfig:
    """Per-model run defaults (command-line flags override each field). The 8B and 1B settings are
    the fastest measured on 2x H200 (training/PERFORMANCE.md); 70B follows the memory plan
    (`python -m training plan`): one sequence per GPU with full activation checkpointing."""
    base = model.partition("-slice")[0]
    if base == "llama3_70b":
        return TrainConfig(micro_batch=1, grad_accum=4, activation_checkpoint="full", compile=True,
                           checkpoint_every=500)
    if base == "llama3_8b":
        return TrainConfig(micro_batch=2, grad_accum=2, compile=True, reshard_after_forward=False,
                           loss_chunk_tokens=8192)
    if base == "llama3_1b":
        return TrainConfig(micro_batch=4, compile=True, loss_chunk_tokens=16384)
    if base == "tiny":
        return TrainConfig(seq_len=128, micro_batch=2, steps=20, warmup_steps=2, lr=3e-3, checkpoint_every=10,
                           loss_chunk_tokens=96)
    return TrainConfig()
