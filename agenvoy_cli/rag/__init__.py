"""Document RAG: named databases of files, walked, parsed, chunked, indexed and searched."""
