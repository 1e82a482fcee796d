"""Fixtures: tiny random checkpoints written in each family's real key layout and config format.

The weights come from transformers' own Qwen2 and Llama implementations, so the same objects
serve as the reference in the parity tests. A small byte-level BPE makes text round-trip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
import torch
from lsp_client import SERVER
from pytest_lsp import ClientServerConfig, LanguageClient
from safetensors.torch import save_file

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"  # fixture files: grammars/, syntax/
ROOT = TESTS.parent  # the repository
VOCAB = 320
EOS_ID, MASK_ID = 0, 1

TEXT = (
    "def add(a, b):\n    return a + b\n\n\nclass Point:\n    def __init__(self, x, y):\n"
    "        self.x = x\n        self.y = y\n\n    def norm(self):\n"
    "        return (self.x ** 2 + self.y ** 2) ** 0.5\n"
)


def write_tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<|endoftext|>", "<|mask|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([TEXT] * 4, trainer)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "mask_token": "<|mask|>",
            }
        )
    )


def save_shards(path: Path, state: dict[str, torch.Tensor], shards: int) -> None:
    state = {k: v.detach().clone().contiguous() for k, v in state.items()}
    if shards == 1:
        save_file(state, str(path / "model.safetensors"))
        return
    keys = sorted(state)
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = keys[i::shards]
        save_file({k: state[k] for k in part}, str(path / name))
        weight_map.update(dict.fromkeys(part, name))
    (path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )


def make_dream(path: Path, shards: int = 1, seed: int = 0, layers: int = 2) -> Any:
    """A tiny Dream checkpoint (Qwen2 names, q/k/v bias, GQA). Returns the HF reference model."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    ref = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():  # HF zero-inits biases; make them count in the parity test
        for name, p in ref.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["DreamModel"],
        "model_type": "Dream",
        "auto_map": {"AutoModel": "modeling_dream.DreamModel"},
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 512,
        "tie_word_embeddings": False,
        "mask_token_id": MASK_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
        "bos_token_id": EOS_ID,
        "torch_dtype": "float32",
    }
    (path / "config.json").write_text(json.dumps(config))
    save_shards(path, ref.state_dict(), shards)
    write_tokenizer(path)
    return ref


LLAMA_TO_LLADA = {
    "model.embed_tokens.weight": "model.transformer.wte.weight",
    "model.norm.weight": "model.transformer.ln_f.weight",
    "lm_head.weight": "model.transformer.ff_out.weight",
    "self_attn.q_proj": "q_proj",
    "self_attn.k_proj": "k_proj",
    "self_attn.v_proj": "v_proj",
    "self_attn.o_proj": "attn_out",
    "mlp.gate_proj": "ff_proj",
    "mlp.up_proj": "up_proj",
    "mlp.down_proj": "ff_out",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ff_norm",
}


def llada_name(llama_key: str) -> str:
    if llama_key in LLAMA_TO_LLADA:
        return LLAMA_TO_LLADA[llama_key]
    _, _, n, rest = llama_key.split(".", 3)  # model.layers.N.<module>.<param>
    module, param = rest.rsplit(".", 1)
    return f"model.transformer.blocks.{n}.{LLAMA_TO_LLADA[module]}.{param}"


