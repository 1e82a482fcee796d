[
  (statement_block)
  (class_body)
  (switch_body)
] @block
