; What a body holds before anyone wrote it: placeholders, a docstring, "not implemented".
(pass_statement) @stub
(expression_statement (ellipsis)) @stub
(expression_statement (string)) @stub
(raise_statement (identifier) @_e (#eq? @_e "NotImplementedError")) @stub
(raise_statement
  (call function: (identifier) @_e (#eq? @_e "NotImplementedError"))) @stub
(comment) @stub
