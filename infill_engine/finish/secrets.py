"""What looks like a credential: a completion that holds one is never shown.

Drafts copy lines from the workspace and a model can recite what it read, so a key that stands
anywhere in the user's code could come back as ghost text in a file that is about to be shared.
As Copilot does, nothing that looks like a secret is shown. Two kinds of rule, after
detect-secrets' plugins and GitHub's secret-scanning patterns (written here, not copied):

- Token shapes (`SHAPES`): providers' key prefixes (AWS, GitHub, GitLab, OpenAI and Anthropic
  `sk-`, Slack, Stripe, Google, Hugging Face, npm, PyPI, SendGrid, Twilio), private-key blocks,
  JSON Web Tokens, a random-looking `Bearer` credential, and credentials inside a URL
  (`scheme://user:secret@host`).
- A string literal assigned to (or keyed by) a name that says it is secret (`key`, `token`,
  `secret`, `password`, `credential`, `auth`, in any case and with anything around them), when
  the literal looks random: at least 8 characters without spaces, letters and digits both, and
  a Shannon entropy of at least 3 bits a character; a `password`-like name needs no entropy,
  only 6 characters and a digit or a symbol. Placeholders (`xxx`, `<...>`, `${...}`,
  `changeme`, `your-key-here`) and references (`os.environ[...]`) are not literals of this kind.

`find(text)` names the rule that matched, or None. Every front's finishing step asks it
(finish/__init__.py, the HTTP routes), and `FILTERED` counts what was held back, by rule, for
`dllm/status` and `/metrics`. False positives on held-out code are in docs/robustness.md.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter

SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
        ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        ("github_pat", r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
        ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
        ("sk_key", r"\bsk-[A-Za-z0-9][A-Za-z0-9_-]{10,}"),  # OpenAI, Anthropic, DeepSeek...
        ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("slack_webhook", r"hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/\w+"),
        ("stripe_key", r"\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
        ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
        ("npm_token", r"\bnpm_[A-Za-z0-9]{36}"),
        ("pypi_token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
        ("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
        ("twilio_key", r"\bSK[0-9a-f]{32}\b"),
        ("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----"),
        ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    )
)
_BEARER = re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/-]{20,}=*)")
_URL_CREDENTIAL = re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s/:@'\"]+:([^\s/@'\"]+)@")
_SECRET_WORD = r"(?:key|token|secret|passw(?:or)?d|pwd|passwd|credential|auth)"
_SECRET_NAME = rf"[A-Za-z0-9_.\-]*{_SECRET_WORD}[A-Za-z0-9_]*"
# name = "value", name: "value", name := "value", "name": "value", name => "value", (and `const`)
_ASSIGNED = re.compile(
    rf"""(?ix) ["']? (?P<name>{_SECRET_NAME}) ["']?
    (?: \s*:\s*[\w<>\[\]|.]{{1,40}} | \s+[\w<>\[\]|.]{{1,40}} )?  # a type: `: str`, Go's ` string`
    \s* (?::=|=>|:|=(?!=)) \s*
    [bruf]{{0,2}} (?P<q>["'`]) (?P<value>[^"'`\n]{{6,200}}) (?P=q)"""
)
_PLACEHOLDER = re.compile(
    r"(?i)^(?:x+|\*+|\.+|<[^>]*>|\$\{[^}]*\}|\{\{[^}]*\}\}|%\(?\w*\)?s|changeme|example\w*|"
    r"your[-_ ]?\w+|dummy\w*|test\w*|fake\w*|placeholder\w*|secret|password|token|none|null)$"
)
_NOT_IN_KEYS = " {%\\:<"  # templates, formats, escapes, paths and markup: not a credential
_PASSWORDISH = re.compile(r"(?i)passw(?:or)?d|pwd|passwd")


class Filtered:
    """Completions held back, by rule: a counter the fronts report (thread-safe)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, rule: str) -> None:
        with self._lock:
            self._counts[rule] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())


FILTERED = Filtered()


def entropy(s: str) -> float:
    """Shannon entropy of `s`, in bits a character."""
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _random_looking(value: str, password: bool) -> bool:
    """Whether a literal looks like a credential rather than a name, a template or a path."""
    if any(c in value for c in _NOT_IN_KEYS) or _PLACEHOLDER.match(value):
        return False
    digits = sum(c.isdigit() for c in value)
    if password:  # any literal password is one, but a constant's name (FORCE_CHANGE_PASSWORD)
        words = value.replace("_", "").replace("-", "")
        return len(value) >= 6 and not words.isalpha() and (digits > 0 or not words.isalnum())
    letters = sum(c.isalpha() for c in value)
    return len(value) >= 8 and digits >= 2 and letters >= 2 and entropy(value) >= 3.0


def find(text: str) -> str | None:
    """The rule a credential in `text` matches, or None."""
    for name, pattern in SHAPES:
        if pattern.search(text):
            return name
    for m in _BEARER.finditer(text):
        if _random_looking(m.group(1), password=False):
            return "bearer_token"
    for m in _URL_CREDENTIAL.finditer(text):
        if _random_looking(m.group(1), password=True):
            return "url_credential"
    for m in _ASSIGNED.finditer(text):
        password = bool(_PASSWORDISH.search(m.group("name")))
        if _random_looking(m.group("value"), password):
            return "assigned_secret"
    return None


def held_back(text: str) -> bool:
    """Whether `text` holds a credential; counted in FILTERED when it does."""
    rule = find(text)
    if rule is not None:
        FILTERED.add(rule)
    return rule is not None
