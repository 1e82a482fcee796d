; A block holding nothing but `pass` or `...`.
(block . (pass_statement) .) @body
(block . (expression_statement . (ellipsis) .) .) @body
