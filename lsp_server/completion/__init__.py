"""Inline completion and next edits: from a document and a cursor to the ghost text the editor
shows, and to the edit that follows the user's last one.

inline.py: `Completer`: the order of work, cheapest first, then the engine.
cursor.py: no automatic completion inside a comment or a string.
debounce.py: the adaptive delay of automatic triggers.
snooze.py: N minutes with no automatic suggestions.
typeahead.py: the typed-ahead cache.
next_edit.py: `NextEdits`: the next-edit sources asked together, and the gate over them.
edit_sources.py: the sources beside structure: the model's rewrite, a hosted next-edit API.
"""
