"""The conversation: messages, history.json, the archive, the dual-write Store, compaction,
the rolling summary and the summarizer."""
