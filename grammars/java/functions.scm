; Methods and constructors with a body; lambdas only with a block body.
(method_declaration
  name: (identifier) @name
  body: (block) @body) @function
(constructor_declaration
  name: (identifier) @name
  body: (constructor_body) @body) @function
(compact_constructor_declaration
  name: (identifier) @name
  body: (block) @body) @function
(lambda_expression
  body: (block) @body) @function

; `Runnable r = () -> {...};`: the lambda takes the name; it also matches above, unnamed.
(variable_declarator
  name: (identifier) @name
  value: (lambda_expression body: (block) @body) @function)
