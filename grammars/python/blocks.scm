; Bodies of defs, classes and compound statements alike.
(block) @block
