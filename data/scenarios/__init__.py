"""One module per bundled trace; each has build() -> list of JSON lines (header first)."""
