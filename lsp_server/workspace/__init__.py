"""The workspace: the open documents and everything the server reads of the user's code.

documents.py: the open documents, the LSP rules that change them, each one's edit history.
viewed.py: excerpts of the documents seen last (next edits' context).
positions.py: the one converter between LSP positions, str and byte offsets.
trees.py: a document's tree-sitter tree, edited incrementally.
memory.py: memory given back when a large document closes.
crossfile.py: context from other files: the chunk store and its choice.
The workspace's files and their index (drafts' source) are infill_engine/workspace/: the
command line reads a workspace by the same rules.
"""
