; Braces with nothing between them, not even a comment (the anchors make "{" and "}"
; the first and last children, with no named node between them).
[
  (compound_statement . "{" . "}" .)
  (declaration_list . "{" . "}" .)
  (field_declaration_list . "{" . "}" .)
  (enumerator_list . "{" . "}" .)
] @body
