; The name sits inside the declarator: f(), *f(), **f(); any other declarator shape still
; matches, unnamed (one match per function: the first alternative that fits).
(function_definition
  declarator: [
    (function_declarator declarator: (_) @name)
    (pointer_declarator declarator: (function_declarator declarator: (_) @name))
    (pointer_declarator
      declarator: (pointer_declarator declarator: (function_declarator declarator: (_) @name)))
    (_)
  ]
  body: (compound_statement) @body) @function
