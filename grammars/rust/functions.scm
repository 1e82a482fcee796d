; Functions, methods, trait defaults; closures only with a block body.
(function_item
  name: (_) @name
  body: (block) @body) @function
(closure_expression
  body: (block) @body) @function

; `let f = |x| {...}`: the closure takes the name; it also matches above, unnamed.
(let_declaration
  pattern: (identifier) @name
  value: (closure_expression body: (block) @body) @function)
