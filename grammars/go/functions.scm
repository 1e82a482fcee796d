(function_declaration
  name: (identifier) @name
  body: (block) @body) @function
(method_declaration
  name: (field_identifier) @name
  body: (block) @body) @function
(func_literal
  body: (block) @body) @function

; `f := func() {...}`: the literal takes the name; it also matches above, unnamed.
(short_var_declaration
  left: (expression_list . (identifier) @name .)
  right: (expression_list . (func_literal body: (block) @body) @function .))
