; What a body holds before anyone wrote it: todo!(), unimplemented!().
(macro_invocation
  macro: (identifier) @_m (#any-of? @_m "todo" "unimplemented")) @stub
(line_comment) @stub
(block_comment) @stub
