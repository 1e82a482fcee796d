; Braces with nothing between them, not even a comment (the anchors make "{" and "}"
; the first and last children, with no named node between them).
[
  (block . "{" . "}" .)
  (field_declaration_list . "{" . "}" .)
] @body
