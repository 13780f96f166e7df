"""One thin module per command: parse -> store call -> emit."""
