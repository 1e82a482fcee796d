"""The transformer all families share: RMSNorm, rotate-half RoPE, GQA attention, SwiGLU.

Options cover the newer layouts: `qk_norm` (an RMSNorm over each head's query and key before
RoPE: Qwen3, CoDA, LLaDA-MoE, LLaDA2), `rotary_dim` (RoPE on the first dims of each head only:
LLaDA2), and `num_experts` (a routed mixture of SwiGLU experts in place of the dense MLP:
LLaDA-MoE's softmax router; LLaDA2's sigmoid router with a choice-only bias, expert groups, a
scaling factor, a shared expert and dense first layers).

Pure nn.Modules: no I/O, no scheduling, no decoding policy. A family module (dream.py, llada.py)
turns its config.json into `ModelArgs` and supplies the table that maps its checkpoint names onto
the parameter names used here.

Attention is bidirectional (masked diffusion). Which keys a query may see is decided by the caller
through a boolean key mask; the K/V that a forward pass attends to can come from a `KVStore`, which
is how the prefix and dual caches (cache.py) freeze K/V outside the span being decoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True)
class ModelArgs:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int  # < num_heads means grouped-query attention
    head_dim: int
    rope_theta: float
    rms_norm_eps: float
    qkv_bias: bool  # Qwen2/Dream have q/k/v biases; LLaDA has none
    tie_embeddings: bool  # lm_head shares the token embedding
    max_positions: int
    # 1: the token at position i is scored from hidden state i-1 (Dream, an AR-initialised
    # layout); position 0 reads its own state. 0: position i reads state i (LLaDA).
    logits_shift: int
    # Per-head RMSNorm (head_dim wide) on q and k before RoPE, as Qwen3 does; OLMoE's own
    # q/k norm spans all heads at once and is a different function.
    qk_norm: bool = False
    # 0: one dense SwiGLU MLP per block. Otherwise each token's MLP output is the routed sum of
    # `experts_per_token` of `num_experts` SwiGLU experts, each `intermediate_size` wide.
    num_experts: int = 0
    experts_per_token: int = 0
    # True: the kept routing weights are rescaled to sum to 1; False: they stay softmax
    # probabilities over all experts (LLaDA-MoE, OLMoE).
    norm_topk_prob: bool = False
    # RoPE on the first `rotary_dim` dims of each head, the rest passed through (LLaDA2: half
    # of 128). None: the whole head.
    rotary_dim: int | None = None
    # "softmax": probabilities over all experts choose and weight. "sigmoid" (LLaDA2, DeepSeek-V3
    # style): independent sigmoid scores weight the chosen experts; a per-expert bias
    # (`mlp.expert_bias`) is added to the scores for choosing only.
    router: str = "softmax"
    # Sigmoid routing only: experts fall into `expert_groups` equal groups, each scored by the
    # sum of its two best biased scores; a token chooses among the `groups_per_token` best groups.
    expert_groups: int = 1
    groups_per_token: int = 1
    routed_scaling: float = 1.0  # the routed sum is multiplied by this (LLaDA2: 2.5)
    # >0: a shared SwiGLU expert this wide runs on every token beside the routed ones.
    shared_expert_size: int = 0
    # The first `dense_layers` blocks keep a dense SwiGLU MLP `dense_intermediate_size` wide.
    dense_layers: int = 0
    dense_intermediate_size: int = 0

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.logits_shift not in (0, 1):
            raise ValueError(f"logits_shift must be 0 or 1, got {self.logits_shift}")
        if self.num_experts < 0 or (
            self.num_experts and not 1 <= self.experts_per_token <= self.num_experts
        ):
            raise ValueError(
                f"experts_per_token must be in 1..num_experts, got {self.experts_per_token} "
                f"of {self.num_experts}"
            )
        rd = self.head_dim if self.rotary_dim is None else self.rotary_dim
        if not 0 < rd <= self.head_dim or rd % 2:
            raise ValueError(f"rotary_dim must be even and in 1..head_dim, got {rd}")
        if self.router not in ("softmax", "sigmoid"):
            raise ValueError(f"router must be 'softmax' or 'sigmoid', got {self.router!r}")
        groups, per = self.expert_groups, self.groups_per_token
        if self.num_experts and (
            self.num_experts % groups
            or not 1 <= per <= groups
            or (groups > 1 and self.num_experts // groups < 2)
            or self.experts_per_token > per * (self.num_experts // groups)
        ):
            raise ValueError(
                f"{self.num_experts} experts in {groups} groups, {per} kept per token, cannot "
                f"supply {self.experts_per_token} experts per token"
            )
        if self.dense_layers and self.dense_intermediate_size <= 0:
            raise ValueError("dense_layers needs a positive dense_intermediate_size")

    @property
    def rope_dim(self) -> int:
        return self.head_dim if self.rotary_dim is None else self.rotary_dim


class KVStore(Protocol):
    """Where a layer's fresh K/V go, and which K/V its queries attend to."""

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]: ...


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        # Normalise in fp32 as both reference implementations do; cast back before the scale.
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rope_cos_sin(
    positions: Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """positions [B, T] -> cos, sin [B, 1, T, head_dim], computed in fp32. Under partial rotary
    `head_dim` is the rotary width: the frequencies are spread over those dims alone."""
    inv_freq = 1.0 / (
        theta
        ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    )
    freqs = positions.float()[..., None] * inv_freq  # [B, T, D/2]
    emb = torch.cat((freqs, freqs), dim=-1)  # [B, T, D]
    return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate-half RoPE (the Llama/Qwen2/LLaDA convention) on the first R = cos.shape[-1] dims;
    the remaining D - R pass through (partial rotary). x [B, H, T, D]."""
    r = cos.shape[-1]
    if r < x.shape[-1]:
        return torch.cat((apply_rope(x[..., :r], cos, sin), x[..., r:]), dim=-1)
    half = r // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, args: ModelArgs, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.n_heads, self.n_kv, self.head_dim = args.num_heads, args.num_kv_heads, args.head_dim
        d, hd = args.hidden_size, args.head_dim
        self.q_proj = nn.Linear(d, self.n_heads * hd, bias=args.qkv_bias)
        self.k_proj = nn.Linear(d, self.n_kv * hd, bias=args.qkv_bias)
        self.v_proj = nn.Linear(d, self.n_kv * hd, bias=args.qkv_bias)
        self.o_proj = nn.Linear(self.n_heads * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, args.rms_norm_eps) if args.qk_norm else None
        self.k_norm = RMSNorm(hd, args.rms_norm_eps) if args.qk_norm else None

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, store: KVStore | None
    ) -> Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)  # over head_dim, per head
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # [B, H, T, D]
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)  # [B, H, T, D]
        # Stores receive keys *after* RoPE: a cached key is final for its absolute position.
        if store is not None:
            k, v = store.update(self.layer, k, v)  # [B, Hkv, S, D]
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=self.n_kv != self.n_heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, args: ModelArgs, width: int | None = None) -> None:
        super().__init__()
        width = width or args.intermediate_size
        self.gate_proj = nn.Linear(args.hidden_size, width, bias=False)
        self.up_proj = nn.Linear(args.hidden_size, width, bias=False)
        self.down_proj = nn.Linear(width, args.hidden_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    """Top-k routed SwiGLU experts, plus an optional shared expert.

    The router (`gate`) scores every expert in one of two ways. "softmax" (LLaDA-MoE, OLMoE,
    Qwen3-MoE): softmax in fp32 over all experts; the `experts_per_token` most probable are kept
    with those probabilities as weights. "sigmoid" (LLaDA2; DeepSeek-V3 and GLM-4.5 route the same
    way): the gate runs in fp32 and each expert gets an independent sigmoid score; `expert_bias`
    is added to the scores for choosing only; with expert groups a token first keeps the
    `groups_per_token` groups whose two best biased scores sum highest, then its top experts
    within them; the unbiased scores of the chosen experts are the weights. Either way the kept
    weights are rescaled to sum to 1 under `norm_topk_prob`, then multiplied by `routed_scaling`.
    Experts run one after the other on the rows routed to them, so a pass costs the active
    experts, not all of them.
    """

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.top_k, self.renormalise = args.experts_per_token, args.norm_topk_prob
        self.sigmoid, self.scaling = args.router == "sigmoid", args.routed_scaling
        self.groups, self.groups_per_token = args.expert_groups, args.groups_per_token
        self.gate = nn.Linear(args.hidden_size, args.num_experts, bias=False)
        self.experts = nn.ModuleList(MLP(args) for _ in range(args.num_experts))
        if self.sigmoid:  # [E]; set by load balancing, not by gradient; loaded in fp32
            bias = torch.zeros(args.num_experts, dtype=torch.float32)
            self.expert_bias = nn.Parameter(bias, requires_grad=False)
        shared = args.shared_expert_size
        self.shared_experts = MLP(args, shared) if shared else None

    def route(self, flat: Tensor) -> tuple[Tensor, Tensor]:
        """flat [N, D] -> weights [N, k] (fp32), chosen expert ids [N, k]."""
        if not self.sigmoid:
            scores = F.softmax(self.gate(flat), dim=-1, dtype=torch.float32)  # [N, E]
            weights, chosen = scores.topk(self.top_k, dim=-1)
        else:
            scores = F.linear(flat.float(), self.gate.weight.float()).sigmoid()  # [N, E]
            biased = scores + self.expert_bias.float()
            if self.groups > 1:
                grouped = biased.view(flat.shape[0], self.groups, -1)  # [N, G, E/G]
                best = grouped.topk(2, dim=-1).values.sum(-1)  # [N, G]
                kept = best.topk(self.groups_per_token, dim=-1).indices
                mask = torch.zeros_like(best, dtype=torch.bool).scatter_(1, kept, True)
                biased = grouped.masked_fill(~mask[..., None], float("-inf")).flatten(1)
            chosen = biased.topk(self.top_k, dim=-1).indices  # [N, k]
            weights = scores.gather(1, chosen)
        if self.renormalise:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        return weights * self.scaling, chosen

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(-1, x.shape[-1])  # [N, D], N = B*T
        weights, chosen = self.route(flat)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == e)  # the tokens routed to e, and which of their k
            out.index_add_(0, rows, expert(flat[rows]) * weights[rows, slot, None])
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        return out.view_as(x)


class Block(nn.Module):
    def __init__(self, args: ModelArgs, layer: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.self_attn = Attention(args, layer)
        self.post_attention_layernorm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        if layer < args.dense_layers:  # LLaDA2's first block: dense, and wider than an expert
            self.mlp: nn.Module = MLP(args, args.dense_intermediate_size)
        else:
            self.mlp = MoE(args) if args.num_experts else MLP(args)

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, store: KVStore | None
    ) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask, store)
        return x + self.mlp(self.post_attention_layernorm(x))


class DiffusionTransformer(nn.Module):
    """A bidirectional decoder stack. Parameter names follow the Qwen2 layout."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = nn.ModuleList(Block(args, i) for i in range(args.num_layers))
        self.norm = RMSNorm(args.hidden_size, args.rms_norm_eps)
        self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)
        if args.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(
        self,
        input_ids: Tensor,
        positions: Tensor,
        mask: Tensor | None = None,
        store: KVStore | None = None,
        score: Tensor | None = None,
    ) -> Tensor:
        """Raw (unshifted) logits.

        input_ids, positions: [B, T]. mask: bool, broadcastable to [B, 1, T, S], True = may attend.
        store: supplies the K/V attended to (S keys); without it the T tokens attend to themselves.
        score: [B, N] indices into T; only those rows go through lm_head (the vocabulary
        projection dominates a full pass over a long canvas). Returns [B, N or T, V].
        """
        x = self.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(positions, self.args.rope_dim, self.args.rope_theta, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask, store)
        x = self.norm(x)
        if score is not None:
            x = torch.gather(x, 1, score[..., None].expand(-1, -1, x.shape[-1]))
        return self.lm_head(x)
