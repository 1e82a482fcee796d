; What a body holds before anyone wrote it: UnsupportedOperationException, "not implemented".
(throw_statement
  (object_creation_expression
    type: (type_identifier) @_t
    (#any-of? @_t "UnsupportedOperationException" "NotImplementedException"))) @stub
(throw_statement
  (object_creation_expression
    arguments: (argument_list
      (string_literal) @_m
      (#match? @_m "(?i)(not (yet )?implemented|unimplemented|todo)")))) @stub
(line_comment) @stub
(block_comment) @stub
