; Braces with nothing between them, not even a comment (the anchors make "{" and "}"
; the first and last children, with no named node between them).
[
  (statement_block . "{" . "}" .)
  (class_body . "{" . "}" .)
  (switch_body . "{" . "}" .)
  (interface_body . "{" . "}" .)
  (enum_body . "{" . "}" .)
] @body
