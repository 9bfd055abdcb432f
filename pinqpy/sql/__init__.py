"""The SQL dialect: statement syntax tree (:mod:`.ast`) and its parser (:mod:`.parser`)."""
