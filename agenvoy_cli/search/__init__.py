"""Search over a session: keyword, semantic and hybrid."""