def make_llada(
    path: Path,
    shards: int = 1,
    seed: int = 0,
    vocab: int = VOCAB,
    overrides: dict[str, Any] | None = None,
) -> Any:
    """A tiny LLaDA checkpoint in OLMo names, mapped from a Llama reference of `vocab` rows;
    `overrides` replace config keys (None removes one): a family in LLaDA's layout under other
    names (MMaDA)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        attn_implementation="eager",
    )
    ref = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    path.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "auto_map": {"AutoModel": "modeling_llada.LLaDAModelLM"},
        "d_model": 64,
        "n_heads": 4,
        "n_kv_heads": 4,
        "n_layers": 2,
        "mlp_hidden_size": 160,
        "vocab_size": vocab,
        "embedding_size": vocab,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5,
        "max_sequence_length": 512,
        "block_type": "llama",
        "layer_norm_type": "rms",
        "include_bias": False,
        "weight_tying": False,
        "mask_token_id": MASK_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": EOS_ID,
    }
    for key, value in (overrides or {}).items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (path / "config.json").write_text(json.dumps(config))
    save_shards(path, {llada_name(k): v for k, v in ref.state_dict().items()}, shards)
    write_tokenizer(path)
    return ref


def reference_logits(ref: Any, ids: torch.Tensor, shift: bool) -> torch.Tensor:
    """The HF model run non-causally: a full (all-zero additive) 4D mask, is_causal off."""
    for module in ref.modules():
        if hasattr(module, "is_causal"):
            module.is_causal = False
    b, n = ids.shape
    mask = torch.zeros(b, 1, n, n)
    with torch.no_grad():
        out = ref(input_ids=ids, attention_mask=mask).logits  # a 4D mask is used as given
    return torch.cat([out[:, :1], out[:, :-1]], dim=1) if shift else out


@pytest.fixture(scope="session", autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The language servers the tests start (and the editors that start them) keep their
    acceptance counts here, never in the user's own state directory
    (lsp_server/protocol/telemetry.py)."""
    import os

    path = tmp_path_factory.mktemp("state")
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(path)
    yield path
    if old is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = old


@pytest.fixture(scope="session")
def dream_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dream")
    make_dream(path)
    return path


@pytest.fixture(scope="session")
def dream_engine(dream_dir: Path) -> Iterator[Any]:
    from infill_engine import load

    engine = load(str(dream_dir), device="cpu")
    yield engine
    engine.close()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    """The real server over stdio with pytest-lsp's client; shut down after the test."""
    yield
    await lsp_client.shutdown_session()


def biased(engine: Any, token: int, bias: float) -> torch.nn.Linear:
    """Give lm_head a bias towards one token (a real model made to want it everywhere); returns
    the old head, to put back."""
    old = engine.model.lm_head
    new = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    with torch.no_grad():
        new.weight.copy_(old.weight)
        new.bias.zero_()
        new.bias[token] = bias
    engine.model.lm_head = new
    return old


def greedy_reference(
    engine: Any,
    prefix: str,
    suffix: str,
    span: int,
    block_size: int,
    tau: float,
    min_tokens: int = 0,
) -> list[int]:
    """Greedy threshold decoding recomputed from scratch, one `engine.logits` full pass per step
    (decode.py's rule written out: every masked position with p >= tau, and the most likely
    one; end tokens held off the first min_tokens positions; then the end-token rule); the ids
    of the fill."""
    mask, ends = engine.mask_id, list(engine.end_ids)
    before, after = engine.encode(prefix), engine.encode(suffix)
    canvas = torch.tensor(before + [mask] * span + after)
    lo, hi = len(before), len(before) + span
    for start in range(lo, hi, block_size):
        stop = min(start + block_size, hi)
        while bool((canvas[start:stop] == mask).any()):
            logits = engine.logits(canvas[None])[0, start:stop].clone()
            logits[:, [mask, *engine.reserved_ids]] = -torch.inf
            early = min_tokens - (start - lo)
            if early > 0:
                logits[:early, ends] = -torch.inf
            conf, token = torch.softmax(logits, dim=-1).max(dim=-1)
            masked = canvas[start:stop] == mask
            scores = conf.masked_fill(~masked, -torch.inf)
            pick = masked & (scores >= tau)
            pick[scores.argmax()] = True
            canvas[start:stop][pick] = token[pick]
            hits = [i for i, t in enumerate(canvas[lo:hi].tolist()) if t in ends]
            if hits:
                canvas[lo + hits[0] + 1 : hi] = ends[0]
    ids = canvas[lo:hi].tolist()
    hits = [i for i, t in enumerate(ids) if t in ends]
    return ids[: hits[0]] if hits else ids


EDITORS = Path(__file__).resolve().parent / "editors"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/editors drives a real editor: marked `editors`, so that `make
    test` leaves them out (deselected, not skipped) and `make editor-test` runs them (`-m
    editors`, DLLM_EDITOR_TESTS=1), whatever the order of the files."""
    for item in items:
        if EDITORS in Path(item.path).parents:
            item.add_marker(pytest.mark.editors)
