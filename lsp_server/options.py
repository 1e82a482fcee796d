"""Settings of the language server: frozen dataclasses, read from `initializationOptions` or the
`dllm` section of `workspace/didChangeConfiguration`.

Keys are the camelCase names editors use (`decode.blockSize`), nested or dotted. Every bad value
is reported as a message and replaced by its default; a value past what the server can honour is
reported and used at its limit; the rest of the settings still apply. `fit_model` clamps, the
same way, what only a loaded model can judge (spans against its positions).

The checkers below are the settings' schema (`SCHEMA`), on infill_engine/fields.py's checks. A
cattrs converter does not replace them: its int, float and bool hooks convert ("12" -> 12, 3.7 ->
3) where these refuse with a message, and a cattrs class fails whole, where here each bad key
falls back alone and keys not given keep `base`'s value. Put through one converter, the same
messages took 20 lines more, checkers kept.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar
from urllib.parse import urlsplit

from infill_engine import model_names
from infill_engine.fields import flag, int_in, number_in
from infill_engine.params import (
    CACHE_MODES,
    DECODE_POLICIES,
    MAX_LOOKAHEAD,
    SPECULATE_MODES,
    InfillParams,
)
from infill_engine.service.listen import ServeError, parse_address

T = TypeVar("T")
DEBOUNCE_CEILING_MS = 400.0  # the longest any automatic trigger waits


@dataclass(frozen=True)
class EngineOptions:
    model: str = "builtin"  # "builtin", an HF-format directory, or ORG/NAME[@REVISION] (hub.py)
    device: str = "auto"  # "auto", "cpu", "cuda", "cuda:1", "mps"
    dtype: str = "auto"
    address: str | None = None  # engine service address; None = in-process
    # the service's token (engineToken, else $DLLM_SERVE_TOKEN); never shown in logs or status
    token: str | None = field(default=None, repr=False)
    quantize: str = "none"  # weight-only "int8" / "int4" of the in-process engine (torchao)
    # An OpenAI-compatible FIM endpoint (engineAddress "openai+https://HOST/v1", hosted_fim.py):
    # the model to ask for (None: the first its /models lists), and the environment variable
    # holding its key when engineToken is not set.
    api_model: str | None = None
    key_env: str = "DLLM_API_KEY"
    # The languageIds the model knows, its fills shown only there (infill_engine/languages.py);
    # None: what its card says (the builtin model: Python), else every language.
    languages: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DecodeOptions:
    policy: str = "threshold"
    threshold: float | None = None  # None: the τ the model recommends (else 0.9)
    block_size: int = 32
    max_span: int = 128  # the largest span the server asks for (tokens)
    span: int | None = None  # a fixed span length; None = planned per request
    min_tokens: int = 1  # the shortest completion, in tokens (end tokens are held off until then)
    cache: str = "dual"
    speculate: str = "off"  # guessed states (and drafts) checked in the same pass: speculate.py
    lookahead: int = 4


def decode_params(opts: DecodeOptions, min_tokens: int = 0) -> InfillParams:
    """The engine's settings for the fills of one hole: the span fixed by the user (at most
    `decode.maxSpan`) or "auto" (the planner's), at least `min_tokens` tokens and never fewer
    than `decode.minTokens` (each candidate's floor is cut to its own span)."""
    span = None if opts.span is None else min(opts.span, opts.max_span)
    floor = max(min_tokens, opts.min_tokens)
    return InfillParams(
        span="auto" if span is None else span,
        max_span=opts.max_span,
        block_size=opts.block_size,
        decode=opts.policy,  # type: ignore[arg-type]  # checked by _one_of
        threshold=opts.threshold,
        cache=opts.cache,  # type: ignore[arg-type]  # checked by _one_of
        speculate=opts.speculate,  # type: ignore[arg-type]  # checked by _one_of
        lookahead=opts.lookahead,
        min_tokens=floor if span is None else min(span, floor),
    )


@dataclass(frozen=True)
class ContextOptions:
    prefix_tokens: int = 1024  # model tokens of context before the cursor
    suffix_tokens: int = 512
    max_document_chars: int = 2_000_000  # larger documents get no completions (and a log line)
    # Chunks of other files of the workspace (crossfile.py) before the prefix, in a budget of
    # model tokens of their own; the engine gives them at most what the model's positions
    # leave beside the prefix, suffix and span.
    cross_file: bool = True
    cross_file_tokens: int = 512


@dataclass(frozen=True)
class CompletionOptions:
    # The delay of automatic triggers until the typing rhythm is learnt; then it adapts to typing
    # and model speed, never past DEBOUNCE_CEILING_MS (400): ghost text that waits longer after
    # the last keystroke looks broken, and an editor can add its own delay. Higher values are
    # clamped to it with a message. 0 = off. An invoked request never waits.
    debounce_ms: float = 75.0
    candidates: int = 3  # the most items an invoked request returns
    # The languageIds completed in; "*": every language. Drafts serve every language; the
    # model's fills are shown only in the languages it knows (engine.languages).
    languages: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class StatsOptions:
    # Count shown / accepted completions per language, on this machine only (telemetry.py):
    # nothing is ever sent anywhere. False: items carry no accept command and nothing is written.
    enabled: bool = True
    slow_ms: float = 2000.0  # the backend is "slow" while its recent median latency is over this


@dataclass(frozen=True)
class DraftOptions:
    # Drafts (docs/drafts.md): lines the code already has, ranked with the model's fills.
    enabled: bool = True
    # The confidence (0 to 1, drafts/gate.py) from which automatic triggers show a draft
    # (None: the calibrated GATE).
    gate: float | None = None
    # Show the model's own fills on automatic triggers too. None: yes for a real checkpoint,
    # no for the builtin model (its fills are rarely right).
    trust_model: bool | None = None
    workspace: bool = True  # index the workspace folders (workspace/index.py)
    max_file_bytes: int = 512 * 1024  # larger files are not indexed
    # The index's budget (workspace/files.py): the files, the bytes of text and the seconds it
    # takes at most; what it leaves out is said in its progress and in dllm/status.
    max_files: int = 20_000
    max_bytes: int = 256 << 20
    max_seconds: float = 30.0
    # Paths the index leaves out, as .gitignore patterns (VS Code's files.exclude is added).
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class NextEditOptions:
    # Next edits (textDocument/copilotInlineEdit, completion/next_edit.py): the edit that follows.
    enabled: bool = True
    gate: float | None = None  # 0 to 1, every kind's threshold; None: each kind's calibrated one
    model: bool | None = None  # the dLLM's rewrite tier; None: where drafts.trustModel says
    hosted_address: str | None = None  # a hosted next-edit API: mercury+https://HOST/PATH
    max_latency_ms: int = 300  # the longest a request waits for its candidates


@dataclass(frozen=True)
class Options:
    engine: EngineOptions = field(default_factory=EngineOptions)
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    context: ContextOptions = field(default_factory=ContextOptions)
    completion: CompletionOptions = field(default_factory=CompletionOptions)
    stats: StatsOptions = field(default_factory=StatsOptions)
    drafts: DraftOptions = field(default_factory=DraftOptions)
    next_edits: NextEditOptions = field(default_factory=NextEditOptions)
    token: str | None = None  # the shared secret a TCP client must send


class OverLimit(ValueError):
    """A value past what the server can honour: it is used at `limit`, with a message."""

    def __init__(self, reason: str, limit: Any) -> None:
        super().__init__(reason)
        self.limit = limit


def _text(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError("must be a non-empty string")
    return v


def _model(v: Any) -> str:
    """`model`: checked as the loader will (model_names.parse_name) before the load: a name too
    long or a revision that is no branch, tag or commit name is one message, the name cut."""
    text = _text(v)
    model_names.parse_name(text)  # a HubError is a ValueError: the message, then the default
    return text


def _optional_text(v: Any) -> str | None:
    return None if v is None or v == "" else _text(v)


def normalize_address(text: str) -> str:
    """An engine service address as `infill_engine.service.parse_address` reads it:
    `unix:PATH`, `tcp:HOST:PORT` (also written `tcp://HOST:PORT`) or `http://HOST:PORT`;
    ValueError if none of these."""
    try:
        address = parse_address(text)
    except ServeError as e:
        raise ValueError(str(e)) from None
    if address.kind != "unix" and address.port == 0:
        raise ValueError(f"must name a port, got {text[:200]!r}")
    return str(address)


FIM_PREFIX = "openai+"  # engineAddress of an OpenAI-compatible FIM endpoint (hosted_fim.py)
EDIT_PREFIX = "mercury+"  # nextEdits.hostedAddress: Inception's next-edit API, and its peers


def normalize_fim_address(text: str, prefix: str = FIM_PREFIX) -> str:
    """`openai+https://HOST[:PORT]/PATH` (or `openai+http://`), the base URL of an OpenAI-style
    API (`openai+https://api.inceptionlabs.ai/v1`) or one route of it (`.../v1/completions`),
    without its trailing slash; ValueError otherwise. A key in the URL (`user:key@`) is refused
    without echoing the address: keys go in engineToken or an environment variable. `prefix`:
    another API's scheme prefix, checked the same way (EDIT_PREFIX)."""
    url = text[len(prefix) :]
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry credentials; set engineToken or $DLLM_API_KEY instead")
    try:
        parts.port  # noqa: B018 (it raises on a bad port)
    except ValueError:
        raise ValueError(f"has a bad port: {text[:200]!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in url):
        raise ValueError(f"must be {prefix}https://HOST[:PORT]/PATH, got {text[:200]!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"takes no query or fragment, got {text[:200]!r}")
    return prefix + url.rstrip("/")


def _address(v: Any) -> str | None:
    if v is None or v == "":
        return None
    if not isinstance(v, str):
        raise ValueError(
            "must be a string, unix:PATH, tcp://HOST:PORT, http://HOST:PORT or "
            f"openai+https://HOST/PATH, got {type(v).__name__}"
        )
    if v.startswith(FIM_PREFIX):
        return normalize_fim_address(v)
    return normalize_address(v)


def _hosted(v: Any) -> str | None:
    if v is None or v == "":
        return None
    if not isinstance(v, str) or not v.startswith(EDIT_PREFIX):
        raise ValueError(f"must be {EDIT_PREFIX}https://HOST[:PORT]/PATH")
    return normalize_fim_address(v, EDIT_PREFIX)


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        if v not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return str(v)

    return check


def _env_name(v: Any) -> str:
    if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", v):
        raise ValueError("must be the name of an environment variable")
    return v


def _int_in(lo: int, hi: int) -> Callable[[Any], int]:
    return lambda v: int_in(v, "", lo, hi)  # the message is "setting KEY: must be ..."


def _float_in(lo: float, hi: float) -> Callable[[Any], float]:
    return lambda v: number_in(v, "", lo, hi)


def _or_none(check: Callable[[Any], T]) -> Callable[[Any], T | None]:
    def maybe(v: Any) -> T | None:
        return None if v is None else check(v)

    return maybe


def _debounce(v: Any) -> float:
    ms = _float_in(0.0, 60_000.0)(v)
    if ms > DEBOUNCE_CEILING_MS:
        raise OverLimit(
            f"{ms:g} ms is over the {DEBOUNCE_CEILING_MS:g} ms the server waits at most",
            DEBOUNCE_CEILING_MS,
        )
    return ms


def _bool(v: Any) -> bool:
    return flag(v, "")


def _span(v: Any) -> int | None:
    return None if v in (None, "auto") else _int_in(1, 512)(v)


def _languages(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list | tuple) or not all(isinstance(x, str) and x for x in v):
        raise ValueError("must be a list of language ids")
    return tuple(v)


def _patterns(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list | tuple) or not all(isinstance(x, str) and x for x in v):
        raise ValueError("must be a list of glob patterns")
    if len(v) > 1000 or any(len(x) > 1000 for x in v):
        raise ValueError("must be at most 1000 patterns of at most 1000 characters")
    return tuple(v)


# (section, field, key as editors spell it, checker)
SCHEMA: list[tuple[str, str, str, Callable[[Any], Any]]] = [
    ("engine", "model", "model", _model),
    ("engine", "device", "device", _text),
    ("engine", "dtype", "dtype", _text),
    ("engine", "address", "engineAddress", _address),
    ("engine", "token", "engineToken", _optional_text),
    ("engine", "quantize", "quantize", _one_of(("none", "int8", "int4"))),
    ("engine", "api_model", "engineModel", _optional_text),
    ("engine", "key_env", "engineApiKeyEnv", _env_name),
    ("engine", "languages", "modelLanguages", _or_none(_languages)),
    ("decode", "policy", "decode.policy", _one_of(DECODE_POLICIES)),
    ("decode", "threshold", "decode.threshold", _or_none(_float_in(0.0, 1.0))),
    ("decode", "block_size", "decode.blockSize", _int_in(1, 512)),
    ("decode", "max_span", "decode.maxSpan", _int_in(1, 512)),
    ("decode", "span", "decode.span", _span),
    ("decode", "min_tokens", "decode.minTokens", _int_in(0, 512)),
    ("decode", "cache", "decode.cache", _one_of(CACHE_MODES)),
    ("decode", "speculate", "decode.speculate", _one_of(SPECULATE_MODES)),
    ("decode", "lookahead", "decode.lookahead", _int_in(0, MAX_LOOKAHEAD)),
    ("context", "prefix_tokens", "context.prefixTokens", _int_in(0, 32768)),
    ("context", "suffix_tokens", "context.suffixTokens", _int_in(0, 32768)),
    ("context", "max_document_chars", "context.maxDocumentChars", _int_in(1, 1 << 30)),
    ("context", "cross_file", "context.crossFile", _bool),
    ("context", "cross_file_tokens", "context.crossFileTokens", _int_in(0, 32768)),
    ("completion", "debounce_ms", "debounceMs", _debounce),
    ("completion", "candidates", "candidates", _int_in(1, 8)),
    ("completion", "languages", "languages", _languages),
    ("stats", "enabled", "stats.enabled", _bool),
    ("stats", "slow_ms", "stats.slowMs", _float_in(1.0, 600_000.0)),
    ("drafts", "enabled", "drafts.enabled", _bool),
    ("drafts", "gate", "drafts.gate", _or_none(_float_in(0.0, 1.0))),
    ("drafts", "trust_model", "drafts.trustModel", _or_none(_bool)),
    ("drafts", "workspace", "drafts.workspace", _bool),
    ("drafts", "max_file_bytes", "drafts.maxFileBytes", _int_in(1024, 64 << 20)),
    ("drafts", "max_files", "drafts.maxFiles", _int_in(0, 1_000_000)),
    ("drafts", "max_bytes", "drafts.maxBytes", _int_in(1 << 20, 4 << 30)),
    ("drafts", "max_seconds", "drafts.maxSeconds", _float_in(0.1, 3600.0)),
    ("drafts", "exclude", "drafts.exclude", _patterns),
    ("next_edits", "enabled", "nextEdits.enabled", _bool),
    ("next_edits", "gate", "nextEdits.gate", _or_none(_float_in(0.0, 1.0))),
    ("next_edits", "model", "nextEdits.model", _or_none(_bool)),
    ("next_edits", "hosted_address", "nextEdits.hostedAddress", _hosted),
    ("next_edits", "max_latency_ms", "nextEdits.maxLatencyMs", _int_in(1, 60_000)),
]
# editor-side settings that arrive with the rest, not ours (VS Code's; copilot-lsp.nvim's)
_CLIENT_ONLY = {"serverPath", "editorInfo", "editorPluginInfo", "nextEditSuggestions"}
_KNOWN = {key for _, _, key, _ in SCHEMA} | {"token"} | _CLIENT_ONLY
_SECRET = {"engineToken"}  # described as set or not, never by value


MAX_UNKNOWN_TOLD = 8  # unknown keys named one by one; the rest are counted in one message


def _short(key: str, limit: int = 100) -> str:
    return key if len(key) <= limit else key[:limit] + "…"


def _flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and key not in _KNOWN:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def parse_options(raw: Any, base: Options | None = None) -> tuple[Options, list[str]]:
    """Options from an editor's settings object, and one message per value that was rejected
    (past MAX_UNKNOWN_TOLD unknown keys, one message counts the rest).

    `base` holds the current settings: keys absent from `raw` keep their value there.
    """
    opts = base or Options()
    if raw is None:
        return opts, []
    if not isinstance(raw, Mapping):
        return opts, [f"settings must be an object, got {type(raw).__name__}"]
    if isinstance(raw.get("dllm"), Mapping):
        raw = raw["dllm"]
    flat = _flatten(raw)
    unknown = [k for k in flat if k not in _KNOWN]
    # each is a popup: a client that sends every tool's settings must not bury the editor
    errors = [f"unknown setting {_short(k)!r} (ignored)" for k in unknown[:MAX_UNKNOWN_TOLD]]
    if len(unknown) > MAX_UNKNOWN_TOLD:
        errors.append(f"{len(unknown) - MAX_UNKNOWN_TOLD} more unknown settings (ignored)")
    for section, name, key, check in SCHEMA:
        if key not in flat:
            continue
        try:
            value = check(flat[key])
        except OverLimit as e:
            errors.append(f"setting {key!r}: {e}; using {e.limit!r}")
            value = e.limit
        except ValueError as e:
            default = getattr(getattr(Options(), section), name)
            errors.append(f"setting {key!r}: {e}; using the default {default!r}")
            value = default
        opts = replace(opts, **{section: replace(getattr(opts, section), **{name: value})})
    if "token" in flat:
        opts = replace(opts, token=flat["token"] if isinstance(flat["token"], str) else None)
    return opts, errors


def fit_model(opts: Options, positions: int) -> tuple[Options, list[str]]:
    """The settings clamped to a model of `positions` positions, and one message per clamped
    value. A span may take half the positions: the other half is the context around it, and
    a span past all of them fails every request."""
    limit = max(1, positions // 2)
    clamped: dict[str, Any] = {}
    notes = []
    for name, key in (("max_span", "decode.maxSpan"), ("span", "decode.span")):
        value = getattr(opts.decode, name)
        if value is not None and value > limit:
            notes.append(
                f"setting {key!r}: {value} does not fit the model's {positions} positions "
                f"(half are kept for context); using {limit}"
            )
            clamped[name] = limit
    return replace(opts, decode=replace(opts.decode, **clamped)), notes


def describe(opts: Options, nested: bool = False) -> dict[str, Any]:
    """The settings as editors spell them (dotted keys, or nested objects), for logs and status."""
    out: dict[str, Any] = {}
    for section, name, key, _ in SCHEMA:
        value = getattr(getattr(opts, section), name)
        value = list(value) if isinstance(value, tuple) else value
        if key in _SECRET and value is not None:
            value = "(set)"
        *path, leaf = key.split(".") if nested else [key]
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
