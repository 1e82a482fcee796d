"""Next edits: from the edits a user just made to the one that follows.

history.py: a document's recent edits, coalesced and bounded (the language server feeds it).
suggestion.py: one proposed edit, with its kind and score, and the gate that shows at most one.
structure.py: candidates from structure, no model (every rule after the last edits): references of
a renamed name; with shapes.py (lines of the same shape, twins of a deletion), repeats.py (the
same replacement at another occurrence) and calls.py (call sites of a changed signature).
text.py: the tokens, shapes and lines those rules compare by.
region.py, rewrite.py: the model's tier, the region around the cursor rewritten; verify.
"""

from .history import Edit, History
from .suggestion import KINDS, Suggestion

__all__ = ["KINDS", "Edit", "History", "Suggestion"]
