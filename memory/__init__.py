"""Her memory: episodes (the fact log), the LLM call ledger, and later diary and semantic recall."""
