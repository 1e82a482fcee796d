; Shared by typescript and tsx: the node names agree.
[
  (statement_block)
  (class_body)
  (switch_body)
  (interface_body)
  (enum_body)
] @block
