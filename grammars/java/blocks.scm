[
  (block)
  (constructor_body)
  (class_body)
  (interface_body)
  (enum_body)
  (annotation_type_body)
  (switch_block)
] @block
