; What a body holds before anyone wrote it: panic("not implemented"), panic("TODO").
(call_expression
  function: (identifier) @_f (#eq? @_f "panic")
  arguments: (argument_list
    (interpreted_string_literal) @_m
    (#match? @_m "(?i)(not (yet )?implemented|unimplemented|todo)"))) @stub
(comment) @stub
