; Every def, methods and nested functions included; a lambda has no block body.
(function_definition
  name: (identifier) @name
  body: (block) @body) @function
