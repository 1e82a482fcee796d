; The name sits inside the declarator: f(), *f(), &f(), A::f(); any other declarator shape
; still matches, unnamed (one match per function: the first alternative that fits).
(function_definition
  declarator: [
    (function_declarator declarator: (_) @name)
    (pointer_declarator declarator: (function_declarator declarator: (_) @name))
    (reference_declarator (function_declarator declarator: (_) @name))
    (_)
  ]
  body: (compound_statement) @body) @function
(lambda_expression
  body: (compound_statement) @body) @function

; `auto f = [](...) {...};`: the lambda takes the name; it also matches above, unnamed.
(declaration
  declarator: (init_declarator
    declarator: (identifier) @name
    value: (lambda_expression body: (compound_statement) @body) @function))
