"""Hugging Face-format model directory -> family, `ModelArgs`, weights and tokenizer.

Nothing from the directory is ever executed: config.json is read as data (its `auto_map` is
ignored), weights come only from safetensors files, and the tokenizer is loaded with
`trust_remote_code=False` (falling back to the plain tokenizer.json when the directory names a
custom tokenizer class). `ORG/NAME[@REVISION]` resolves through hub.py, which downloads only
those files into the Hugging Face cache and refuses pickle-only and code-only repositories; a
name of that form is the Hub's even beside a folder of the same name (`locate`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import Tensor, nn

from . import hub
from .fields import is_number
from .model_names import HubError, HubName, parse_name, quoted
from .models import FAMILIES, QWEN2_DIFFUSION, DiffusionTransformer, Family, ModelArgs
from .models.family import as_id_list

log = logging.getLogger(__name__)

BUILTIN_DIR = Path(__file__).parent / "assets" / "builtin"


class ModelLoadError(ValueError):
    """A model directory that cannot be used; the message names the file, field or tensor."""


@dataclass(frozen=True)
class LoadedModel:
    model: DiffusionTransformer
    family: Family
    tokenizer: Any | None  # a transformers PreTrainedTokenizerBase
    mask_id: int
    end_ids: tuple[int, ...]
    path: Path
    threshold: float | None = None  # the τ the directory recommends (generation_config.json)
    # DreamOn's <|expand|>/<|delete|>, from config.json or the tokenizer: never text; applied
    # only by variable-length decoding (InfillParams.expand)
    expand_id: int | None = None
    delete_id: int | None = None


def resolve_model_dir(
    model: str | os.PathLike[str] | HubName,
    progress: hub.Progress | None = None,
    qwen2_as_diffusion: bool = False,
) -> Path:
    """`"builtin"`, a directory, or `ORG/NAME[@REVISION]` from the Hub (hub.py: into the HF
    cache, only the files read here; `progress` hears the download's byte counts, and the
    note of `locate` when a folder of the same name is here)."""
    where = locate(model, progress)
    if isinstance(where, Path):
        return where
    try:
        return hub.fetch(where, progress, check=lambda c: pick_family(c, qwen2_as_diffusion))
    except HubError as e:
        raise ModelLoadError(str(e)) from None


def locate(
    model: str | os.PathLike[str] | HubName, tell: Callable[[str], None] | None = None
) -> Path | HubName:
    """Which model `model` names, before anything is read or downloaded: the builtin
    directory, a model directory, or a Hub name.

    A text of the Hub's form (`ORG/NAME[@REVISION]`) is the Hub's model even where a folder of
    that name is in the working directory (a workspace the editor opened, a cloned repository):
    a folder must not stand in for the model asked for unseen. One line, logged and sent to
    `tell`, says so; `./ORG/NAME` or an absolute path names the folder. A name too long, a
    revision that is no branch, tag or commit name, and a path the system refuses (too long,
    ...) are one-line ModelLoadErrors. A HubName is located already (serve locates once, so
    the line is said once) and is returned as it is."""
    if isinstance(model, HubName):
        return model
    text = str(model)
    if text == "builtin":
        if not (BUILTIN_DIR / "config.json").is_file():
            raise ModelLoadError(f"the builtin model is missing from {BUILTIN_DIR}")
        return BUILTIN_DIR
    try:
        name = parse_name(text)
    except HubError as e:
        raise ModelLoadError(str(e)) from None
    if name is not None:
        if _is_dir(Path(text)):
            note = (
                f"model {text!r}: loading the Hub model; the folder ./{text} here is not used "
                f"(write ./{text} to load the folder)"
            )
            log.warning("%s", note)
            if tell is not None:
                tell(note)
        return name
    path = Path(text).expanduser()
    try:
        if path.is_dir():
            return path
        is_file = path.exists()
    except OSError as e:  # a name the system refuses: too long, ...
        why = e.strerror or type(e).__name__
        raise ModelLoadError(f"model {quoted(text)}: not a usable path ({why})") from None
    if is_file:
        raise ModelLoadError(f"model path {path} is a file; expected a model directory")
    raise ModelLoadError(
        f"model {quoted(text)}: no such directory, and not a Hub name (ORG/NAME[@REVISION])"
    )


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def read_config(path: Path) -> dict[str, Any]:
    file = path / "config.json"
    if not file.is_file():
        raise ModelLoadError(f"{path}: missing config.json")
    try:
        config = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{file}: not valid JSON ({e})") from e
    if not isinstance(config, dict):
        raise ModelLoadError(f"{file}: expected a JSON object")
    return config


def read_threshold(path: Path) -> float | None:
    """The confidence threshold τ a model dir recommends: `threshold` in generation_config.json,
    where Hugging Face directories keep their decoding defaults. None when it names none."""
    file = path / "generation_config.json"
    if not file.is_file():
        return None
    try:
        gen = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{file}: not valid JSON ({e})") from e
    tau = gen.get("threshold") if isinstance(gen, dict) else None
    if tau is None:
        return None
    if not is_number(tau) or not 0 < tau <= 1:
        raise ModelLoadError(f"{file}: threshold must be a number in (0, 1], got {tau!r}")
    return float(tau)


def pick_family(config: dict[str, Any], qwen2_as_diffusion: bool = False) -> Family:
    model_type = config.get("model_type")
    for family in FAMILIES:
        if family.matches(config):
            return family
    if model_type in QWEN2_DIFFUSION.model_types:
        if qwen2_as_diffusion:
            return QWEN2_DIFFUSION
        raise ModelLoadError(
            "model_type 'qwen2' is an autoregressive layout; pass qwen2_as_diffusion=True "
            "(CLI: --qwen2-diffusion) if this checkpoint was trained as a diffusion model"
        )
    known = sorted({t for f in FAMILIES for t in f.model_types})
    raise ModelLoadError(f"unknown model_type {model_type!r}; supported: {', '.join(known)}")


def weight_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ModelLoadError(f"{index}: not a valid safetensors index ({e})") from e
        files = sorted({path / name for name in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ModelLoadError(f"{index} names missing shard(s): {', '.join(missing)}")
        return files
    single = path / "model.safetensors"
    if single.is_file():
        return [single]
    if list(path.glob("*.bin")) or list(path.glob("*.pt")):
        raise ModelLoadError(
            f"{path}: only pickle weights (*.bin/*.pt) found; they can run code on load, "
            "so only safetensors are accepted"
        )
    raise ModelLoadError(f"{path}: missing model.safetensors (or model.safetensors.index.json)")


def load_weights(
    path: Path, family: Family, model: DiffusionTransformer, dtype: torch.dtype
) -> dict[str, Tensor]:
    """Read, rename and shape-check every tensor; returns a state dict for `model`."""
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    optional = set()
    if model.args.tie_embeddings:
        if family.stored_head_wins:
            optional.add("lm_head.weight")  # used when stored; the embedding otherwise
        else:
            expected.pop("lm_head.weight", None)
    state: dict[str, Tensor] = {}
    ignored: list[str] = []
    for file in weight_files(path):
        try:
            ignored += _read_weights(file, family, expected, dtype, state)
        except ModelLoadError:
            raise
        except Exception as e:  # safetensors raises its own error type for a corrupt file
            raise ModelLoadError(f"{file}: not a readable safetensors file ({e})") from e
    missing = sorted(set(expected) - set(state) - optional)
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise ModelLoadError(f"{path}: {len(missing)} weight(s) missing, e.g. {shown}")
    if ignored:
        log.warning("ignored %d tensors not used by %s: %s", len(ignored), family.name, ignored[:5])
    return state


def _read_weights(
    file: Path,
    family: Family,
    expected: dict[str, tuple[int, ...]],
    dtype: torch.dtype,
    state: dict[str, Tensor],
) -> list[str]:
    """Add one safetensors file's tensors to `state`; returns the keys it ignored."""
    ignored = []
    with safe_open(str(file), framework="pt", device="cpu") as f:
        for key in f.keys():  # noqa: SIM118 (safe_open is not a Mapping)
            name = family.our_name(key)
            parts = [name] if name in expected else family.parts(name or "")
            if name is None or not parts or any(p not in expected for p in parts):
                ignored.append(key)
                continue
            tensor = f.get_tensor(key)
            if family.text_rows and parts[0] in ("embed_tokens.weight", "lm_head.weight"):
                tensor = tensor[: expected[parts[0]][0]].clone()  # MMaDA: image codes dropped
            sizes = [expected[p][0] for p in parts]
            want = (sum(sizes), *expected[parts[0]][1:])
            if tuple(tensor.shape) != want:
                raise ModelLoadError(
                    f"{file.name}: tensor {key!r} has shape {tuple(tensor.shape)}, "
                    f"expected {want} from config.json"
                )
            for part, piece in zip(parts, tensor.split(sizes), strict=True):
                # a router's choice-only bias stays fp32: bf16 would merge near-equal experts
                keep = torch.float32 if part.endswith(".expert_bias") else dtype
                state[part] = piece.to(keep)
    return ignored


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # it warns that it does not know our model_type; we do
    try:
        return AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
    except (ValueError, OSError, KeyError, TypeError) as e:
        file = path / "tokenizer.json"
        if not file.is_file():
            raise ModelLoadError(f"{path}: no usable tokenizer files ({e})") from e
        log.info("AutoTokenizer refused %s (%s); using tokenizer.json directly", path, e)
        try:
            return PreTrainedTokenizerFast(tokenizer_file=str(file))
        except Exception as e2:  # the tokenizers library raises a bare Exception
            raise ModelLoadError(f"{file}: not a readable tokenizer ({e2})") from e2
    finally:
        hf_logging.set_verbosity(verbosity)


