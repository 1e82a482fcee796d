"""The workspace's files, read as hostile input, and the index of them that drafts come from.

files.py: which files may be read, and reading them (regular, under the root, bounded).
index.py: the workspace index, for drafts: built on the caller's thread (the language server
runs it on a thread of its own; `dllm-infill fill` calls it directly).

Both belong to the runtime, not to one front: the language server and the command line read a
workspace by the same rules.
"""
