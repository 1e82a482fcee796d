"""`dllm-infill fill`: the hole at a line and column of a file, filled and decided as an editor
shows it. The model fills it; drafts come from the file itself and from its workspace (the
repository it is in, read by the language server's rules: infill_engine/workspace/); decide.py
finishes, ranks and gates them all for an invoked request, as the language server does."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import cli_args, languages
from .params import CACHE_MODES, DECODE_POLICIES

if TYPE_CHECKING:
    from .drafts import Draft
    from .engine import Engine
    from .params import InfillParams, InfillResult

SLOW_INDEX_S = 2.0  # a workspace read for longer is said on stderr, with how to skip it
QUANTIZE_HELP = "weight-only int8/int4 through torchao (the quant extra); default none"


def split_at(text: str, line: int, col: int) -> tuple[str, str]:
    """1-based line and column (as editors show them) -> (prefix, suffix)."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise ValueError(f"line {line} is outside the file (1..{len(lines)})")
    if not 1 <= col <= len(lines[line - 1]) + 1:
        raise ValueError(f"column {col} is outside line {line} (1..{len(lines[line - 1]) + 1})")
    offset = sum(len(x) + 1 for x in lines[: line - 1]) + col - 1
    return text[:offset], text[offset:]


@dataclass(frozen=True)
class Shown:
    """What `fill` answers at one hole."""

    text: str  # what an editor shows ("" for nothing)
    source: str  # "model", or the winning draft's source
    result: InfillResult  # the model's fill
    drafts: list[Draft]  # the drafts offered, best first
    note: str = ""  # a line for stderr: why nothing, or which draft won


def fill_at(
    engine: Engine,
    text: str,
    offset: int,
    language: str,
    params: InfillParams,
    model: str,
    carried: Sequence[Draft] = (),
    raw: bool = False,
    drafting: bool = True,
    model_languages: Sequence[str] | None = None,
) -> Shown:
    """The hole at `offset` of `text`: the model's fill (the span planner asked where the span
    is "auto"), and with `drafting` the drafts of the text and the workspace's `carried` ones,
    decided as an invoked request is (`raw`: the model's bare text; `model_languages`: the
    languages whose fills are shown, None: what the model's card says)."""
    from . import planner
    from .drafts import gather

    plan = None
    if params.span == "auto":  # the span planner, as the language server asks (planner.py)
        plan = planner.plan(text, offset, language, engine.encode,
                            max_positions=engine.args.max_positions,
                            block_size=params.block_size)  # fmt: skip
        params = replace(params, max_span=max(params.max_span, plan.max_span))
    r = engine.infill(text[:offset], text[offset:], params, plan=plan)
    if raw:
        return Shown(r.text, "model", r, [])
    found = gather(text, offset, carried=carried, python=language == "python") if drafting else []
    knows = languages.knows(languages.model_languages(model, model_languages), language)
    return _decided(r, text, offset, language, found, model, plan.kind if plan else "", knows)


