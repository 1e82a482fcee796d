"""What looks like a credential is never shown (infill_engine/finish/secrets.py): planted secrets
of every kind, in the syntax of several languages, are found; ordinary lines are not, and on the
running Python's standard library (real code no rule was written against line by line) almost
no line is.

The tokens are made at random here, never written out: a repository should not hold strings
that secret scanners (and this module) take for real keys."""

from __future__ import annotations

import random
import string
import sysconfig
from pathlib import Path

import pytest
from planted import ALNUM, token

from infill_engine.finish import finish
from infill_engine.finish.secrets import FILTERED, entropy, find

RNG = random.Random(41)


def _rand(n: int, alphabet: str = ALNUM) -> str:
    return token(RNG, n, alphabet)


TOKENS = {
    "aws_access_key": "AKIA" + _rand(16, string.ascii_uppercase + string.digits),
    "github_token": "ghp_" + _rand(36),
    "github_pat": "github_pat_" + _rand(40),
    "gitlab_token": "glpat-" + _rand(20),
    "sk_key": "sk-proj-" + _rand(40),
    "slack_token": "xoxb-" + _rand(12, string.digits) + "-" + _rand(24),
    "stripe_key": "sk_live_" + _rand(24),
    "google_api_key": "AIza" + _rand(35),
    "huggingface_token": "hf_" + _rand(34),
    "npm_token": "npm_" + _rand(36),
    "sendgrid_key": "SG." + _rand(22) + "." + _rand(43),
    "jwt": "eyJ" + _rand(20) + ".eyJ" + _rand(30) + "." + _rand(43),
}
GENERIC = _rand(32, string.hexdigits.lower())  # no prefix: found by the name it is assigned to
PASSWORD = "Tr0ub4dor&" + _rand(3, string.digits)

# One line a language, with {name} and {value} to fill in.
ASSIGNMENTS = {
    "python": '{name} = "{value}"',
    "python-call": 'client = Client({name}="{value}")',
    "javascript": 'const {name} = "{value}";',
    "typescript": "export const {name}: string = '{value}';",
    "go": '{name} := "{value}"',
    "rust": 'let {name} = "{value}";',
    "json": '"{name}": "{value}",',
    "java": 'private static final String {name} = "{value}";',
}
NAMES = ("api_key", "API_TOKEN", "clientSecret", "authToken", "access_key_id", "db_password")


@pytest.mark.parametrize("kind", sorted(TOKENS))
@pytest.mark.parametrize("language", sorted(ASSIGNMENTS))
def test_every_known_token_shape_is_found_in_every_language(kind: str, language: str) -> None:
    line = ASSIGNMENTS[language].format(name="value", value=TOKENS[kind])
    assert find(line) == kind


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("language", sorted(ASSIGNMENTS))
def test_a_random_literal_under_a_secret_name_is_found(name: str, language: str) -> None:
    value = PASSWORD if "password" in name else GENERIC
    assert find(ASSIGNMENTS[language].format(name=name, value=value)) == "assigned_secret"


def test_blocks_urls_and_bearer_credentials() -> None:
    assert find("-----BEGIN RSA PRIVATE KEY-----") == "private_key"
    assert find("-----BEGIN OPENSSH PRIVATE KEY-----") == "private_key"
    assert find(f'DSN = "postgres://admin:{PASSWORD}@db.internal/app"') == "url_credential"
    assert find(f'headers = {{"Authorization": "Bearer {GENERIC}"}}') == "bearer_token"


ORDINARY = [
    'key = "user_id"',
    "token = tokens[0]",
    "password = getpass.getpass()",
    'secret_name = "db-password"',
    'AUTH_HEADER = "Authorization"',
    'API_KEY = os.environ["API_KEY"]',
    'password = "password"',
    'token_type = "bearer"',
    'FORCE_CHANGE_PASSWORD = "FORCE_CHANGE_PASSWORD"',
    'api_key = "<your-api-key>"',
    'api_key = "${OPENAI_API_KEY}"',
    'api_key = "xxxxxxxxxxxxxxxx"',
    'cache_key = f"{user.id}:{page}"',
    'url = "postgres://user:password@localhost/db"',
    'headers["Authorization"] = f"Bearer {token}"',
    'version = "1.2.3"',
    'color = "#ff00aa"',
    "sk-learn is spelled scikit-learn",
    "return jwt.encode(payload, key)",
    'if key == "a1b2c3d4e5f6":',  # a comparison assigns nothing
]


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_lines_are_not_secrets(line: str) -> None:
    assert find(line) is None


def test_the_standard_library_is_almost_never_taken_for_a_secret() -> None:
    """The false-positive rate on real code: under 1 line in 20,000 (measured: 3 of 731,745
    non-blank lines of CPython 3.11's standard library, docs/robustness.md)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    lines = flagged = 0
    for path in sorted(root.glob("*.py")) + sorted((root / "json").glob("*.py")):
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            if line.strip():
                lines += 1
                flagged += find(line.strip()) is not None
    assert lines > 50_000  # it read the library
    assert flagged / lines < 1 / 20_000, flagged


def test_entropy() -> None:
    assert entropy("aaaa") == 0.0
    assert entropy("abcd") == 2.0


def test_the_finish_holds_a_secret_back_and_counts_it() -> None:
    before = FILTERED.snapshot().get("github_token", 0)
    token = TOKENS["github_token"]
    assert finish(f'token = "{token}"', "def f():\n    ", "\n    return token\n", "python") is None
    assert FILTERED.snapshot().get("github_token", 0) == before + 1
    # the same line with an ordinary string is shown
    shown = finish('token = "anonymous"', "def f():\n    ", "\n    return token\n", "python")
    assert shown == 'token = "anonymous"'
