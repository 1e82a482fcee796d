; Declarations, expressions and methods; arrow functions only with a block body.
(function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @function
(generator_function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @function
(function_expression
  name: (identifier)? @name
  body: (statement_block) @body) @function
(generator_function
  name: (identifier)? @name
  body: (statement_block) @body) @function
(method_definition
  name: (_) @name
  body: (statement_block) @body) @function
(arrow_function
  body: (statement_block) @body) @function

; An anonymous function takes the name it is bound to; it also matches above, unnamed.
(variable_declarator
  name: (identifier) @name
  value: [
    (arrow_function body: (statement_block) @body)
    (function_expression !name body: (statement_block) @body)
    (generator_function !name body: (statement_block) @body)
  ] @function)
(pair
  key: (_) @name
  value: [
    (arrow_function body: (statement_block) @body)
    (function_expression !name body: (statement_block) @body)
    (generator_function !name body: (statement_block) @body)
  ] @function)
(public_field_definition
  name: (_) @name
  value: [
    (arrow_function body: (statement_block) @body)
    (function_expression !name body: (statement_block) @body)
    (generator_function !name body: (statement_block) @body)
  ] @function)
