"""The editing commands: fill a function body, regenerate or refine a selection.

editing.py: the commands, each from a document to an `Edit`.
function_bodies.py: where the body of the function around a position is.
stubs.py: what an edit would overwrite: a stub, or code the user wrote.
"""
