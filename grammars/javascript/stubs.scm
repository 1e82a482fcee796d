; What a body holds before anyone wrote it: throw new Error("not implemented"), "TODO".
(throw_statement
  (new_expression
    arguments: (arguments
      (string) @_m
      (#match? @_m "(?i)(not (yet )?implemented|unimplemented|todo)")))) @stub
(empty_statement) @stub
(comment) @stub
