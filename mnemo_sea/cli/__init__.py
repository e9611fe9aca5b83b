"""The `mnemo-sea` command line: one module per command group; `app` assembles them."""
