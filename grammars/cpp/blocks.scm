; Function and statement bodies, and the brace bodies of namespace/extern, class/struct and
; enum.
[
  (compound_statement)
  (declaration_list)
  (field_declaration_list)
  (enumerator_list)
] @block
