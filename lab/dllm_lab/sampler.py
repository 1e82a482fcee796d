"""Training examples for the builtin model, drawn deterministically from the corpus.

Three kinds of rows:

* plain windows (`ar_batch`): the autoregressive stage scores every token;
* LLaDA masked diffusion (`llada`): every token masked with probability t, weight 1/(t n);
* infill-shaped (`infill`): a window cut into prefix | middle | suffix (whole lines, multi-line
  blocks or random character spans), each piece tokenised on its own as the engine does. The
  span is a budget of len(middle) + extra tokens holding the middle followed by `<|endoftext|>`
  tokens; span positions are masked with probability t, so the model learns to end the span
  early and join the suffix.
* DreamOn's expand rows (`expand_fraction` of the infill rows): the span is too short for the
  middle; k disjoint pairs of adjacent middle tokens each become one masked `<|expand|>` target,
  so the model learns to ask for room where it has none (a mask decoded as `<|expand|>` becomes
  two masks). The end-token padding plays DreamOn's `<|delete|>` role for spans that are too long.

A `copy_fraction` of the infill rows cut a middle line that stands verbatim elsewhere in the
window (copy rows): code repeats itself, and the drafts that rank such lines (drafts/) gain
most from a model that copies what its context already says.

Any of these rows may be a repository row (`repo_fraction` of them): it opens with chunks of
other files of the same package directory, each under a `# path` comment line, exactly as the
language server places other files' chunks before the prefix (`context.build_extra`, whose
`chunk_text` header and newline are the file separator), so the model learns to read them.

Mask levels t are stratified across a batch (`mask_levels`), as MDLM does.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer
from torch import Tensor

from infill_engine.context import Tokens, build_extra

from .checkpoint import dreamon_ids, special_ids
from .corpus import SourceFile
from .recipe import Schedule


@dataclass
class Batch:
    ids: Tensor  # [B, T] model input (masked)
    targets: Tensor  # [B, T] true tokens
    masked: Tensor  # [B, T] bool, positions scored
    weight: Tensor  # [B] 1 / (t * normaliser)
    scale: Tensor | None = None  # [B, T] per-position loss scale (None = all 1)


Example = tuple[list[int], list[bool], float, list[float]]  # ids, masked, weight, scale
REPO_COMMENT = "#"  # the line comment the server puts before a Python file's chunk
ROOT_PREFIXES = ("site-packages/",)  # corpus-root prefixes the server's paths never carry


class Sampler:
    """Draws training examples from the corpus text, deterministically from its own RNG."""

    def __init__(
        self,
        files: list[SourceFile],
        tok: Tokenizer,
        sched: Schedule,
        seed: int,
        token_ids: Sequence[Tensor] | None = None,
    ) -> None:
        """`token_ids`: each file's ids as a 1-D tensor, already tokenised (plain windows are
        then slices of it, no tokenizer call)."""
        if not files:
            raise ValueError("the sampler needs at least one source file")
        if token_ids is not None and len(token_ids) != len(files):
            raise ValueError("token_ids must hold one id list per file")
        self.texts = [f.text for f in files]
        self.token_ids = token_ids
        self.names = [_server_path(f.rel) for f in files]
        self.dir_of = [f.rel.rsplit("/", 1)[0] if "/" in f.rel else "" for f in files]
        self.groups: dict[str, list[int]] = {}
        for i, d in enumerate(self.dir_of):
            if d:
                self.groups.setdefault(d, []).append(i)
        weights = [len(t) for t in self.texts]
        total = float(sum(weights))
        self.cum: list[float] = []
        acc = 0.0
        for w in weights:
            acc += w / total
            self.cum.append(acc)
        self.tok = tok
        self.t = sched
        self.rng = random.Random(seed)
        self.end_id, self.mask_id = special_ids(tok)
        self.expand_id = dreamon_ids(tok).get("expand_token_id")
        if sched.expand_fraction > 0 and self.expand_id is None:
            raise ValueError("expand_fraction > 0 needs a tokenizer that reserves <|expand|>")

    def _index(self) -> int:
        return min(bisect.bisect_left(self.cum, self.rng.random()), len(self.texts) - 1)

    def _encode(self, s: str) -> list[int]:
        return list(self.tok.encode(s).ids) if s else []

    def _tokens(self, s: str) -> Tokens:
        enc = self.tok.encode(s)
        return Tokens(enc.ids, enc.offsets)

    def _head(self, i: int) -> list[int]:
        """The opening of a repository row for file i: 1-3 chunks of other files of its package
        directory under their `# path` headers, within seq_len // 3 tokens; [] for other rows."""
        if self.t.repo_fraction <= 0 or self.rng.random() >= self.t.repo_fraction:
            return []
        peers = [j for j in self.groups.get(self.dir_of[i], []) if j != i]
        if not peers:
            return []
        budget = self.t.seq_len // 3
        chosen = self.rng.sample(peers, min(len(peers), self.rng.randint(1, 3)))
        chunks = [
            (self.names[j], self._cut_window(self.texts[j], self.rng.randint(budget, 4 * budget)))
            for j in chosen
        ]
        return list(build_extra(chunks, REPO_COMMENT, self._tokens, budget).ids)

    def _window(self, chars: int, i: int | None = None) -> str:
        return self._cut_window(self.texts[self._index() if i is None else i], chars)

    def _cut_window(self, text: str, chars: int) -> str:
        if len(text) <= chars:
            return text
        start = self.rng.randrange(0, len(text) - chars)
        nl = text.rfind("\n", 0, start)  # start at a line start, like a real file position
        start = nl + 1 if nl >= 0 and start - nl < 200 else start
        return text[start : start + chars]

    def plain(self) -> list[int]:
        """A window of seq_len tokens of plain text (end-padded): the autoregressive rows."""
        n = self.t.seq_len
        i = self._index()
        head = self._head(i)
        want = n - len(head)
        if self.token_ids is not None:
            toks = self.token_ids[i]
            start = self.rng.randrange(0, len(toks) - want + 1) if len(toks) > want else 0
            body = [int(x) for x in toks[start : start + want].tolist()]
        else:
            body = self._encode(self._window(want * 6, i))[:want]
        ids = head + body
        return ids + [self.end_id] * (n - len(ids))

    def llada(self, t: float) -> Example:
        n = self.t.seq_len
        ids = self.plain()
        masked = [self.rng.random() < t for _ in ids]
        if not any(masked):
            masked[self.rng.randrange(n)] = True
        return ids, masked, 1.0 / (t * n), [1.0] * n

    def _cut(self, text: str) -> tuple[int, int]:
        """Character offsets [a, b) of the middle: one line, a block of lines or a random span;
        for a copy row, a line whose text stands elsewhere in the window too."""
        starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n" and i + 1 < len(text)]
        if self.t.copy_fraction > 0 and self.rng.random() < self.t.copy_fraction:
            repeated = self._repeated(text, starts)
            if repeated is not None:
                return repeated
        kind = self.rng.random()
        if kind < 0.75 and len(starts) > 4:
            lo = len(starts) // 4
            first = self.rng.randrange(lo, max(lo + 1, len(starts) - 2))
            nlines = 1 if kind < 0.45 else self.rng.randint(2, 8)
            last = min(first + nlines, len(starts) - 1)
            return starts[first], starts[last]
        a = self.rng.randrange(len(text) // 4, max(len(text) // 4 + 1, len(text) * 3 // 4))
        return a, min(len(text), a + self.rng.randint(1, 120))

    def _repeated(self, text: str, starts: list[int]) -> tuple[int, int] | None:
        """A whole line (not the window's first or last) whose stripped text, 8 characters or
        more, stands on another line of the window; None when none does."""
        ends = [*starts[1:], len(text)]
        rows: dict[str, list[int]] = {}
        for k in range(1, len(starts) - 1):
            s = text[starts[k] : ends[k]].strip()
            if len(s) >= 8 and not s.startswith("#"):
                rows.setdefault(s, []).append(k)
        twice = [ks for ks in rows.values() if len(ks) >= 2]
        if not twice:
            return None
        k = self.rng.choice(self.rng.choice(twice))
        return starts[k], ends[k]

    def infill(self, t: float) -> Example:
        n = self.t.seq_len
        max_span = min(self.t.max_span, n // 2)
        for _ in range(20):
            i = self._index()
            text = self._window(n * 8, i)
            if len(text) < 40:
                continue
            a, b = self._cut(text)
            mid = self._encode(text[a:b])
            if not mid or len(mid) > max_span:
                continue
            expand: list[int] = []  # middle offsets that hold an <|expand|> target
            if len(mid) >= 2 and self.rng.random() < self.t.expand_fraction:
                mid, expand = self._merge_pairs(mid)
                extra = 0
            elif self.rng.random() < self.t.oracle_fraction:
                extra = 0
            else:
                extra = self.rng.randint(1, self.t.max_extra)
            span = min(max_span, len(mid) + extra)
            extra = span - len(mid)
            pre, suf = self._encode(text[:a]), self._encode(text[b:])
            head = self._head(i)
            room = n - span - len(head)
            keep_suf = min(len(suf), max(room // 4, room - len(pre), self.rng.randint(0, room)))
            keep_pre = min(len(pre), room - keep_suf)
            ids = head + pre[len(pre) - keep_pre :] + mid + [self.end_id] * extra + suf[:keep_suf]
            start = len(head) + keep_pre
            ids += [self.end_id] * (n - len(ids))
            masked = [False] * n
            for i in range(start, start + span):
                masked[i] = self.rng.random() < t
            for i in expand:  # <|expand|> is never visible: it stands for two unknown tokens
                masked[start + i] = True
            if not any(masked[start : start + span]):
                masked[start + self.rng.randrange(span)] = True
            first_end = start + len(mid)
            if self.t.mask_end_run and first_end < start + span and masked[first_end]:
                # At inference every position after the middle is still a mask when the model
                # must place the first end token; a visible end token right after it would give
                # the answer away. So a masked boundary hides the whole end run.
                for i in range(first_end, start + span):
                    masked[i] = True
            # The first end token marks the boundary and is what the engine's end rule acts on;
            # the padding after it is trivial once the boundary is known, so it weighs less and
            # cannot teach the model that an end token is the likeliest guess anywhere in a span.
            scale = [1.0] * n
            pad = self.t.end_pad_weight
            for i in range(first_end + 1, start + span):
                scale[i] = pad
            if first_end < start + span:
                scale[first_end] = self.t.first_end_weight
            return ids, masked, 1.0 / (t * span), scale
        return self.llada(t)

    def _merge_pairs(self, mid: list[int]) -> tuple[list[int], list[int]]:
        """`mid` with k disjoint adjacent pairs (1 <= k <= len/4) each replaced by one
        `<|expand|>`, and the offsets of those targets in the shortened middle."""
        assert self.expand_id is not None
        k = self.rng.randint(1, max(1, len(mid) // 4))
        firsts: set[int] = set()
        for i in self.rng.sample(range(len(mid) - 1), min(k, len(mid) - 1)):
            if not {i - 1, i, i + 1} & firsts:
                firsts.add(i)
        out: list[int] = []
        at: list[int] = []
        i = 0
        while i < len(mid):
            if i in firsts:
                at.append(len(out))
                out.append(self.expand_id)
                i += 2
            else:
                out.append(mid[i])
                i += 1
        return out, at

    def mask_levels(self, size: int) -> list[float]:
        """Stratified t for one batch (MDLM's low-discrepancy sampler): one uniform offset u,
        t_i = (i + u) / size, shuffled. Every batch spans (0, 1) evenly, so the 1/t weights of a
        few small-t rows cannot dominate one batch and starve the next."""
        if not self.t.stratified_t:
            return [max(self.rng.random(), 1e-3) for _ in range(size)]
        u = self.rng.random()
        levels = [max((i + u) / size, 1e-3) for i in range(size)]
        self.rng.shuffle(levels)
        return levels

    def batch(self, size: int) -> Batch:
        frac = self.t.infill_fraction
        rows = [
            self.infill(t) if self.rng.random() < frac else self.llada(t)
            for t in self.mask_levels(size)
        ]
        targets = torch.tensor([r[0] for r in rows], dtype=torch.long)
        masked = torch.tensor([r[1] for r in rows], dtype=torch.bool)
        ids = torch.where(masked, torch.full_like(targets, self.mask_id), targets)
        scale = torch.tensor([r[3] for r in rows], dtype=torch.float32)
        return Batch(ids, targets, masked, torch.tensor([r[2] for r in rows]), scale)

    def ar_batch(self, size: int) -> Tensor:
        """[size, seq_len] plain windows for the autoregressive stage (every token scored)."""
        return torch.tensor([self.plain() for _ in range(size)], dtype=torch.long)


def _server_path(rel: str) -> str:
    """The path the server would name a corpus file by: relative to its package's root."""
    for prefix in ROOT_PREFIXES:
        if rel.startswith(prefix):
            return rel[len(prefix) :]
    return rel
