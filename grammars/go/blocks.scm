; A switch or select has no body node of its own: its cases hang off the statement.
[
  (block)
  (field_declaration_list)
] @block
