; Function and statement bodies, and the brace bodies of struct/union and enum.
[
  (compound_statement)
  (field_declaration_list)
  (enumerator_list)
] @block
