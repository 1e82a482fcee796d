"""Credentials made at random for the tests that plant them: a repository should not hold
strings that secret scanners (and infill_engine/finish/secrets.py) take for real keys."""

from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits


def token(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    """n characters of `alphabet`, with a digit and a letter where it has both."""
    mixed = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if not mixed or (any(c.isdigit() for c in s) and any(c.isalpha() for c in s)):
            return s
