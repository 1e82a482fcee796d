; `let`, expressions ended by `;` (or by a block: if, for, match ...), and a block's tail
; expression, which has no statement node of its own. Items (fn, struct ...) are not
; statements here.
[
  (let_declaration)
  (expression_statement)
] @statement
(block (_expression) @statement .)
