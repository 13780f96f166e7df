"""Error memory: tool failures, their fixes and outcomes, across sessions."""
