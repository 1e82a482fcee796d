; Function, class and type declarations are not statements here.
[
  (expression_statement)
  (return_statement)
  (if_statement)
  (for_statement)
  (for_in_statement)
  (while_statement)
  (do_statement)
  (try_statement)
  (switch_statement)
  (throw_statement)
  (break_statement)
  (continue_statement)
  (labeled_statement)
  (debugger_statement)
  (import_statement)
] @statement

; A variable declaration is a statement in a block, not as a for loop's initializer.
(program [(lexical_declaration) (variable_declaration)] @statement)
(statement_block [(lexical_declaration) (variable_declaration)] @statement)
(switch_case [(lexical_declaration) (variable_declaration)] @statement)
(switch_default [(lexical_declaration) (variable_declaration)] @statement)
(export_statement [(lexical_declaration) (variable_declaration)] @statement)
