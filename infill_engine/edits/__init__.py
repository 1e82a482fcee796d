"""Next edits: from the edits a user just made to the one that follows.

history.py: a document's recent edits, coalesced and bounded (the language server feeds it).
suggestion.py: one proposed edit, with its kind and score, and the gate that shows at most one.
structure.py: candidates from structure, no model: references of a renamed name, lines of the
same shape, call sites of a changed signature, twins of a deletion.
tokens.py: the tokens and shapes those rules compare lines by.
"""

from .history import Edit, History
from .suggestion import KINDS, Suggestion

__all__ = ["KINDS", "Edit", "History", "Suggestion"]
