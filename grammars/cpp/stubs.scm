; What a body holds before anyone wrote it: a throw that says "not implemented".
(throw_statement
  (call_expression
    arguments: (argument_list
      (string_literal) @_m
      (#match? @_m "(?i)(not (yet )?implemented|unimplemented|todo)")))) @stub
(comment) @stub
