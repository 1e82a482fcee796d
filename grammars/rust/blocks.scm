; Blocks of code, and the brace bodies of impl/trait/mod, struct, enum and match.
[
  (block)
  (declaration_list)
  (field_declaration_list)
  (enum_variant_list)
  (match_block)
] @block
