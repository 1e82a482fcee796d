; Braces with nothing between them, not even a comment (the anchors make "{" and "}"
; the first and last children, with no named node between them).
[
  (block . "{" . "}" .)
  (constructor_body . "{" . "}" .)
  (class_body . "{" . "}" .)
  (interface_body . "{" . "}" .)
  (enum_body . "{" . "}" .)
  (annotation_type_body . "{" . "}" .)
  (switch_block . "{" . "}" .)
] @body