def special_ids(
    config: dict[str, Any], family: Family, tokenizer: Any | None, vocab: int
) -> tuple[int, tuple[int, ...]]:
    mask_id = config.get("mask_token_id", family.default_mask_id)
    if mask_id is None and tokenizer is not None:
        mask_id = tokenizer.mask_token_id
        if mask_id is None:
            for name in ("<|mask|>", "<mask>", "[MASK]"):
                tid = tokenizer.convert_tokens_to_ids(name)
                if isinstance(tid, int) and tid != tokenizer.unk_token_id:
                    mask_id = tid
                    break
    if mask_id is None:
        raise ModelLoadError(
            "no mask token: config.json lacks mask_token_id and so does the tokenizer"
        )
    ends = as_id_list(config.get("eos_token_id")) + as_id_list(config.get("pad_token_id"))
    ends += list(family.extra_end_ids)
    if tokenizer is not None and tokenizer.eos_token_id is not None:
        ends.append(int(tokenizer.eos_token_id))
    ends = [e for e in dict.fromkeys(ends) if 0 <= e < vocab and e != mask_id]
    if not 0 <= int(mask_id) < vocab:
        raise ModelLoadError(f"mask_token_id {mask_id} is outside the vocabulary ({vocab})")
    if not ends:
        raise ModelLoadError("no end token: config.json has no eos_token_id or pad_token_id")
    return int(mask_id), tuple(ends)


