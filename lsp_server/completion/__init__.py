"""Inline completion: from a document and a cursor to the ghost text the editor shows.

inline.py: `Completer`: the order of work, cheapest first, then the engine.
cursor.py: no automatic completion inside a comment or a string.
debounce.py: the adaptive delay of automatic triggers.
snooze.py: N minutes with no automatic suggestions.
typeahead.py: the typed-ahead cache.
"""