def _decided(
    r: InfillResult, text: str, offset: int, language: str, found: list[Draft], model: str,
    kind: str, knows: bool,
) -> Shown:  # fmt: skip
    """What an editor shows for an invoked request (decide.py: the fill and the drafts
    finished against the whole file, ranked and gated as the language server does)."""
    from .decide import Policy, Seen, decide, trusted

    # as the language server: the model's fills shown only in the languages it knows
    policy = Policy(automatic=False, trust_model=trusted(model), model_knows=knows)
    best = decide([r.text], found, Seen.whole(text, offset, language, kind), policy)
    if not best:
        note = ("nothing to show: an editor would show no completion here (the model's text: "
                "--raw)")  # fmt: skip
        return Shown("", "model", r, found, note)
    if best[0].source == "model":
        return Shown(best[0].text, "model", r, found)
    where = next((d.where for d in found if d.text.strip() == best[0].text.strip()), "")
    own = decide([r.text], [], Seen.whole(text, offset, language, kind),
                 Policy(automatic=False, trust_model=True))  # fmt: skip
    note = (f"a draft ({best[0].source}, {where}, score {best[0].score:.2f}); the model's own "
            f"fill: {own[0].text if own else ''!r} (--no-drafts)")  # fmt: skip
    return Shown(best[0].text, best[0].source, r, found, note)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="dllm-infill fill", description="Fill the hole at a position."
    )
    ap.add_argument("file", type=Path)
    ap.add_argument("--line", type=int, required=True, help="1-based")
    ap.add_argument("--col", type=int, required=True, help="1-based")
    ap.add_argument("--model", default="builtin")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto", help="auto: bf16 on CUDA, fp32 on the CPU")
    ap.add_argument("--quantize", choices=("none", "int8", "int4"), default="none",
                    help=QUANTIZE_HELP)  # fmt: skip
    ap.add_argument("--qwen2-diffusion", action="store_true")
    ap.add_argument("--span", type=cli_args.span, default="auto", help="tokens, or auto")
    ap.add_argument("--decode", choices=DECODE_POLICIES, default="threshold")
    ap.add_argument("--threshold", type=cli_args.threshold,
                    help="τ in (0, 1]; default: the model's")  # fmt: skip
    ap.add_argument("--cache", choices=CACHE_MODES, default="dual")
    ap.add_argument("--block-size", type=cli_args.count, default=32)
    ap.add_argument("--min-tokens", type=cli_args.count, default=1,
                    help="hold end tokens off this long")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the completion with its metrics")
    ap.add_argument("--raw", action="store_true",
                    help="the model's bare text, without the editor's finishing")  # fmt: skip
    ap.add_argument("--no-drafts", action="store_true",
                    help="the model's fill alone (docs/drafts.md)")  # fmt: skip
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--workspace", type=Path, metavar="DIR",
                       help="draft from this folder's files too (default: the repository the "
                       "file is in, else its folder)")  # fmt: skip
    where.add_argument("--no-workspace", action="store_true", help="draft from the file alone")
    ap.add_argument("--model-languages", type=cli_args.listed(str), metavar="IDS",
                    help="languageIds the model knows, comma-separated: its fill is shown "
                    "only in these (default: its card's; the builtin model: python)")  # fmt: skip
    return ap


def params_of(a: argparse.Namespace) -> InfillParams:
    """The decoding parameters `fill`'s options name."""
    from . import InfillParams

    span = a.span
    return InfillParams(
        span=span, decode=a.decode, threshold=a.threshold, cache=a.cache,
        block_size=a.block_size, min_tokens=min(a.min_tokens, span) if span != "auto"
        else a.min_tokens,
    )  # fmt: skip


def fill(argv: list[str]) -> int:
    from . import load

    ap = parser()
    a = ap.parse_args(argv)
    if a.workspace is not None and not a.workspace.is_dir():
        ap.error(f"--workspace {a.workspace}: not a folder")
    try:
        text = a.file.read_text()
        prefix, _ = split_at(text, a.line, a.col)
        span = a.span
        params = params_of(a)
        engine = load(a.model, device=a.device, dtype=a.dtype,
                      qwen2_as_diffusion=a.qwen2_diffusion, quantize=a.quantize)  # fmt: skip
        if span != "auto" and span > engine.args.max_positions:  # before the scheduler says so
            raise ValueError(
                f"--span {span} exceeds the model's {engine.args.max_positions} positions"
            )
    except (OSError, ValueError) as e:
        print(f"dllm-infill fill: {e}", file=sys.stderr)
        return 2
    import grammars

    from .workspace import folder

    language = grammars.language_for_path(str(a.file)) or "plaintext"
    drafting = not (a.raw or a.no_drafts)
    root = None if a.no_workspace or not drafting else a.workspace or folder.root_of(a.file)
    index = folder.read(root) if root is not None else None
    if index is not None and (index.build_s > SLOW_INDEX_S or index.stopped):
        print(f"dllm-infill fill: workspace {root}: {index.summary()}, {index.build_s:.1f} s "
              "(--no-workspace: the file alone)", file=sys.stderr)  # fmt: skip
    carried = folder.drafts_for(index, a.file, text, len(prefix)) if index is not None else []
    if root is not None:  # where a workspace draft came from, relative to the workspace
        carried = [folder.relative(d, root) for d in carried]
    shown = fill_at(engine, text, len(prefix), language, params, a.model, carried, a.raw,
                    drafting, a.model_languages)  # fmt: skip
    if shown.note:
        print(f"dllm-infill fill: {shown.note}", file=sys.stderr)
    if a.json:
        r = shown.result
        fields = ("tokens", "nfe_full", "nfe_block", "elapsed_ms", "stop_reason", "span")
        out: dict[str, Any] = {"text": shown.text, "source": shown.source, "raw": r.text}
        out.update({k: getattr(r, k) for k in fields}, drafts=[asdict(d) for d in shown.drafts])
        out["workspace"] = None if index is None else {"root": str(root), **index.status()}
        print(json.dumps(out, indent=2))
    else:
        print(shown.text)
    return 0