CONTROL_TOKENS = (("expand_token_id", "<|expand|>"), ("delete_token_id", "<|delete|>"))


def control_ids(
    config: dict[str, Any], tokenizer: Any | None, vocab: int, end_ids: tuple[int, ...]
) -> list[int | None]:
    """DreamOn's expand and delete ids: config.json's `expand_token_id` / `delete_token_id`,
    else the tokenizer's `<|expand|>` / `<|delete|>` tokens. An id outside the vocabulary is
    dropped.

    A directory with an expand token and no delete token follows DreamOn-v0's own convention:
    its tokenizer has `<|expand|>` (151667) and no delete token, and its generator deletes an
    end token committed inside the middle (`delete_eos_token`). There the delete id is the
    tokenizer's eos (else the config's first end id), which stays an end token for requests that
    do not ask for variable-length decoding."""
    out: list[int | None] = []
    for key, token in CONTROL_TOKENS:
        i = config.get(key)
        if not isinstance(i, int) and tokenizer is not None:
            i = tokenizer.get_vocab().get(token)
        out.append(int(i) if isinstance(i, int) and 0 <= i < vocab else None)
    if out[0] is not None and out[1] is None and end_ids:
        eos = getattr(tokenizer, "eos_token_id", None)
        out[1] = int(eos) if isinstance(eos, int) and eos in end_ids else end_ids[0]
    return out


def build_model(
    args: ModelArgs, state: dict[str, Tensor], device: torch.device, quantize: str = "none"
) -> DiffusionTransformer:
    with torch.device("meta"):
        model = DiffusionTransformer(args)
    model.load_state_dict(state, strict=False, assign=True)
    if args.tie_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    if quantize == "none":
        return model.to(device).eval()
    # weight-only (quantize.py), one block at a time on its device: the device never holds more
    # than one block at the load precision (a 7B model at int4 loads on a 12 GB card; fits.py)
    from .quantize import quantize_model

    for block in model.layers:
        holder = nn.Module()
        holder.layers = nn.ModuleList([block])  # quantize.py takes the linears under "layers."
        quantize_model(holder.to(device), quantize)
    for name, child in model.named_children():
        if name != "layers":
            child.to(device)
    return model.eval()


def load_model_dir(
    model: str | os.PathLike[str] | HubName,
    device: torch.device,
    dtype: torch.dtype,
    qwen2_as_diffusion: bool = False,
    with_tokenizer: bool = True,
    quantize: str = "none",
) -> LoadedModel:
    path = resolve_model_dir(model, qwen2_as_diffusion=qwen2_as_diffusion)
    config = read_config(path)
    family = pick_family(config, qwen2_as_diffusion)
    try:
        args = family.parse_args(config)
    except (TypeError, ValueError) as e:
        raise ModelLoadError(f"{path / 'config.json'}: {e}") from e
    with torch.device("meta"):
        skeleton = DiffusionTransformer(args)
    state = load_weights(path, family, skeleton, dtype)
    if args.tie_embeddings and "lm_head.weight" in state:  # only under family.stored_head_wins
        args = replace(args, tie_embeddings=False)
    tokenizer = load_tokenizer(path) if with_tokenizer else None
    mask_id, end_ids = special_ids(config, family, tokenizer, args.vocab_size)
    model_ = build_model(args, state, device, quantize)
    return LoadedModel(
        model_,
        family,
        tokenizer,
        mask_id,
        end_ids,
        path,
        read_threshold(path),
        *control_ids(config, tokenizer, args.vocab_size, end_ids),
    )
