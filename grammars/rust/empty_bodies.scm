; Braces with nothing between them, not even a comment (the anchors make "{" and "}"
; the first and last children, with no named node between them).
[
  (block . "{" . "}" .)
  (declaration_list . "{" . "}" .)
  (field_declaration_list . "{" . "}" .)
  (enum_variant_list . "{" . "}" .)
  (match_block . "{" . "}" .)
] @body
